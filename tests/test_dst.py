"""Proof of the zoned cron rules (hexeract_lite.zoned) against a brute-force oracle.

The oracle knows nothing of the engine. Around each offset change of a zone it walks
every UTC minute (every second for rules with a seconds field, or for zones whose
offsets are not whole minutes), converts each instant to the zone's wall clock with
zoneinfo, and applies the rules as the issue states them:

- a matching wall time shown once fires then;
- a matching wall time never shown (the clock jumped over it) fires at the first
  instant after the jump, once however many rule times the jump swallowed;
- a matching wall time shown twice fires at its first showing;
- except that a rule whose hour field is ``*`` or a step fires at every showing.

Offset changes are found by probing the UTC offset a day apart and bisecting to the
second. The engine's successive ``next_after`` results over each window must equal the
oracle's firings exactly.

(Over 700 lines: the oracle, what it covers and the checks built on it are one proof.)
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import time
import zoneinfo
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from hexeract_lite.errors import InvalidTrigger
from hexeract_lite.trigger import MACROS, CronExpression
from hexeract_lite.zoned import load_zone, parse_zoned, render_zoned

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EPOCH_DATE = date(1970, 1, 1)
SECOND = timedelta(seconds=1)
DAY = 86_400
HOUR = 3_600


def seconds(year: int, month: int = 1, day: int = 1, hour: int = 0, minute: int = 0) -> int:
    return (datetime(year, month, day, hour, minute, tzinfo=UTC) - EPOCH) // SECOND


def instant(u: int) -> datetime:
    return EPOCH + timedelta(seconds=u)


# --- the zones' offset changes, found by probing ---------------------------------------


@dataclass(frozen=True)
class Change:
    zone: str
    at: int
    """UTC seconds since 1970 of the first instant with the new offset."""
    before: int
    after: int

    def __str__(self) -> str:
        return f"{self.zone}@{instant(self.at).isoformat()}({self.before:+d}s->{self.after:+d}s)"


@functools.cache
def zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def offset(name: str, u: int) -> int:
    """The zone's UTC offset at ``u`` (seconds), computed with zoneinfo."""
    off = datetime.fromtimestamp(u, zone(name)).utcoffset()  # zone.fromutc, as astimezone
    assert off is not None
    return off // SECOND


def scan(name: str, start: int, end: int, step: int = DAY) -> list[Change]:
    """Every offset change of ``name`` in ``(start, end]``: probe every ``step`` seconds,
    bisect to the second where two probes differ."""
    found = []
    low, current = start, offset(name, start)
    while low < end:
        high = min(low + step, end)
        if offset(name, high) == current:
            low = high
            continue
        while high - low > 1:
            middle = (low + high) // 2
            if offset(name, middle) == current:
                low = middle
            else:
                high = middle
        new = offset(name, high)
        found.append(Change(name, high, current, new))
        low, current = high, new
    return found


# --- the oracle ------------------------------------------------------------------------


def expand(expression: str) -> str:
    text = expression.strip()
    return MACROS[text.lower()] if text.startswith("@") else " ".join(text.split())


def every_real_hour(expression: str) -> bool:
    """The issue's exception: the hour field is ``*`` or has a step."""
    hour = expand(expression).split()[-4]
    return any(item.startswith("*") or "/" in item for item in hour.split(","))


class Matcher:
    """Does a wall time (seconds since 1970-01-01 00:00 on the wall) match the rule?"""

    def __init__(self, expression: str) -> None:
        sim = CronSim(expand(expression), datetime(2000, 1, 1))
        self.seconds = sim.seconds
        self.minutes = sim.minutes
        self.hours = sim.hours
        self.months = sim.months
        self._sim = sim
        self._days: dict[int, bool] = {}

    def __call__(self, wall: int) -> bool:
        if wall % 60 not in self.seconds or wall // 60 % 60 not in self.minutes:
            return False
        if wall // HOUR % 24 not in self.hours:
            return False
        days = wall // DAY
        day = self._days.get(days)
        if day is None:
            d = EPOCH_DATE + timedelta(days=days)
            day = self._days[days] = d.month in self.months and self._sim.match_day(d)
        return day


@dataclass(frozen=True, eq=False)
class Window:
    """Where a change is checked: firings in ``(start, end]`` are compared; the oracle
    sees the wall clock every ``step`` seconds over the wider ``samples`` range."""

    change: Change
    start: int
    end: int
    step: int
    samples: tuple[tuple[int, int], ...]
    """(UTC instant, wall time) pairs."""

    @functools.cached_property
    def first_shown(self) -> dict[int, int]:
        """Each wall time shown, and the first instant it was shown at."""
        first: dict[int, int] = {}
        for u, wall in self.samples:
            first.setdefault(wall, u)
        return first

    @functools.cached_property
    def jumps(self) -> list[tuple[int, range]]:
        """Where the clock jumped forward: the instant after, and the wall times skipped."""
        return [
            (u, range(before + self.step, after, self.step))
            for (_, before), (u, after) in itertools.pairwise(self.samples)
            if after - before > self.step
        ]


def window(change: Change, step: int, *, reach: int = 2 * HOUR) -> Window | None:
    """The window around ``change``, or None when ``step`` cannot see it exactly (a
    change or offset off the step's grid)."""
    name = change.zone
    jump = abs(change.after - change.before)
    nearby = scan(name, change.at - 4 * DAY, change.at + 4 * DAY)
    jump = max([jump, *(abs(c.after - c.before) for c in nearby)])
    start, end = change.at - reach - jump, change.at + reach + jump
    first, last = start - jump - step, end + jump + step
    if step > 1 and any(c.at % step or c.before % step or c.after % step for c in nearby):
        return None
    samples = tuple((u, u + offset(name, u)) for u in range(first, last + 1, step))
    return Window(change, start, end, step, samples)


def oracle(expression: str, w: Window) -> list[int]:
    """The firings in ``(w.start, w.end]`` by the rules as the issue states them (kept
    for the minute walks, which the start-instant tests read again)."""
    return _oracle_kept(expression, w) if w.step > 1 else _oracle(expression, w)


@functools.cache
def _oracle_kept(expression: str, w: Window) -> list[int]:
    return _oracle(expression, w)


def _oracle(expression: str, w: Window) -> list[int]:
    match = Matcher(expression)
    if w.step > 1:
        assert match.seconds == {0}, "a whole-minute walk cannot see a seconds field"
    if every_real_hour(expression):
        fires = {u for u, wall in w.samples if match(wall)}
    else:
        fires = {u for wall, u in w.first_shown.items() if match(wall)}
        for u, skipped in w.jumps:
            if any(m not in w.first_shown and match(m) for m in skipped):
                fires.add(u)
    return sorted(u for u in fires if w.start < u <= w.end)


def engine(rule: CronExpression, start: int, end: int) -> list[int]:
    """The engine's successive firings in ``(start, end]``."""
    out: list[int] = []
    after = instant(start)
    while True:
        nxt = rule.next_occurrence(after)
        if nxt is None or nxt > instant(end):
            return out
        assert nxt > after, f"{rule}: {nxt} is not after {after}"
        assert nxt.tzinfo is UTC and nxt.microsecond == 0
        out.append((nxt - EPOCH) // SECOND)
        after = nxt


def show(name: str, fires: Iterable[int]) -> list[str]:
    tz = zone(name)
    return [f"{instant(u):%m-%d %H:%M:%S}Z={instant(u).astimezone(tz):%H:%M:%S%z}" for u in fires]


def check(expression: str, w: Window) -> int:
    """Engine == oracle on the window; returns the number of firings compared."""
    name = w.change.zone
    rule = CronExpression.parse(expression, tz=name)
    assert rule.every_real_hour == every_real_hour(expression)
    want = oracle(expression, w)
    got = engine(rule, w.start, w.end)
    assert got == want, (
        f"{expression!r} around {w.change}:\n engine {show(name, got)}\n oracle {show(name, want)}"
    )
    if not expression.startswith("@") and len(expression.split()) == 5:
        six = engine(CronExpression.parse("0 " + expression, tz=name), w.start, w.end)
        assert six == got, f"'0 {expression}' differs from {expression!r} around {w.change}"
    return len(want)


# --- what is covered -------------------------------------------------------------------

MINUTE_RULES = (
    # wall-clock rules: a fixed hour, a list or a range of hours
    "0 2 * * *",
    "30 2 * * *",
    "0 9 * * *",
    "0 0 * * *",
    "59 23 * * *",
    "0 1 * * *",
    "0 3 * * *",
    "15 1,2,3 * * *",
    "0 1-3 * * *",
    "* 2 * * *",
    "*/10 0,1 * * *",
    "0 2 * * 0",
    "30 2 1-7 * *",
    "45 1 * * 1-5",
    "@daily",
    # every-real-hour rules: * or a step in the hour field
    "0 * * * *",
    "*/30 * * * *",
    "*/15 * * * *",
    "0 */2 * * *",
    "30 1-23/3 * * *",
    "0 */5,2 * * *",
    "@hourly",
    # six fields with seconds 0 (the minute walk sees them exactly)
    "0 0 2 * * *",
    "0 30 2 * * *",
    "0 */30 * * * *",
)
SECOND_RULES = (
    "30 30 2 * * *",
    "15 0 9 * * *",
    "10 * 2 * * *",
    "*/20 0 * * * *",
    "5 */30 * * * *",
    "59 59 1 * * *",
    "0-2 0 3 * * *",
)

SECOND_HISTORY = (
    "Africa/Monrovia",
    "America/Caracas",
    "America/Juneau",  # 1867: +15:02:19 -> -8:57:41, a day replayed, off the minute grid
    "Asia/Kathmandu",
    "Pacific/Norfolk",
)
"""Historical changes also checked second by second."""

FOCUS = (
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Australia/Sydney",
    "America/Santiago",
    "Pacific/Chatham",
    "Africa/Casablanca",
    "Europe/Dublin",
    "Antarctica/Troll",
)
"""Zones also checked second by second (2025-2026)."""

HISTORY: tuple[tuple[str, int, int], ...] = (
    # (zone, first year, last year): offset changes without DST, big jumps, odd offsets
    ("Pacific/Apia", 2011, 2011),  # skipped 30 Dec 2011: -10 -> +14
    ("Pacific/Kwajalein", 1993, 1993),  # skipped a day: -12 -> +12
    ("Pacific/Fakaofo", 2011, 2011),  # -11 -> +13
    ("America/Juneau", 1867, 1867),  # Alaska purchase: a day repeated
    ("Asia/Manila", 1844, 1845),  # a day skipped
    ("Africa/Monrovia", 1972, 1972),  # -0:44:30 -> 0: not whole minutes
    ("Europe/Moscow", 2010, 2014),  # permanent DST, then back one hour for good
    ("America/Caracas", 2007, 2016),  # -4 -> -4:30 -> -4
    ("Asia/Pyongyang", 2015, 2018),  # +9 -> +8:30 -> +9
    ("Asia/Kathmandu", 1985, 1986),  # +5:30 -> +5:45
    ("Asia/Almaty", 2024, 2024),  # +6 -> +5 on 1 March 2024
    ("America/Nuuk", 2023, 2024),  # -3 -> -2 standard while on DST rules
    ("Africa/Juba", 2021, 2021),  # +3 -> +2
    ("Pacific/Norfolk", 2015, 2020),  # +11:30 -> +11, then DST
    ("America/Sao_Paulo", 2017, 2019),  # DST at midnight: 00:00 skipped
    ("America/Havana", 2024, 2025),  # DST at midnight
    ("America/St_Johns", 2008, 2012),  # -3:30, changes at 00:01
    ("Asia/Tehran", 2021, 2022),  # last DST
    ("America/Mexico_City", 2022, 2022),  # last DST
    ("Europe/Volgograd", 2018, 2020),
    ("Asia/Colombo", 1996, 2006),
    ("Asia/Gaza", 2024, 2025),  # Ramadan gaps
    ("Asia/Dhaka", 2009, 2010),
    ("America/Metlakatla", 2018, 2019),
    ("Antarctica/Casey", 2009, 2012),
    ("Europe/London", 1968, 1971),  # British Standard Time
)


@functools.cache
def recent_changes() -> tuple[list[Change], int]:
    """One change of every distinct offset history in 2025-2026, per name; and how many
    zone names were scanned. Names whose changes are identical (links, twins) share one
    check."""
    start, end = seconds(2025), seconds(2027)
    seen: dict[tuple[tuple[int, int, int], ...], list[Change]] = {}
    names = sorted(zoneinfo.available_timezones() - {"localtime", "posixrules"})
    named_first = [*FOCUS, *(z for z, _, _ in HISTORY)]  # links yield to these names
    for name in sorted(names, key=lambda n: (n not in named_first, n)):
        changes = scan(name, start, end)
        if changes:
            seen.setdefault(tuple((c.at, c.before, c.after) for c in changes), changes)
    return [c for changes in seen.values() for c in changes], len(names)


@functools.cache
def history_changes() -> list[Change]:
    out = []
    for name, first, last in HISTORY:
        changes = scan(name, seconds(first), seconds(last + 1))
        assert changes, f"no offset change in {name} {first}-{last}: the table moved?"
        out.extend(changes)
    return out


@functools.cache
def minute_windows() -> list[Window]:
    out = []
    for change in [*recent_changes()[0], *history_changes()]:
        w = window(change, 60)
        if w is not None:
            out.append(w)
    return out


def second_windows() -> Iterator[Window]:
    """One at a time: a day-long jump walked by the second is a few hundred thousand samples."""
    picked = [c for name in FOCUS for c in scan(name, seconds(2025), seconds(2027))]
    picked += [c for c in history_changes() if c.zone in SECOND_HISTORY]
    for change in picked:
        w = window(change, 1, reach=HOUR)
        assert w is not None
        yield w


def test_oracle_matches_the_engine_minute_by_minute() -> None:
    began = time.perf_counter()
    windows = minute_windows()
    fired = sum(check(expr, w) for w in windows for expr in MINUTE_RULES)
    zones = {w.change.zone for w in windows}
    assert len(windows) > 150 and len(zones) > 40 and fired > 10_000
    five = sum(1 for e in MINUTE_RULES if len(e.split()) == 5)
    print(
        f"\nminute walk: {len(windows)} changes in {len(zones)} distinct zones"
        f" ({recent_changes()[1]} names scanned), {len(MINUTE_RULES)} rules"
        f" (+{five} as six fields), {fired} firings, {time.perf_counter() - began:.1f} s"
    )


def test_oracle_matches_the_engine_second_by_second() -> None:
    began = time.perf_counter()
    fired, zones, count = 0, set(), 0
    for w in second_windows():
        fired += sum(check(expr, w) for expr in SECOND_RULES)
        zones.add(w.change.zone)
        count += 1
    assert count > 40 and fired > 500
    assert {"Africa/Monrovia", "America/Juneau"} <= zones
    print(
        f"\nsecond walk: {count} changes, {len(SECOND_RULES)} rules,"
        f" {fired} firings, {time.perf_counter() - began:.1f} s"
    )


def test_every_zone_kind_is_covered() -> None:
    changes = [w.change for w in minute_windows()]
    ups = [c for c in changes if c.after > c.before]
    downs = [c for c in changes if c.after < c.before]
    assert ups and downs
    assert any(c.zone == "Australia/Lord_Howe" and abs(c.after - c.before) == 1800 for c in changes)
    assert any(c.zone.startswith(("Australia/", "America/Santiago")) for c in ups)  # south
    # a change of standard offset, not of DST (Moscow 2014, Almaty 2024), and day-long jumps
    assert any(
        zone(c.zone).dst(instant(c.at - 1)) == zone(c.zone).dst(instant(c.at)) for c in changes
    )
    assert any(abs(c.after - c.before) >= 23 * HOUR for c in changes)


def _check_from(expression: str, index: int, after_ms: int) -> None:
    """``next_after`` from ``after_ms`` (ms since 1970) is the oracle's next firing."""
    w = minute_windows()[index]
    want = next((u for u in oracle(expression, w) if u * 1000 > after_ms), None)
    after = EPOCH + timedelta(milliseconds=after_ms)
    got = CronExpression.parse(expression, tz=w.change.zone).next_occurrence(after)
    if want is None:
        assert got is None or got > instant(w.end), f"{expression!r} after {after} {w.change}"
    else:
        assert got == instant(want), f"{expression!r} after {after} {w.change}: {got}"


def test_next_after_from_instants_around_each_change() -> None:
    """Starting on, just before, just after, and inside the jump or the replayed span."""
    for index, w in enumerate(minute_windows()):
        at, jump = w.change.at * 1000, abs(w.change.after - w.change.before) * 1000
        starts = (at - 1, at, at + 1, at + jump // 2 - 1, at + jump - 1001, at + jump + 59_999)
        for expression in MINUTE_RULES:
            for start in starts:
                _check_from(expression, index, start)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_next_after_from_any_instant_in_a_window(data: st.DataObject) -> None:
    """From any instant (milliseconds included), the next firing is the oracle's."""
    windows = minute_windows()
    index = data.draw(st.integers(0, len(windows) - 1), label="window")
    w = windows[index]
    expression = data.draw(st.sampled_from(MINUTE_RULES), label="expression")
    near = abs(w.change.after - w.change.before) + HOUR
    after_ms = data.draw(
        st.integers(max(w.start, w.change.at - near) * 1000, (w.change.at + near) * 1000)
        | st.integers(w.start * 1000, (w.end - HOUR) * 1000),
        label="after_ms",
    )
    _check_from(expression, index, after_ms)


def test_offset_changes_are_more_than_a_day_apart() -> None:
    """The engine probes offsets a day apart: check no zone changes its offset twice
    within a day and back, from zoneinfo's own transition table (pure-Python reader)."""
    reader = pytest.importorskip("zoneinfo._zoneinfo").ZoneInfo
    if not hasattr(reader.no_cache("Europe/Paris"), "_trans_utc"):
        pytest.skip("zoneinfo's pure-Python reader has no transition table here")
    closest = (10**12, "")
    for name in sorted(zoneinfo.available_timezones() - {"localtime", "posixrules"}):
        z = reader.no_cache(name)
        previous = z._tti_before.utcoff if z._tti_before is not None else None
        changes = []
        for at, info in zip(z._trans_utc, z._ttinfos, strict=True):
            if info.utcoff != previous:
                changes.append(at)
                previous = info.utcoff
        for a, b in itertools.pairwise(changes):
            closest = min(closest, (b - a, f"{name} {instant(a)}"))
    assert closest[0] > DAY, closest


def test_the_probe_scan_finds_the_transition_table() -> None:
    """The scan of the windows sees exactly the changes zoneinfo's table holds."""
    reader = pytest.importorskip("zoneinfo._zoneinfo").ZoneInfo
    if not hasattr(reader.no_cache("Europe/Paris"), "_trans_utc"):
        pytest.skip("zoneinfo's pure-Python reader has no transition table here")
    for name, first, last in HISTORY:
        start, end = seconds(first), seconds(last + 1)
        z = reader.no_cache(name)
        table = []
        previous = z._tti_before.utcoff if z._tti_before is not None else None
        for at, info in zip(z._trans_utc, z._ttinfos, strict=True):
            if info.utcoff != previous:
                if start < at <= end:
                    table.append(at)
                previous = info.utcoff
        assert [c.at for c in scan(name, start, end)] == table, name


# --- the rules on named days (README table) --------------------------------------------


TABLE_RULES = ("0 2 * * *", "30 2 * * *", "30 1 * * *", "0 9 * * *", "0 * * * *", "*/30 * * * *")
TABLE_DAYS = (
    ("Europe/Paris", date(2026, 3, 29)),
    ("Europe/Paris", date(2026, 10, 25)),
    ("America/New_York", date(2026, 3, 8)),
    ("America/New_York", date(2026, 11, 1)),
)


def short_offset(local: datetime) -> str:
    """``+02``, ``-04`` or ``+10:30``."""
    text = f"{local:%z}"
    return text[:3] if text.endswith("00") else f"{text[:3]}:{text[3:]}"


def day_firings(expression: str, name: str, day: date, start_hour: int, end_hour: int) -> list[str]:
    """Local times (with UTC offset) the rule fires at on ``day`` between two wall hours."""
    tz = zone(name)
    midnight = datetime.combine(day, datetime.min.time(), tz)
    begin = midnight.replace(hour=start_hour)
    end = midnight.replace(hour=end_hour) if end_hour < 24 else midnight + timedelta(days=1)
    rule = CronExpression.parse(expression, tz=name)
    out, after = [], begin - timedelta(microseconds=1)
    while (nxt := rule.next_occurrence(after)) is not None and nxt < end:
        local = nxt.astimezone(tz)
        out.append(f"{local:%H:%M} {short_offset(local)} ({nxt:%H:%M}Z)")
        after = nxt
    return out


def test_named_days() -> None:
    paris, new_york = "Europe/Paris", "America/New_York"
    assert day_firings("30 2 * * *", paris, date(2026, 3, 29), 0, 12) == ["03:00 +02 (01:00Z)"]
    assert day_firings("30 2 * * *", paris, date(2026, 10, 25), 0, 12) == ["02:30 +02 (00:30Z)"]
    assert day_firings("0 2 * * *", new_york, date(2026, 3, 8), 0, 12) == ["03:00 -04 (07:00Z)"]
    assert day_firings("0 2 * * *", new_york, date(2026, 11, 1), 0, 12) == ["02:00 -05 (07:00Z)"]
    assert day_firings("0 1 * * *", new_york, date(2026, 11, 1), 0, 12) == ["01:00 -04 (05:00Z)"]
    assert day_firings("0 * * * *", paris, date(2026, 10, 25), 1, 4) == [
        "01:00 +02 (23:00Z)",
        "02:00 +02 (00:00Z)",
        "02:00 +01 (01:00Z)",
        "03:00 +01 (02:00Z)",
    ]
    assert day_firings("0 * * * *", paris, date(2026, 3, 29), 1, 5) == [
        "01:00 +01 (00:00Z)",
        "03:00 +02 (01:00Z)",
        "04:00 +02 (02:00Z)",
    ]
    lord_howe = "Australia/Lord_Howe"  # 02:00 -> 02:30 on 4 Oct 2026; 02:00 -> 01:30 on 5 Apr
    assert day_firings("0 2 * * *", lord_howe, date(2026, 10, 4), 0, 12) == ["02:30 +11 (15:30Z)"]
    assert day_firings("45 1 * * *", lord_howe, date(2026, 4, 5), 0, 12) == ["01:45 +11 (14:45Z)"]
    assert day_firings("*/30 * * * *", lord_howe, date(2026, 4, 5), 1, 3) == [
        "01:00 +11 (14:00Z)",
        "01:30 +11 (14:30Z)",
        "01:30 +10:30 (15:00Z)",
        "02:00 +10:30 (15:30Z)",
        "02:30 +10:30 (16:00Z)",
    ]


def transition_day_table() -> str:
    """The markdown tables of the README section on time zones and DST: each rule's
    firings on each transition day (the whole day for a wall-clock rule, 01:00 to 04:00
    local for an every-real-hour rule)."""
    out = []
    for name in dict.fromkeys(name for name, _ in TABLE_DAYS):
        days = [day for zone_name, day in TABLE_DAYS if zone_name == name]
        out.append(f"{name}:\n")
        out.append("| rule | " + " | ".join(f"{day:%a %-d %b %Y}" for day in days) + " |")
        out.append("| --- |" + " --- |" * len(days))
        for expression in TABLE_RULES:
            hours = (1, 4) if every_real_hour(expression) else (0, 24)
            cells = [", ".join(day_firings(expression, name, day, *hours)) for day in days]
            out.append(f"| `{expression}` | " + " | ".join(c or "none" for c in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip()


def test_table_days_agree_with_the_oracle() -> None:
    for name, day in TABLE_DAYS:
        start = (datetime.combine(day, datetime.min.time(), zone(name)) - EPOCH) // SECOND
        (change,) = scan(name, start, start + DAY)
        w = window(change, 60, reach=6 * HOUR)
        assert w is not None
        for expression in TABLE_RULES:
            check(expression, w)
    table = transition_day_table()
    assert "| `30 2 * * *` | 03:00 +02 (01:00Z) | 02:30 +02 (00:30Z) |" in table


# --- parsing and rendering -------------------------------------------------------------


def test_cron_tz_prefix_round_trips() -> None:
    assert parse_zoned("CRON_TZ=Europe/Paris 0 9 * * 1") == ("Europe/Paris", "0 9 * * 1")
    assert parse_zoned("  CRON_TZ=America/New_York\t@daily ") == ("America/New_York", "@daily")
    assert parse_zoned("0 9 * * 1") == ("UTC", "0 9 * * 1")
    assert render_zoned("Europe/Paris", "0 9 * * 1") == "CRON_TZ=Europe/Paris 0 9 * * 1"
    assert render_zoned("UTC", "*/2 * * * * *") == "*/2 * * * * *"
    rule = CronExpression.parse("CRON_TZ=Europe/Paris 0 9 * * 1")
    assert (rule.tz, rule.expression, str(rule)) == (
        "Europe/Paris",
        "0 9 * * 1",
        "CRON_TZ=Europe/Paris 0 9 * * 1",
    )
    assert CronExpression.parse("0 9 * * 1", tz="Europe/Paris") == rule
    assert CronExpression.parse("CRON_TZ=Europe/Paris 0 9 * * 1", tz="Europe/Paris") == rule
    assert str(CronExpression.parse("@daily")) == "@daily"
    assert str(CronExpression.parse("CRON_TZ=UTC 0 9 * * *")) == "0 9 * * *"


def test_a_zoned_text_is_refused_by_the_utc_parser() -> None:
    """A reader that knows no zones (the reference, an older hexeract_lite: five or six
    fields read by cronsim) refuses the stored text instead of firing it in UTC."""
    for text in ("CRON_TZ=Europe/Paris 0 9 * * 1", "CRON_TZ=Asia/Tokyo 0 0 9 * * *"):
        stored = str(CronExpression.parse(text))
        assert stored == text
        fields = stored.split()
        assert len(fields) not in (5, 6) or fields[0].startswith("CRON_TZ=")
        with pytest.raises((CronSimError, ValueError, IndexError)):
            CronSim(" ".join(fields), datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("text", "tz", "needle"),
    [
        ("0 9 * * 1", "Europe/Pariss", "'Europe/Pariss'"),
        ("0 9 * * 1", "localtime", "'localtime'"),
        ("0 9 * * 1", "../../etc/passwd", "'../../etc/passwd'"),
        ("0 9 * * 1", "right/UTC", "'right/UTC'"),
        ("0 9 * * 1", "", "''"),
        ("CRON_TZ=Mars/Olympus 0 9 * * 1", None, "'Mars/Olympus'"),
        ("CRON_TZ= 0 9 * * 1", None, "names no zone"),
        ("CRON_TZ=Europe/Paris", None, "no expression"),
        ("CRON_TZ=Europe/Paris 61 9 * * 1", None, "61 9 * * 1"),
        ("CRON_TZ=Europe/Paris 0 9 * * 1", "Asia/Tokyo", "give the zone once"),
        ("CRON_TZ=UTC 0 9 * * *", "Europe/Paris", "give the zone once"),
        ("CRON_TZ=Europe/Paris 0 9 * * *", "UTC", "give the zone once"),
    ],
)
def test_bad_zones_are_refused_naming_the_value(text: str, tz: str | None, needle: str) -> None:
    with pytest.raises(InvalidTrigger) as info:
        CronExpression.parse(text, tz=tz)
    assert needle in str(info.value)


def test_load_zone() -> None:
    assert load_zone("UTC") is UTC
    assert load_zone("Europe/Paris") is zoneinfo.ZoneInfo("Europe/Paris")
    with pytest.raises(InvalidTrigger, match="'Nowhere'"):
        load_zone("Nowhere")
    with pytest.raises(InvalidTrigger, match=r"\['Europe/Paris'\]"):
        load_zone(["Europe/Paris"])  # type: ignore[arg-type]


def test_a_local_zone_file_with_a_non_iana_name_is_refused(tmp_path: Path) -> None:
    """A rule naming it would not load on another machine."""
    from hexeract_lite import zoned

    utc = next(Path(d, "UTC") for d in zoneinfo.TZPATH if Path(d, "UTC").is_file())
    shutil.copy(utc, tmp_path / "My.Zone")
    zoneinfo.reset_tzpath([str(tmp_path), *zoneinfo.TZPATH])
    zoned._available_zones.cache_clear()
    zoned._load_zone.cache_clear()
    try:
        assert "My.Zone" in zoneinfo.available_timezones()
        with pytest.raises(InvalidTrigger, match=r"unknown time zone 'My\.Zone'"):
            load_zone("My.Zone")
    finally:
        zoneinfo.reset_tzpath()
        zoned._available_zones.cache_clear()
        zoned._load_zone.cache_clear()


def test_utc_is_what_cron_expression_does() -> None:
    for text in ("0 9 * * 1", "*/2 * * * * *", "@hourly", "0 0 29 2 *"):
        rule = CronExpression.parse(text, tz="UTC")
        assert rule == CronExpression.parse(text) and str(rule) == text
        at = datetime(2026, 3, 1, 12, 0, 0, 500_000, tzinfo=UTC)
        for _ in range(5):
            want = next(CronSim(expand(text), at.replace(microsecond=0)))
            assert rule.next_occurrence(at) == want
            at = want


def test_next_after_takes_any_aware_instant_and_refuses_a_naive_one() -> None:
    rule = CronExpression.parse("0 9 * * *", tz="Europe/Paris")
    tokyo = datetime(2026, 7, 1, 12, 0, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo"))  # 03:00Z
    assert rule.next_occurrence(tokyo) == datetime(2026, 7, 1, 7, 0, tzinfo=UTC)
    with pytest.raises(InvalidTrigger, match="after"):
        rule.next_occurrence(datetime(2026, 7, 1))


def test_next_due_collapses_missed_firings() -> None:
    rule = CronExpression.parse("0 9 * * *", tz="Europe/Paris")
    due = datetime(2026, 3, 20, 8, 0, tzinfo=UTC)  # 09:00 CET
    now = datetime(2026, 3, 31, 10, 0, tzinfo=UTC)  # eleven days later, 12:00 CEST
    assert rule.next_due(now, due) == datetime(2026, 4, 1, 7, 0, tzinfo=UTC)  # 09:00 CEST
    assert rule.next_due(due - timedelta(hours=1), due) == datetime(2026, 3, 21, 8, tzinfo=UTC)


def test_no_further_firing_is_none() -> None:
    assert (
        CronExpression.parse("0 0 1 1 *", tz="Pacific/Kiritimati").next_occurrence(
            datetime(9999, 6, 1, tzinfo=UTC)
        )
        is None
    )
    assert (
        CronExpression.parse("0 12 31 12 *", tz="Etc/GMT+12").next_occurrence(
            datetime(9999, 12, 31, 13, tzinfo=UTC)
        )
        is None
    )


# --- the exhaustive variant ------------------------------------------------------------


def all_changes(first_year: int, last_year: int) -> Iterator[Change]:
    """Every offset change of every distinct offset history, probed three days apart
    (the closest pair of changes in the database is about four days apart)."""
    seen: set[tuple[tuple[int, int, int], ...]] = set()
    for name in sorted(zoneinfo.available_timezones() - {"localtime", "posixrules"}):
        changes = scan(name, seconds(first_year), seconds(last_year + 1), 3 * DAY)
        key = tuple((c.at, c.before, c.after) for c in changes)
        if key not in seen:
            seen.add(key)
            yield from changes


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("HEXERACT_DST_FROM"),
    reason="exhaustive DST proof (3-6 min) is opt-in: set HEXERACT_DST_FROM=1970 (or 1850)",
)
def test_oracle_every_change_since_1850() -> None:
    """Every change of every zone, from ``HEXERACT_DST_FROM`` (1970: about three minutes;
    1850: the whole history, about six) to 2040, minute walk where exact, else by the second.

    Opt-in, to keep CI within a few minutes; the CI-sized proof above covers every 2025-26
    change of every distinct zone plus the historical oddities."""
    first, last = int(os.environ.get("HEXERACT_DST_FROM", "1970")), 2040
    rules = ("0 2 * * *", "30 2 * * *", "0 0 * * *", "* 2 * * *", "0 * * * *", "*/30 * * * *")
    began, count, fired, by_second, zones = time.perf_counter(), 0, 0, 0, set()
    for change in all_changes(first, last):
        w = window(change, 60, reach=HOUR)
        if w is None:
            w = window(change, 1, reach=HOUR)
            assert w is not None
            by_second += 1
        fired += sum(check(expr, w) for expr in rules)
        count += 1
        zones.add(change.zone)
        del w  # a second walk over a day-long jump holds a few hundred thousand samples
    print(
        f"\nexhaustive {first}-{last}: {count} changes in {len(zones)} distinct zones"
        f" ({by_second} off the minute grid, walked by the second), {len(rules)} rules,"
        f" {fired} firings, {time.perf_counter() - began:.0f} s"
    )
