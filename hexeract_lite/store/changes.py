"""Changes to a stored schedule in place: ensure, update, move (reschedule), run now.

Each is a *plan*: a pure function of the row and the store's now, returning the
answer and the row to write back (None: nothing), run through
:meth:`~hexeract_lite.store.base.ScheduleStore.modify_record`.

The lease rule: a change never touches a live lease, so the firing in flight still
acknowledges; its values change at once, and a new next firing waits in
``next_after_lease`` for that acknowledgement. A one-shot schedule in flight cannot
be moved (:class:`NotChangeable`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar
from uuid import UUID

import attrs

from ..errors import (
    DuplicateSchedule,
    InvalidArgument,
    InvalidTrigger,
    NotChangeable,
    ScheduleNotFound,
    StoreError,
)
from ..interval import Interval
from ..message import ScheduledMessage, Target
from ..policy import POLICY_FIELDS, SchedulePolicy, policy_arguments
from ..snapshot import ScheduleStatus
from ..trigger import MACROS, CronExpression, Trigger
from ..zoned import parse_zoned
from .record import ScheduleRecord, grace_ms

__all__ = [
    "Change",
    "EnsureResult",
    "Plan",
    "ensure_plan",
    "ensure_rounds",
    "move_plan",
    "run_now_plan",
    "update_plan",
]

T = TypeVar("T")
Plan = Callable[[ScheduleRecord, datetime], tuple[T, ScheduleRecord | None]]
"""A change: (the row, the store's now) -> (the answer, the row to write or None)."""


class EnsureResult(enum.StrEnum):
    """What ``ensure`` did.

    .. versionadded:: 0.2.0
    """

    CREATED = "created"
    """The schedule was missing (or cancelled) and is now stored as declared."""
    UPDATED = "updated"
    """It existed with other values; they were changed in place."""
    UNCHANGED = "unchanged"
    """It existed exactly as declared; nothing was written."""


@attrs.frozen(kw_only=True)
class Change:
    """What ``update`` changes; None leaves a field as it is."""

    event_type: str | None = None
    payload_json: str | None = None
    target: Target | None = None
    cron: CronExpression | None = None
    max_attempts: int | None = None
    misfire_grace: timedelta | None = None
    set_misfire_grace: bool = False
    """True: ``misfire_grace`` is the new grace (None: no grace); False: leave it."""
    keep_zone: bool = False
    """True: ``cron`` was given without a zone; it is read on the stored rule's zone."""
    policy: tuple[tuple[str, object], ...] = ()
    """The policy values to change, ``(name, value)`` (None: back to the default)."""

    @property
    def empty(self) -> bool:
        """True when it changes nothing."""
        return self == Change(keep_zone=self.keep_zone)

    def policy_of(self, current: SchedulePolicy | None) -> SchedulePolicy | None:
        """``current`` with this change's policy values; a ``catch_up`` other than
        ``"all"`` drops the stored limit.
        """
        values = policy_arguments(current) or dict.fromkeys(POLICY_FIELDS)
        values.update(self.policy)
        given = dict(self.policy)
        if "catch_up" in given and "catch_up_limit" not in given and given["catch_up"] != "all":
            values["catch_up_limit"] = None
        return SchedulePolicy.of(**values)


def _canonical(payload_json: str) -> str:
    """The payload as comparable JSON: keys sorted, ``-0.0`` as ``0.0`` (as PostgreSQL reads it)."""
    value = json.loads(payload_json, parse_float=lambda text: float(text) or 0.0)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _named(row: ScheduleRecord) -> str:
    return "" if row.name is None else f" (name {row.name!r})"


def _refuse_unchangeable(row: ScheduleRecord, what: str) -> None:
    """Refuse a terminal row, and one whose message does not decode whole (its error)."""
    if row.is_terminal:
        raise NotChangeable(
            row.schedule_id, f"is {row.status().value}: {what} refused{_named(row)}"
        )
    row.message()  # a rule, target or payload another tool broke raises here


def _place(row: ScheduleRecord, at: datetime, now: datetime, *, jittered: bool = False) -> None:
    """Make ``at`` the row's next firing under the lease rule; ``jittered``: ``at`` is a
    rule's instant, due plus the row's jitter.
    """
    row.backfill_until = None
    if row.live_lease(now) is not None:
        if row.trigger_kind == "delay":
            raise NotChangeable(
                row.schedule_id,
                f"is leased until {row.leased_until}: its one firing is in flight or"
                f" waiting out a retry's backoff, and cannot be moved before then{_named(row)}",
            )
        row.next_after_lease = at
        return
    row.place_firing(at, jittered=jittered)
    row.attempts = 0
    row.last_error = None
    row.leased_until = None
    row.next_after_lease = None


def _next_of(trigger: Trigger, now: datetime) -> datetime:
    nxt = trigger.next_after(now)
    if nxt is None:
        raise InvalidArgument(f"{trigger.label()} has no instant after {now.isoformat()}")
    return nxt


def _same_rule(kind: str, stored: str | None, declared: str | None) -> bool:
    """True when the stored and declared rule texts fire at the same instants (same
    cron meaning and zone; same interval period and grid).
    """
    if stored == declared:
        return True
    if stored is None or declared is None:
        return False
    if kind == "cron":
        meaning = _cron_meaning(stored)
        return meaning is not None and meaning == _cron_meaning(declared)
    if kind != "interval":
        return False
    try:
        old, new = Interval.parse(stored), Interval.parse(declared)
    except InvalidTrigger:
        return False
    return old.every == new.every and (old.anchor - new.anchor) % old.every == timedelta(0)


def _cron_meaning(text: str) -> tuple[object, ...] | None:
    """A cron text's zone, daylight saving rule and the field sets cronsim reads (Sunday
    as 0): equal for texts that fire at the same instants. None when unreadable.
    """
    try:
        cron = CronExpression.parse(text)
    except InvalidTrigger:
        return None
    from cronsim import CronSim  # parse imported it already

    expression = cron.expression.strip()
    rule = MACROS.get(expression.lower(), " ".join(expression.split()))
    try:
        sim = CronSim(rule, datetime(2000, 1, 1))
        fields = (sim.seconds, sim.minutes, sim.hours, sim.days, sim.months)
        weekdays = frozenset(
            (day[0] % 7, day[1]) if isinstance(day, tuple) else day % 7 for day in sim.weekdays
        )
        day_and = bool(sim.day_and)
    except Exception:  # another cronsim than this reads: compare the text only
        return None
    sets = tuple(frozenset(field) for field in fields)
    return (cron.tz, cron.every_real_hour, *sets, weekdays, day_and)


ENSURE_ROUNDS = 8
"""How many times :func:`ensure_rounds` inserts again after the row it met was deleted."""


def ensure_rounds(
    message: ScheduledMessage,
    insert: Callable[[], None],
    modify: Callable[[], EnsureResult],
) -> EnsureResult:
    """``ensure``'s steps: ``insert`` (CREATED), or on :class:`DuplicateSchedule`
    ``modify``; a row deleted in between is inserted again, at most
    :data:`ENSURE_ROUNDS` times (then :class:`StoreError`).
    """
    for _ in range(ENSURE_ROUNDS):
        try:
            insert()
        except DuplicateSchedule:
            pass
        else:
            return EnsureResult.CREATED
        try:
            return modify()
        except ScheduleNotFound:
            continue
    raise StoreError(
        f"ensure of {message.name!r} ({message.schedule_id}): the row was deleted between"
        f" its insert and its update {ENSURE_ROUNDS} times in a row; try again"
    )


def check_same_kind(schedule_id: UUID, stored: str, message: ScheduledMessage) -> None:
    """:class:`NotChangeable` when ``message`` has another trigger kind than ``stored``."""
    if stored != message.trigger.kind:
        raise NotChangeable(
            schedule_id,
            f"(name {message.name!r}) is a {stored} schedule, declared as"
            f" {message.trigger.kind}: cancel it to declare it again with another trigger kind",
        )


def ensure_plan(message: ScheduledMessage, max_attempts: int) -> Plan[EnsureResult]:
    """The plan of ``ensure`` for an existing row.

    Cancelled: stored again, fresh (CREATED). Another trigger kind:
    :class:`NotChangeable`. The same values (payload as JSON, rule by meaning, a
    one-shot's instant unless ended; a cron rule's first firing not compared):
    UNCHANGED. Else changed in place (UPDATED), a new rule's next firing its first
    instant after now; an ended row keeps its status.
    """

    def plan(row: ScheduleRecord, now: datetime) -> tuple[EnsureResult, ScheduleRecord | None]:
        if row.cancelled_at is not None:
            fresh = ScheduleRecord.new(message, max_attempts, now)
            return EnsureResult.CREATED, fresh
        check_same_kind(row.schedule_id, row.trigger_kind, message)
        new = row.copy()
        new.name = message.name
        new.event_type = message.event_type
        new.payload = message.payload_json
        new.target_kind = message.target.kind
        new.target_routing_key = message.target.routing_key
        new.max_attempts = max_attempts
        new.misfire_grace_ms = grace_ms(message.misfire_grace)
        recurring = message.trigger.is_recurring
        same_rule = _same_rule(row.trigger_kind, row.rule_text, message.trigger.expression)
        if not same_rule:
            new.set_rule_text(message.trigger.expression)
        same_policy = row.policy() == message.policy
        if not same_policy:
            new.set_policy(message.policy, now)
        same = (
            row.name == new.name
            and row.event_type == new.event_type
            and _canonical(row.payload) == _canonical(new.payload)
            and row.target_kind == new.target_kind
            and row.target_routing_key == new.target_routing_key
            and row.max_attempts == new.max_attempts
            and row.misfire_grace_ms == new.misfire_grace_ms
            and same_rule
            and same_policy
            and (recurring or row.is_terminal or row.scheduled_for == message.scheduled_for)
        )
        if same:
            return EnsureResult.UNCHANGED, None
        if not row.is_terminal:
            if recurring and not same_rule:
                _place(new, _next_of(message.trigger, now), now, jittered=True)
            elif not recurring and row.scheduled_for != message.scheduled_for:
                _place(new, message.scheduled_for, now)
        return EnsureResult.UPDATED, new

    return plan


def _in_stored_zone(cron: CronExpression, row: ScheduleRecord) -> CronExpression:
    """``cron`` read on the zone of the row's stored rule (a cron row's)."""
    zone, _ = parse_zoned(row.rule_text or "")
    return cron if zone == cron.tz else CronExpression.parse(cron.expression, tz=zone)


def update_plan(change: Change) -> Plan[bool]:
    """The plan of ``update``: change the given fields of a live row; True when something
    differed. ``cron`` on a non-cron row: :class:`NotChangeable`; ``keep_zone`` keeps
    the stored zone.
    """

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        _refuse_unchangeable(row, "update")
        if change.cron is not None and row.trigger_kind != "cron":
            raise NotChangeable(
                row.schedule_id,
                f"is a {row.trigger_kind} schedule: it has no cron rule to change{_named(row)}",
            )
        new = row.copy()
        if change.event_type is not None:
            new.event_type = change.event_type
        if change.payload_json is not None and _canonical(change.payload_json) != _canonical(
            row.payload
        ):
            new.payload = change.payload_json
        if change.target is not None:
            new.target_kind = change.target.kind
            new.target_routing_key = change.target.routing_key
        if change.max_attempts is not None:
            new.max_attempts = change.max_attempts
        if change.set_misfire_grace:
            new.misfire_grace_ms = grace_ms(change.misfire_grace)
        if change.policy:
            if row.trigger_kind == "delay":
                raise NotChangeable(
                    row.schedule_id,
                    f"is a one-shot schedule: end_at, max_firings, jitter and catch_up go"
                    f" with a recurring one{_named(row)}",
                )
            new.set_policy(change.policy_of(row.policy()), now)
        cron = change.cron
        if cron is not None and change.keep_zone:
            cron = _in_stored_zone(cron, row)
        if cron is not None and str(cron) != row.rule_text:
            new.set_rule_text(str(cron))
            _place(new, _next_of(Trigger.cron(cron), now), now, jittered=True)
        return (False, None) if new == row else (True, new)

    return plan


def move_plan(at: datetime) -> Plan[bool]:
    """The plan of ``reschedule(id, at)``: the next firing is ``at`` (lease rule)."""

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        _refuse_unchangeable(row, "reschedule")
        new = row.copy()
        _place(new, at, now)
        return (False, None) if new == row else (True, new)

    return plan


def run_now_plan() -> Plan[bool]:
    """The plan of ``run_now``: the next firing is now; a one-shot in flight: False.
    Paused: :class:`NotChangeable`.
    """

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        _refuse_unchangeable(row, "run now")
        if row.status() is ScheduleStatus.PAUSED:
            raise NotChangeable(row.schedule_id, f"is paused: resume it to run it now{_named(row)}")
        if row.live_lease(now) is not None and row.trigger_kind == "delay":
            return False, None
        new = row.copy()
        _place(new, now, now)
        return True, new

    return plan
