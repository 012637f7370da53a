"""ScheduleRecord: one schedule's row, as every store keeps it, in Python types."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from .._json import STRICT_DECODER, strict_loads
from ..errors import InvalidMessage, InvalidTrigger
from ..interval import Interval
from ..message import ScheduledMessage, Target
from ..policy import DEFAULT_CATCH_UP_LIMIT, Firing, SchedulePolicy, first_firing, jitter_offset
from ..snapshot import LeasedOccurrence, ScheduleSnapshot, ScheduleStatus
from ..trigger import CronExpression, Trigger
from .columns import COLUMN_NAMES

_SCAN_JSON: Callable[[str, int], tuple[object, int]] = STRICT_DECODER.scan_once  # type: ignore[attr-defined]


def load_payload(text: str) -> object:
    """strict_loads for a stored payload; a lone JSON value is scanned directly."""
    try:
        value, end = _SCAN_JSON(text, 0)
    except (StopIteration, TypeError, ValueError, RecursionError):
        return strict_loads(text)
    return value if end == len(text) else strict_loads(text)


@functools.lru_cache(maxsize=1024)
def cached_target(kind: str, routing_key: str | None) -> Target:
    """``Target(kind, routing_key)``, built once per pair; an invalid pair raises every time."""
    return Target(kind, routing_key)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=2048)
def _cached_rule(kind: str, text: str) -> Trigger:
    """The cron or interval trigger of a stored rule text, parsed once."""
    if kind == "cron":
        return Trigger("cron", cron_expression=CronExpression.parse(text))
    return Trigger("interval", interval=Interval.parse(text))


POLICY_MARK = "POLICY "
"""Prefixes the stored ``cron_expr`` of a schedule with a policy, so that a reader
that knows no policies refuses the row instead of firing it wrongly."""


def rule_text_of(cron_expr: str | None) -> str | None:
    """The rule's text of a stored ``cron_expr``: without its :data:`POLICY_MARK`."""
    if cron_expr is not None and cron_expr.startswith(POLICY_MARK):
        return cron_expr[len(POLICY_MARK) :]
    return cron_expr


def stored_rule_text(text: str | None, policy: SchedulePolicy | None) -> str | None:
    """The ``cron_expr`` to store for a rule's ``text`` (marked under a ``policy``)."""
    if text is None or policy is None:
        return text
    return POLICY_MARK + text


def policy_columns(
    policy: SchedulePolicy | None,
) -> tuple[datetime | None, int | None, int | None, str | None, int | None]:
    """``end_at``, ``max_firings``, ``jitter_ms``, ``catch_up``, ``catch_up_limit`` as
    stored for ``policy`` (NULL for each default)."""
    if policy is None:
        return None, None, None, None, None
    return (
        policy.end_at,
        policy.max_firings,
        None if policy.jitter is None else policy.jitter // _MS,
        None if policy.catch_up == "latest" else policy.catch_up,
        None if policy.catch_up_limit == DEFAULT_CATCH_UP_LIMIT else policy.catch_up_limit,
    )


def policy_of(
    end_at: datetime | None,
    max_firings: int | None,
    jitter_ms: int | None,
    catch_up: str | None,
    catch_up_limit: int | None,
) -> SchedulePolicy | None:
    """The policy stored columns describe (None: all NULL); an unknown ``catch_up``
    raises ValueError (the row is malformed).
    """
    if (end_at, max_firings, jitter_ms or None, catch_up, catch_up_limit) == (None,) * 5:
        return None
    if catch_up not in (None, "skip", "all"):
        raise ValueError(f"catch_up is {catch_up!r:.60}: expected NULL, 'skip' or 'all'")
    return SchedulePolicy(
        end_at=end_at,
        max_firings=max_firings,
        jitter=timedelta(milliseconds=jitter_ms) if jitter_ms else None,
        catch_up=catch_up if catch_up in ("skip", "all") else "latest",  # type: ignore[arg-type]
        catch_up_limit=DEFAULT_CATCH_UP_LIMIT if catch_up_limit is None else catch_up_limit,
    )


def insert_columns(message: ScheduledMessage) -> tuple[Any, ...]:
    """What an insert stores beyond the message's plain fields: ``scheduled_for`` (jitter
    included), ``cron_expr`` (marked), then the policy and jitter offset columns.
    """
    policy = message.policy
    text = message.trigger.expression
    if policy is None:
        return (message.scheduled_for, text, None, None, None, None, None, None)
    first = first_firing(message.schedule_id, message.trigger, policy, message.scheduled_for)
    end_at, max_firings, jitter_ms, catch_up, catch_up_limit = policy_columns(policy)
    text = stored_rule_text(text, policy)
    offset_ms = first.offset // _MS or None
    return (first.due, text, end_at, max_firings, jitter_ms, offset_ms, catch_up, catch_up_limit)


def rule_trigger(trigger_kind: str, cron_expr: str | None) -> Trigger | None:
    """The recurring trigger a row's ``trigger_kind`` and ``cron_expr`` describe; None
    for a delay. Raises :class:`InvalidTrigger` for a malformed rule text and ValueError
    for a kind that is none of :data:`TRIGGER_KINDS`."""
    if trigger_kind in ("cron", "interval"):
        return _cached_rule(trigger_kind, rule_text_of(cron_expr) or "")
    if trigger_kind != "delay":
        raise ValueError(_kind_problem(trigger_kind))
    return None


def _kind_problem(trigger_kind: object) -> str:
    return f"trigger_kind must be 'delay', 'cron' or 'interval', got {trigger_kind!r:.60}"


def grace_ms(grace: timedelta | None) -> int | None:
    """The stored ``misfire_grace_ms`` of a grace (None: no grace)."""
    return None if grace is None else grace // _MS


def grace_of(stored: int | None) -> timedelta | None:
    """The grace a stored ``misfire_grace_ms`` describes (None: no grace)."""
    return None if stored is None else timedelta(milliseconds=stored)


_MS = timedelta(milliseconds=1)

TRIGGER_KINDS = ("delay", "cron", "interval")
"""The ``trigger_kind`` values a row may hold."""


_MESSAGE_COLUMNS = tuple(
    COLUMN_NAMES.index(name)
    for name in ("trigger_kind", "cron_expr", "target_kind", "target_routing_key")
)


def message_problem(row: Sequence[Any]) -> str:
    """Why a row's (registry order) trigger or target columns do not decode ('' if they do)."""
    trigger_kind, cron_expr, target_kind, routing_key = (row[i] for i in _MESSAGE_COLUMNS)
    if trigger_kind not in TRIGGER_KINDS:
        return _kind_problem(trigger_kind)
    if cron_expr is not None and not isinstance(cron_expr, str):
        return f"cron_expr is not text: {cron_expr!r:.60}"
    try:
        rule_trigger(str(trigger_kind), cron_expr)
    except InvalidTrigger as exc:
        return f"cron_expr: {exc}"
    if target_kind not in ("mediator", "outbox", "bus"):
        return f"target_kind must be 'mediator', 'outbox' or 'bus', got {target_kind!r:.60}"
    try:
        Target(target_kind, routing_key)
    except (InvalidMessage, TypeError) as exc:
        return f"target_routing_key: {exc}"
    return ""


@attrs.define(slots=True)
class ScheduleRecord:
    """The columns of the reference's table, one attribute each, in the registry's
    order (:data:`~hexeract_lite.store.columns.COLUMNS`)."""

    schedule_id: uuid.UUID
    event_type: str
    payload: str
    trigger_kind: str
    cron_expr: str | None
    scheduled_for: datetime
    target_kind: str
    target_routing_key: str | None
    attempts: int
    max_attempts: int
    leased_until: datetime | None
    paused: bool
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None = None
    cancelled_at: datetime | None = None
    dead_lettered_at: datetime | None = None
    name: str | None = None
    next_after_lease: datetime | None = None
    """The next firing a change made during a live lease set: the lease's fenced
    ``reschedule``/``delivered`` acknowledgement moves ``scheduled_for`` here."""
    misfire_grace_ms: int | None = None
    end_at: datetime | None = None
    max_firings: int | None = None
    firings: int | None = None
    jitter_ms: int | None = None
    jitter_offset_ms: int | None = None
    catch_up: str | None = None
    catch_up_limit: int | None = None
    backfill_until: datetime | None = None
    pause_note: str | None = None
    snoozes: int | None = None
    abort_requested: str | None = None

    @classmethod
    def new(cls, message: ScheduledMessage, max_attempts: int, now: datetime) -> ScheduleRecord:
        """The row ``insert`` writes for ``message``."""
        due, text, end_at, max_firings, jitter_ms, offset_ms, catch_up, limit = insert_columns(
            message
        )
        return cls(
            schedule_id=message.schedule_id,
            event_type=message.event_type,
            payload=message.payload_json,
            trigger_kind=message.trigger.kind,
            cron_expr=text,
            scheduled_for=due,
            target_kind=message.target.kind,
            target_routing_key=message.target.routing_key,
            attempts=0,
            max_attempts=max_attempts,
            leased_until=None,
            paused=False,
            last_error=None,
            created_at=now,
            name=message.name,
            misfire_grace_ms=grace_ms(message.misfire_grace),
            end_at=end_at,
            max_firings=max_firings,
            jitter_ms=jitter_ms,
            jitter_offset_ms=offset_ms,
            catch_up=catch_up,
            catch_up_limit=limit,
        )

    # -- the policy (hexeract_lite.policy) ----------------------------------------

    def policy(self) -> SchedulePolicy | None:
        """The row's policy (None: none)."""
        return policy_of(
            self.end_at, self.max_firings, self.jitter_ms, self.catch_up, self.catch_up_limit
        )

    @property
    def offset(self) -> timedelta:
        """The jitter of the firing held: ``scheduled_for`` less the rule's instant."""
        return timedelta(milliseconds=self.jitter_offset_ms or 0)

    def firing(self) -> Firing:
        """The firing the row holds."""
        offset = self.offset
        return Firing(self.scheduled_for - offset, offset, self.firings or 0)

    @property
    def rule_text(self) -> str | None:
        """The rule's text, without the policy mark of the stored ``cron_expr``."""
        return rule_text_of(self.cron_expr)

    def set_rule_text(self, text: str | None) -> None:
        """Store a new rule text (marked when the row has a policy)."""
        self.cron_expr = stored_rule_text(text, self.policy())

    def set_policy(self, policy: SchedulePolicy | None, now: datetime) -> None:
        """Store ``policy`` (firings kept), re-marking the rule text; a firing not in
        flight gets the new jitter.
        """
        text = self.rule_text
        (self.end_at, self.max_firings, self.jitter_ms, self.catch_up, self.catch_up_limit) = (
            policy_columns(policy)
        )
        self.cron_expr = stored_rule_text(text, policy)
        if not self.is_terminal and self.live_lease(now) is None:
            self.place_firing(self.firing().instant, jittered=True)

    def place_firing(self, instant: datetime, *, jittered: bool) -> None:
        """Hold the firing at ``instant`` (a rule instant: plus its jitter when ``jittered``)."""
        offset = timedelta(0)
        if jittered and self.jitter_ms:
            offset = jitter_offset(self.policy(), self.trigger(), self.schedule_id, instant)
        self.scheduled_for = instant + offset
        self.jitter_offset_ms = offset // _MS or None

    def live_lease(self, now: datetime) -> datetime | None:
        """``leased_until`` while it is live (``> now``), else None."""
        leased_until = self.leased_until
        return leased_until if leased_until is not None and leased_until > now else None

    @property
    def is_terminal(self) -> bool:
        """Delivered, cancelled or dead-lettered."""
        return (
            self.delivered_at is not None
            or self.cancelled_at is not None
            or self.dead_lettered_at is not None
        )

    def status(self) -> ScheduleStatus:
        """The status derived from the row."""
        return ScheduleStatus.derive(
            delivered_at=self.delivered_at,
            cancelled_at=self.cancelled_at,
            dead_lettered_at=self.dead_lettered_at,
            paused=self.paused,
        )

    def trigger(self) -> Trigger:
        """The trigger the row describes (a delay fires at ``scheduled_for``)."""
        rule = rule_trigger(self.trigger_kind, self.cron_expr)
        return Trigger("delay", at=self.scheduled_for) if rule is None else rule

    def target(self) -> Target:
        """The target the row describes."""
        return cached_target(self.target_kind, self.target_routing_key)

    def message(self) -> ScheduledMessage:
        """The message to dispatch for the row's current occurrence."""
        return ScheduledMessage(
            schedule_id=self.schedule_id,
            event_type=self.event_type,
            payload=load_payload(self.payload),
            payload_json=self.payload,
            target=self.target(),
            trigger=self.trigger(),
            scheduled_for=self.scheduled_for - self.offset
            if self.jitter_offset_ms
            else self.scheduled_for,
            name=self.name,
            misfire_grace=grace_of(self.misfire_grace_ms),
            policy=self.policy(),
        )

    def leased(self) -> LeasedOccurrence:
        """The claim result for a row just claimed."""
        assert self.leased_until is not None
        return LeasedOccurrence(
            message=self.message(),
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            leased_until=self.leased_until,
            retrying=self.last_error is not None,
            backfill_until=self.backfill_until,
            firings=self.firings or 0,
            jitter_offset=self.offset,
            snoozes=self.snoozes or 0,
        )

    def snapshot(self) -> ScheduleSnapshot:
        """The public read-only view of the row."""
        return ScheduleSnapshot(
            schedule_id=self.schedule_id,
            status=self.status(),
            scheduled_for=self.scheduled_for,
            attempts=self.attempts,
            max_attempts=self.max_attempts,
            trigger=self.trigger(),
            last_error=self.last_error,
            event_type=self.event_type,
            target=self.target(),
            payload_json=self.payload,
            leased_until=self.leased_until,
            created_at=self.created_at,
            delivered_at=self.delivered_at,
            cancelled_at=self.cancelled_at,
            dead_lettered_at=self.dead_lettered_at,
            name=self.name,
            misfire_grace=grace_of(self.misfire_grace_ms),
            backfill_until=self.backfill_until,
            pause_note=self.pause_note if self.paused else None,
            next_after_lease=self.next_after_lease,
            policy=self.policy(),
            firings=self.firings or 0,
            jitter_offset=self.offset,
            snoozes=self.snoozes or 0,
            abort_requested=self.abort_requested,
        )

    def copy(self) -> ScheduleRecord:
        """A shallow copy (every field is immutable)."""
        return attrs.evolve(self)


# A column added to the registry must be added here too (and the other way round).
assert tuple(field.name for field in attrs.fields(ScheduleRecord)) == COLUMN_NAMES
