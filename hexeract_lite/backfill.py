"""Backfill: fire a recurring schedule's instants of a window, in order
(docs/howto/backfill.md).

While ``scheduled_for <= backfill_until`` a schedule is *backfilling*: each delivery
moves it to the rule's next instant after the one delivered (:func:`window_next`), each
firing with the occurrence id its rule gives that instant; past the window it goes on
on its rule.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ._time import rfc3339, to_utc_ms
from .errors import InvalidArgument, NotChangeable
from .snapshot import LeasedOccurrence
from .store.changes import Plan, _place
from .store.record import ScheduleRecord, rule_trigger
from .trigger import Trigger

__all__ = [
    "DEFAULT_BACKFILL_LIMIT",
    "MAX_BACKFILL_LIMIT",
    "backfill_plan",
    "check_window",
    "window_instants",
    "window_next",
]

DEFAULT_BACKFILL_LIMIT = 1000
"""How many instants one backfill may fire unless told otherwise."""

MAX_BACKFILL_LIMIT = 100_000
"""The largest ``limit`` a backfill takes; also how far an over-limit window is counted."""

_MS = timedelta(milliseconds=1)


def check_window(start: object, end: object, limit: object) -> tuple[datetime, datetime, int]:
    """``start`` and ``end`` as UTC milliseconds (``start`` rounded up, so no instant
    before it is in the window) and ``limit``; raise :class:`InvalidArgument` naming the
    bad value: a naive or non-datetime bound, ``end`` before ``start``, a ``limit`` that
    is not an integer from 1 to :data:`MAX_BACKFILL_LIMIT`."""
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_BACKFILL_LIMIT
    ):
        raise InvalidArgument(
            f"backfill limit must be an integer from 1 to {MAX_BACKFILL_LIMIT}, got {limit!r}"
        )
    first = to_utc_ms(start, "backfill start", InvalidArgument, round_up=True)
    last = to_utc_ms(end, "backfill end", InvalidArgument)
    if last < first:
        raise InvalidArgument(f"backfill end {rfc3339(last)} is before its start {rfc3339(first)}")
    return first, last, limit


def window_instants(trigger: Trigger, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The rule's instants in ``[start, end]``, in order, at most ``limit`` + 1 of them
    (one more than the limit says the window is over it)."""
    found: list[datetime] = []
    nxt = trigger.next_after(start - _MS)
    while nxt is not None and nxt <= end and len(found) <= limit:
        found.append(nxt)
        nxt = trigger.next_after(nxt)
    return found


def _count(trigger: Trigger, start: datetime, end: datetime) -> str:
    """How many instants the rule has in ``[start, end]``, as text: exact for an
    interval, counted up to :data:`MAX_BACKFILL_LIMIT` for a cron rule."""
    interval = trigger.interval
    if interval is not None:
        first = interval.next_after(start - _MS)
        if first is None or first > end:
            return "0"
        return str((end - first) // interval.every + 1)
    found = window_instants(trigger, start, end, MAX_BACKFILL_LIMIT)
    more = len(found) > MAX_BACKFILL_LIMIT
    return f"more than {MAX_BACKFILL_LIMIT}" if more else str(len(found))


def _named(row: ScheduleRecord) -> str:
    return "" if row.name is None else f" (name {row.name!r})"


def _label(row: ScheduleRecord) -> str:
    return f"{row.schedule_id}{_named(row)}"


def backfill_plan(start: datetime, end: datetime, limit: int) -> Plan[int]:
    """The plan of ``backfill``: the row's next firing is its rule's first instant in
    the checked window ``[start, end]`` and ``backfill_until`` is ``end``; the answer is
    the number of the window's instants. Refused with :class:`NotChangeable`: a
    terminal, paused or one-shot schedule; with :class:`InvalidArgument`: a window
    without an instant of the rule, or with more than ``limit`` (naming both counts).
    A schedule in flight starts the window once that firing is acknowledged (the lease
    rule of every change in place)."""

    def plan(row: ScheduleRecord, now: datetime) -> tuple[int, ScheduleRecord | None]:
        status = row.status().value
        if row.is_terminal or row.paused:
            hint = ": resume it first" if row.paused else ""
            raise NotChangeable(
                row.schedule_id, f"is {status}: backfill refused{hint}{_named(row)}"
            )
        rule = rule_trigger(row.trigger_kind, row.cron_expr)
        if rule is None:
            raise NotChangeable(
                row.schedule_id,
                f"is a one-shot ({row.trigger_kind}) schedule: it has no rule whose"
                f" instants a backfill could fire{_named(row)}",
            )
        window = f"[{rfc3339(start)}, {rfc3339(end)}]"
        instants = window_instants(rule, start, end, limit)
        if not instants:
            raise InvalidArgument(
                f"schedule {_label(row)}: its rule {rule.label()} has no instant in {window}"
            )
        if len(instants) > limit:
            raise InvalidArgument(
                f"backfill of schedule {_label(row)} over {window} covers"
                f" {_count(rule, start, end)} instants of its rule, more than the limit of"
                f" {limit}; give a larger limit or a shorter window"
            )
        new = row.copy()
        _place(new, instants[0], now)
        new.backfill_until = end
        return len(instants), new

    return plan


def window_next(occurrence: LeasedOccurrence) -> datetime | None:
    """The next firing after delivering ``occurrence`` when it is one of a backfill's
    window and the rule's next instant is in the window too; None otherwise (the
    schedule goes on on its rule)."""
    until = occurrence.backfill_until
    if until is None or not occurrence.in_backfill:
        return None
    msg = occurrence.message
    nxt = msg.trigger.next_after(msg.scheduled_for)
    return nxt if nxt is not None and nxt <= until else None
