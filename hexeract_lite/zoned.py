"""Cron rules on an IANA time zone's wall clock (``CRON_TZ=Zone`` prefix).

A wall time fires at the first instant the zone's clock shows that time or a later one
(a skipped time once after the jump, a repeated one at its first occurrence), except
that a rule whose hour field is ``*`` or has a step fires on every real occurrence
(docs/concepts/time-zones.md). Assumes a zone never changes its offset twice in a day.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta, tzinfo

from ._time import EPOCH
from .errors import InvalidTrigger

CRON_TZ_PREFIX = "CRON_TZ="
"""The prefix that names a zoned rule's zone in its stored text."""

DEFAULT_ZONE = "UTC"
"""The zone of a rule given none; its stored text has no prefix."""

_EPOCH_WALL = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
_PROBE = 86_400  # seconds between two offset look-ups when searching for a change
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")  # IANA-shaped, portable
_NOT_ZONES = frozenset({"localtime", "posixrules"})  # a machine's setting, not a zone


@functools.cache
def _available_zones() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def load_zone(name: str) -> tzinfo:
    """The IANA time zone ``name``; else :class:`InvalidTrigger`."""
    if not isinstance(name, str):
        raise InvalidTrigger(f"a time zone must be a name such as 'Europe/Paris', got {name!r}")
    return _load_zone(name)


@functools.lru_cache(maxsize=512)
def _load_zone(name: str) -> tzinfo:
    if name == DEFAULT_ZONE:
        return UTC
    if not _ZONE_NAME.fullmatch(name) or name not in _available_zones():
        raise InvalidTrigger(
            f"unknown time zone {name!r}: expected an IANA name such as 'Europe/Paris'"
            " or 'UTC' (zoneinfo.available_timezones() lists them)"
        )
    import zoneinfo  # loaded for the first zone other than UTC

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidTrigger(f"unknown time zone {name!r}: {exc}") from exc


def parse_zoned(text: str) -> tuple[str, str]:
    """``(zone, expression)`` of a stored rule (``"CRON_TZ=Europe/Paris 0 9 * * 1"``), the
    zone checked; no prefix: ``("UTC", text)``."""
    stripped = text.strip()
    if not stripped.startswith(CRON_TZ_PREFIX):
        return DEFAULT_ZONE, text
    head, *rest = stripped.split(None, 1)
    zone = head[len(CRON_TZ_PREFIX) :]
    if not zone:
        raise InvalidTrigger(f"invalid cron expression {text!r}: CRON_TZ= names no zone")
    load_zone(zone)
    if not rest:
        raise InvalidTrigger(f"invalid cron expression {text!r}: no expression after {head!r}")
    return zone, rest[0].strip()


def render_zoned(zone: str, expression: str) -> str:
    """The stored text of ``expression`` on ``zone`` (no prefix for UTC)."""
    load_zone(zone)
    return expression if zone == DEFAULT_ZONE else f"{CRON_TZ_PREFIX}{zone} {expression}"


def every_real_hour(rule: str) -> bool:
    """The hour field of ``rule`` is ``*`` or has a step."""
    hour = rule.split()[-4]
    return any(item.startswith("*") or "/" in item for item in hour.split(","))


def next_in_zone(rule: str, tz: tzinfo, after: datetime) -> datetime | None:
    """The first firing of ``rule`` (valid, macros expanded) on ``tz``'s wall clock strictly
    after ``after``: UTC, whole seconds; None before cronsim's horizon or year 9999."""
    from cronsim import CronSim  # loaded for the first cron rule, not on import

    start = after.astimezone(UTC)
    try:
        if tz is UTC:
            return next(CronSim(rule, start))
        first = (start - EPOCH) // _SECOND  # a firing is a whole second: > after iff > first
        found = _next_firing(rule, tz, every_real_hour(rule), first)
        return None if found is None else EPOCH + timedelta(seconds=found)
    except (StopIteration, OverflowError, ValueError):  # none, or past year 9999
        return None


# --- the engine: instants and wall times as whole seconds since 1970-01-01 -------------


def _offset(tz: tzinfo, instant: int) -> int:
    """The zone's UTC offset at ``instant``, in seconds."""
    try:
        local = datetime.fromtimestamp(instant, tz)
    except (OSError, OverflowError, ValueError):  # Windows before 1970; far years
        local = (EPOCH + timedelta(seconds=instant)).astimezone(tz)
    offset = local.utcoffset()
    assert offset is not None
    return offset // _SECOND


def _next_change(tz: tzinfo, after: int, until: int, offset: int) -> int | None:
    """The first instant in ``(after, until]`` whose offset is not ``offset``: a day at a
    time, then bisecting to the second."""
    low = after
    while low < until:
        high = min(low + _PROBE, until)
        if _offset(tz, high) != offset:
            while high - low > 1:
                middle = (low + high) // 2
                if _offset(tz, middle) == offset:
                    low = middle
                else:
                    high = middle
            return high
        low = high
    return None


def _first_match(rule: str, wall: int) -> int | None:
    """The first wall time at or after ``wall`` that ``rule`` matches, or None."""
    from cronsim import CronSim

    start = _EPOCH_WALL + timedelta(seconds=wall - 1)
    try:
        found = next(CronSim(rule, start))
    except StopIteration:
        return None
    return (found - _EPOCH_WALL) // _SECOND


def _high_water(tz: tzinfo, instant: int, offset: int) -> int:
    """The first wall time the clock has not shown by ``instant`` (while it replays times
    after going back: the one it showed before)."""
    wall = instant + offset + 1
    local = (EPOCH + timedelta(seconds=instant)).astimezone(tz)
    if local.fold:
        first = (local.replace(fold=0) - EPOCH) // _SECOND  # same wall time, earlier
        before = _offset(tz, first)
        change = _next_change(tz, first, instant, before)
        if change is not None:
            wall = max(wall, change + before)
    return wall


def _next_firing(rule: str, tz: tzinfo, every_real_hour: bool, after: int) -> int | None:
    """The first firing strictly after ``after``, walking the zone's offset changes. ``due``
    is the first wall time that may still fire: for wall-clock rules it never goes back;
    for every-real-hour rules it restarts at each change."""
    offset = _offset(tz, after)
    due = after + offset + 1 if every_real_hour else _high_water(tz, after, offset)
    now = after  # the instant reached; after a change, firing at it is allowed
    at_change = False
    while True:
        match = _first_match(rule, due)
        if match is None:
            return None
        if at_change and match <= now + offset:
            return now  # the clock jumped over (or onto) the matching time here
        fire = match - offset
        change = _next_change(tz, now, fire, offset)
        if change is None:
            return fire
        new_offset = _offset(tz, change)
        due = change + new_offset if every_real_hour else max(due, change + offset)
        now, offset, at_change = change, new_offset, True
