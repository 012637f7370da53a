"""The firings a schedule has ahead of it, as the worker will make them (no I/O)."""

from __future__ import annotations

from datetime import datetime, timedelta

from ._time import to_utc_ms
from .errors import InvalidArgument
from .policy import Firing, Rule
from .snapshot import ScheduleSnapshot, ScheduleStatus

MAX_UPCOMING = 10_000
"""The most firings one call lists."""


def check_upcoming(count: object, until: object, now: datetime) -> tuple[int, datetime | None]:
    """``count`` (1 to :data:`MAX_UPCOMING`) and ``until`` as an instant (aware, a
    timedelta > 0 from ``now``, or None), checked."""
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
    """The instants (UTC) of the next ``count`` deliveries, none after ``until``, if each
    succeeds when due: the held firing (left out when the worker would not deliver it; a
    retry in backoff at its end), then the policy's next firings, a backfill's window
    first; a change made while leased (``next_after_lease``) applies after the held one."""
    s = snapshot
    if s.status is not ScheduleStatus.PENDING or s.attempts >= s.max_attempts:
        return []
    held: Firing | None = s.firing()
    retrying = s.last_error is not None
    rule = Rule(s.schedule_id, s.trigger, s.policy, s.misfire_grace)
    found: list[datetime] = []
    first = True
    window = s.backfill_until
    while held is not None and window is not None and held.instant <= window:
        if len(found) >= count or (until is not None and held.due > until):
            return found
        if rule.missed_reason(held, max(now, held.due), retrying=True) is not None:
            return found  # the policy's end or max_firings: the schedule completes
        found.append(held.due)  # a backfill's window: each instant, however late
        first = False
        nxt = s.trigger.next_after(held.instant)
        if nxt is None or nxt > window:
            held = rule.after_firing(held, max(now, held.due))
            break
        held = Firing(nxt, timedelta(0), held.firings + 1)
    for _ in range(2 * count + 2):  # each round fires one or skips to one that fires
        if held is None or len(found) >= count:
            break
        if first and retrying and s.leased_until is not None and s.leased_until > held.due:
            listed = s.leased_until  # a retry: claimable once its backoff ends
            fired_at = max(now, listed)
        else:
            fired_at = max(now, held.due)
            listed = held.due
        if until is not None and listed > until:
            break
        if rule.missed_reason(held, fired_at, retrying=first and retrying) is None:
            found.append(listed)
            fired = held.firings + 1
            held = rule.after_firing(held, fired_at)
        else:
            fired = held.firings
            held = rule.after_miss(held, fired_at)
        if first and s.next_after_lease is not None:  # a change waiting for this one
            held = Firing(s.next_after_lease, timedelta(0), fired)
        first = False
    return found[:count]
