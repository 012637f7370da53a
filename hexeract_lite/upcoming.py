"""The firings a schedule has ahead of it, as the worker will make them (no I/O).

:func:`upcoming_firings` applies the worker's rules to a snapshot: a paused, terminal or
exhausted schedule fires nothing; an occurrence found later than its misfire grace is
skipped (a recurring schedule goes on on its rule); a retry waits out its backoff; after
each firing a recurring schedule moves to the first instant of its rule after both the
firing and the instant it was due (missed instants collapse into one).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ._time import to_utc_ms
from .errors import InvalidArgument
from .snapshot import ScheduleSnapshot, ScheduleStatus

__all__ = ["MAX_UPCOMING", "check_upcoming", "upcoming_firings"]

MAX_UPCOMING = 10_000
"""The most firings one call lists."""


def check_upcoming(count: object, until: object, now: datetime) -> tuple[int, datetime | None]:
    """Validate ``count`` (1 to :data:`MAX_UPCOMING`) and ``until`` (an aware datetime,
    a timedelta from ``now`` that is more than zero, or None); return ``until`` as an
    instant. Raises :class:`InvalidArgument` naming the bad value."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_UPCOMING:
        raise InvalidArgument(f"count must be an integer from 1 to {MAX_UPCOMING}, got {count!r}")
    if until is None:
        return count, None
    if isinstance(until, timedelta):
        if until <= timedelta(0):
            raise InvalidArgument(f"until must be a timedelta > 0 or an instant, got {until!r}")
        try:
            return count, now + until
        except OverflowError:
            raise InvalidArgument(f"until {until!r} from now is past the year 9999") from None
    return count, to_utc_ms(until, "until", InvalidArgument)


def upcoming_firings(
    snapshot: ScheduleSnapshot, now: datetime, count: int, until: datetime | None = None
) -> list[datetime]:
    """The instants of the next ``count`` occurrences the worker will deliver (their
    ``scheduled_for``, in UTC), in order, none after ``until``, assuming each delivery
    succeeds and happens as soon as the occurrence is due, with a worker running (it
    cycles at ``now``, so an overdue occurrence fires at ``now``).

    The first is the occurrence the schedule holds now: it is overdue when its instant
    is before ``now`` (a worker fires it on its next cycle), and left out when it is
    later than its misfire grace and not a retry after a failure (the worker skips it;
    a claim after a crashed attempt is judged like a first one). A retry in backoff
    fires at the end of its backoff. A schedule in a backfill's window
    (``backfill_until``) lists the window's remaining instants first, none skipped.
    """
    s = snapshot
    if s.status is not ScheduleStatus.PENDING or s.attempts >= s.max_attempts:
        return []
    due = s.scheduled_for
    in_backoff = s.leased_until is not None and s.leased_until > now and s.last_error is not None
    fired_at = max(now, s.leased_until) if in_backoff and s.leased_until else max(now, due)
    grace = s.misfire_grace
    found: list[datetime] = []
    retrying = s.last_error is not None
    window = s.backfill_until
    if retrying or grace is None or now - due <= grace or (window is not None and due <= window):
        found.append(due)
    trigger = s.trigger
    while len(found) < count:
        if until is not None and found and found[-1] > until:
            break
        nxt = None
        if window is not None and due <= window:  # a backfill: the window's next instant
            nxt = trigger.next_after(due)
            nxt = nxt if nxt is not None and nxt <= window else None
        if nxt is None:
            nxt = trigger.next_due(fired_at, due)
        if nxt is None:
            break
        found.append(nxt)
        due, fired_at = nxt, max(fired_at, nxt)
    return [instant for instant in found[:count] if until is None or instant <= until]
