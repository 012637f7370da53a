"""Backfill (docs/howto/backfill.md): while ``scheduled_for <= backfill_until`` each
delivery moves a schedule to its rule's next instant (:func:`window_next`), each with
the id its rule gives it; past the window it goes on on its rule."""

from __future__ import annotations

from datetime import datetime, timedelta

from ._time import rfc3339, to_utc_ms
from .errors import InvalidArgument, NotChangeable
from .snapshot import LeasedOccurrence
from .store.changes import Plan, _named, _place
from .store.record import ScheduleRecord, rule_trigger
from .trigger import Trigger

DEFAULT_BACKFILL_LIMIT = 1000
"""How many instants one backfill may fire unless told otherwise."""

MAX_BACKFILL_LIMIT = 100_000
"""The largest ``limit`` a backfill takes; also how far an over-limit window is counted."""

_MS = timedelta(milliseconds=1)


def check_window(start: object, end: object, limit: object) -> tuple[datetime, datetime, int]:
    """``start`` (rounded up) and ``end`` as UTC milliseconds, and ``limit``, checked."""
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
    """How many instants the rule has in ``[start, end]``, as text."""
    interval = trigger.interval
    if interval is not None:
        first = interval.next_after(start - _MS)
        if first is None or first > end:
            return "0"
        return str((end - first) // interval.every + 1)
    found = window_instants(trigger, start, end, MAX_BACKFILL_LIMIT)
    more = len(found) > MAX_BACKFILL_LIMIT
    return f"more than {MAX_BACKFILL_LIMIT}" if more else str(len(found))


def _label(row: ScheduleRecord) -> str:
    return f"{row.schedule_id}{_named(row)}"


def backfill_plan(start: datetime, end: datetime, limit: int) -> Plan[int]:
    """The plan of ``backfill``: the next firing is the rule's first instant in ``[start,
    end]``, ``backfill_until`` is ``end``; the answer is the window's instant count."""

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
    """The next firing after delivering ``occurrence`` inside a backfill's window; None
    when it or the rule's next instant is outside it."""
    until = occurrence.backfill_until
    if until is None or not occurrence.in_backfill:
        return None
    msg = occurrence.message
    nxt = msg.trigger.next_after(msg.scheduled_for)
    return nxt if nxt is not None and nxt <= until else None
