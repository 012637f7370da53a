"""ScheduleRecord: one schedule's row, as every store keeps it, in Python types.

Stores convert their rows to a record and let it build the public values, so the
in-memory store and the SQL stores derive status, snapshots and messages the same way.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

from .._json import STRICT_DECODER, strict_loads
from ..errors import InvalidMessage, InvalidTrigger
from ..interval import Interval
from ..message import ScheduledMessage, Target
from ..snapshot import LeasedOccurrence, ScheduleSnapshot, ScheduleStatus
from ..trigger import CronExpression, Trigger
from .columns import COLUMN_NAMES

_SCAN_JSON: Callable[[str, int], tuple[object, int]] = STRICT_DECODER.scan_once  # type: ignore[attr-defined]


def load_payload(text: str) -> object:
    """:func:`~hexeract_lite._json.strict_loads` for a stored payload, its errors
    included (NaN, the infinities and numbers beyond a float are refused). A payload read
    back (every claimed row has one) is almost always one JSON value and nothing
    around it: the decoder's scanner reads that directly, without ``loads``'
    whitespace handling; anything else gets ``json.loads`` itself."""
    try:
        value, end = _SCAN_JSON(text, 0)
    except (StopIteration, TypeError, ValueError, RecursionError):
        return strict_loads(text)
    return value if end == len(text) else strict_loads(text)


@functools.lru_cache(maxsize=1024)
def cached_target(kind: str, routing_key: str | None) -> Target:
    """``Target(kind, routing_key)``, built (and validated) once per pair: rows read
    back share it (a Target is immutable). An invalid pair raises every time."""
    return Target(kind, routing_key)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1024)
def cached_cron_trigger(expression: str) -> Trigger:
    """The cron trigger of ``expression`` (with its ``CRON_TZ=`` prefix, if any), parsed
    once (a Trigger is immutable)."""
    return Trigger("cron", cron_expression=CronExpression.parse(expression))


@functools.lru_cache(maxsize=1024)
def cached_interval_trigger(text: str) -> Trigger:
    """The interval trigger of a stored ``@every <duration> from <anchor>`` text, parsed
    once."""
    return Trigger("interval", interval=Interval.parse(text))


def rule_trigger(trigger_kind: str, cron_expr: str | None) -> Trigger | None:
    """The recurring trigger a row's ``trigger_kind`` and ``cron_expr`` describe; None
    for any other kind. Raises :class:`InvalidTrigger` for a malformed rule text."""
    if trigger_kind == "cron":
        return cached_cron_trigger(cron_expr or "")
    if trigger_kind == "interval":
        return cached_interval_trigger(cron_expr or "")
    return None


def grace_ms(grace: timedelta | None) -> int | None:
    """The stored ``misfire_grace_ms`` of a grace (None: no grace)."""
    return None if grace is None else grace // _MS


def grace_of(stored: int | None) -> timedelta | None:
    """The grace a stored ``misfire_grace_ms`` describes (None: no grace)."""
    return None if stored is None else timedelta(milliseconds=stored)


_MS = timedelta(milliseconds=1)

TRIGGER_KINDS = ("delay", "cron", "interval")
"""The ``trigger_kind`` values a row may hold."""


def rule_problem(trigger_kind: object, cron_expr: object) -> str:
    """Why a row's trigger columns do not decode ('' when they do): an unknown kind, or
    a cron or interval text that does not parse (a ``CRON_TZ=`` prefix naming a zone
    this machine does not know included)."""
    if trigger_kind not in TRIGGER_KINDS:
        return f"trigger_kind must be 'delay', 'cron' or 'interval', got {trigger_kind!r:.60}"
    if cron_expr is not None and not isinstance(cron_expr, str):
        return f"cron_expr is not text: {cron_expr!r:.60}"
    try:
        rule_trigger(str(trigger_kind), cron_expr)
    except InvalidTrigger as exc:
        return f"cron_expr: {exc}"
    return ""


def message_problem(
    trigger_kind: object, cron_expr: object, target_kind: object, routing_key: object
) -> str:
    """Why a row's trigger or target columns do not decode ('' when they do)."""
    problem = rule_problem(trigger_kind, cron_expr)
    if problem:
        return problem
    if target_kind not in ("mediator", "outbox", "bus"):
        return f"target_kind must be 'mediator', 'outbox' or 'bus', got {target_kind!r:.60}"
    try:
        Target(target_kind, routing_key)  # type: ignore[arg-type]
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
        return cls(
            schedule_id=message.schedule_id,
            event_type=message.event_type,
            payload=message.payload_json,
            trigger_kind=message.trigger.kind,
            cron_expr=message.trigger.expression,
            scheduled_for=message.scheduled_for,
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
        )

    def resume_plan(self, next: datetime | None, now: datetime) -> tuple[bool, datetime | None]:
        """The contract's ``resume`` rule for this row, shared by every store.

        Returns ``(resumes, realign_to)``: a terminal or unpaused row does not resume;
        with no ``next`` given, a cron or interval row whose ``scheduled_for`` is past
        (``< now``) realigns to its first instant after ``now``, or stays paused when it
        has none;
        ``realign_to`` None means: only clear the flag.
        """
        if self.is_terminal or not self.paused:
            return False, None
        rule = rule_trigger(self.trigger_kind, self.cron_expr)
        if next is None and rule is not None and self.scheduled_for < now:
            next = rule.next_after(now)
            if next is None:
                return False, None
        return True, next

    def live_lease(self, now: datetime) -> datetime | None:
        """``leased_until`` while it is live (``> now``), else None.

        Control operations never clear or change a live lease: a worker holding it
        may be dispatching the occurrence right now, and its acknowledgement (fenced by
        that lease) must still apply. Only ``cancel`` ends it (the cancellation wins).
        """
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
            scheduled_for=self.scheduled_for,
            name=self.name,
            misfire_grace=grace_of(self.misfire_grace_ms),
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
            snoozes=self.snoozes or 0,
            abort_requested=self.abort_requested,
        )

    def copy(self) -> ScheduleRecord:
        """A shallow copy (every field is immutable)."""
        return attrs.evolve(self)


# A column added to the registry must be added here too (and the other way round).
assert tuple(field.name for field in attrs.fields(ScheduleRecord)) == COLUMN_NAMES
