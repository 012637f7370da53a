"""Pausing with a note, and resuming, as plans every store runs on a row or a group."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..errors import InvalidArgument
from ..policy import jitter_offset
from .changes import Plan
from .record import ScheduleRecord, rule_trigger

__all__ = ["MAX_NOTE_LENGTH", "check_note", "pause_plan", "resume_change"]

MAX_NOTE_LENGTH = 500
"""The longest pause note, in characters."""


def check_note(note: object) -> str | None:
    """``note`` if None or 1 to :data:`MAX_NOTE_LENGTH` printable characters."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise InvalidArgument(f"a pause note must be a str, got {note!r:.100}")
    if not note.strip():
        raise InvalidArgument(f"a pause note must not be blank, got {note!r}")
    if len(note) > MAX_NOTE_LENGTH:
        raise InvalidArgument(
            f"pause note {note[:40]!r}... is {len(note)} characters; at most"
            f" {MAX_NOTE_LENGTH} are allowed"
        )
    if not note.isprintable():
        raise InvalidArgument(f"pause note {note!r:.100} must be printable characters")
    return note


def pause_plan(note: str | None) -> Plan[bool]:
    """Pause a live unpaused row with ``note``; True when it did."""

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        if row.is_terminal or row.paused:
            return False, None
        new = row.copy()
        new.paused = True
        new.pause_note = note
        return True, new

    return plan


def resume_change(next: datetime | None = None) -> Plan[bool]:
    """The ``resume`` plan, the note cleared: realign to ``next`` when given; else a past
    recurring firing outside a backfill's window realigns to the rule's first instant
    after now (none: it stays paused, False). A realigned row keeps a live lease and
    takes a change made during it if still ahead.
    """

    def plan(row: ScheduleRecord, now: datetime) -> tuple[bool, ScheduleRecord | None]:
        if row.is_terminal or not row.paused:
            return False, None
        realign, offset = next, None
        rule = rule_trigger(row.trigger_kind, row.cron_expr)
        until = row.backfill_until
        in_window = until is not None and row.scheduled_for <= until
        if next is None and rule is not None and row.scheduled_for < now and not in_window:
            first = rule.next_after(now)
            if first is None:
                return False, None
            jitter = jitter_offset(row.policy(), rule, row.schedule_id, first)
            realign, offset = first + jitter, jitter // timedelta(milliseconds=1) or None
        new = row.copy()
        if realign is not None:
            waiting = row.next_after_lease
            if next is None and waiting is not None and waiting > now:
                realign, offset = waiting, None  # a change placed during a lease: due as given
            new.next_after_lease = None
            new.scheduled_for = realign
            new.jitter_offset_ms = offset
            new.attempts = 0
            new.last_error = None
            new.leased_until = row.live_lease(now)
        new.paused = False
        new.pause_note = None
        return True, new

    return plan
