"""Interval rules: fire every fixed duration on a grid that starts at an anchor, stored
as ``@every 1h30m from 2026-03-01T12:00:00.000Z``."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import attrs

from ._time import format_ts, parse_ts, seconds_text, to_utc_ms
from .errors import InvalidTrigger

_MS = timedelta(milliseconds=1)
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1))
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_STORED = re.compile(r"@every (\S+) from (\S+)")
PREFIX = "@every "
"""How the stored text of an interval rule starts."""


def parse_duration(text: str) -> timedelta:
    """Whole numbers of days (``d``), hours (``h``), minutes (``m``), seconds (``s``) and
    milliseconds (``ms``), largest first (``"1h30m"``); else :class:`InvalidTrigger`."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise InvalidTrigger(
            f"invalid duration {text!r}: expected whole numbers with units d, h, m, s, ms,"
            " largest first (90m, 1h30m, 250ms)"
        )
    try:
        total = sum(int(n) * size for n, (_, size) in zip(match.groups(), _UNITS, strict=True) if n)
        return timedelta(milliseconds=total)
    except (OverflowError, ValueError) as exc:
        raise InvalidTrigger(f"invalid duration {text!r:.80}: too long ({exc})") from None


def format_duration(every: timedelta) -> str:
    """The canonical text of a whole-millisecond duration: ``1h30m``, ``250ms``."""
    left = every // _MS
    parts = []
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0ms"


def _check_every(every: object) -> timedelta:
    if isinstance(every, str):
        every = parse_duration(every)
    if not isinstance(every, timedelta):
        raise InvalidTrigger(f"every must be a timedelta (or text such as '90m'), got {every!r}")
    if every <= timedelta(0):
        raise InvalidTrigger(f"an interval must be positive, got every={seconds_text(every)}")
    if every < _MS:
        raise InvalidTrigger(
            f"an interval must be at least 1 ms (stored instants have millisecond"
            f" precision), got every={every!r}"
        )
    if every % _MS:
        raise InvalidTrigger(
            f"an interval must be a whole number of milliseconds (stored instants have"
            f" millisecond precision), got every={every!r}"
        )
    return every


@attrs.frozen
class Interval:
    """Fire every ``every`` from ``anchor`` on a fixed grid (UTC, millisecond
    precision): missed firings collapse into one catch-up. Build it with :meth:`of`;
    :meth:`parse` reads the stored text, ``str()`` writes it.

    .. versionadded:: 0.2.0
    """

    every: timedelta
    """The period: positive, a whole number of milliseconds."""
    anchor: datetime
    """The grid's first instant (UTC, millisecond precision)."""

    @classmethod
    def of(cls, every: timedelta | str, anchor: datetime) -> Interval:
        """Every ``every`` (a timedelta or a duration text) from ``anchor`` (aware; rounded
        up to the millisecond); else :class:`InvalidTrigger`."""
        anchor = to_utc_ms(anchor, "anchor", InvalidTrigger, round_up=True)
        return cls(_check_every(every), anchor)

    @classmethod
    def parse(cls, text: str) -> Interval:
        """The rule a stored text describes; :class:`InvalidTrigger` quoting it otherwise."""
        match = _STORED.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise InvalidTrigger(
                f"invalid interval rule {text!r}: expected '@every <duration> from <instant>'"
                " such as '@every 1h30m from 2026-03-01T12:00:00.000Z'"
            )
        try:
            anchor = parse_ts(match.group(2))
        except ValueError as exc:
            raise InvalidTrigger(f"invalid interval rule {text!r}: {exc}") from exc
        return cls.of(parse_duration(match.group(1)), anchor)

    def next_after(self, instant: datetime) -> datetime | None:
        """The first grid instant strictly after ``instant`` (the anchor itself when
        ``instant`` is before it), in UTC; None past year 9999."""
        after = to_utc_ms(instant, "after", InvalidTrigger)
        if after < self.anchor:
            return self.anchor
        every = self.every // _MS
        steps = (after - self.anchor) // _MS // every + 1
        try:
            return self.anchor + timedelta(milliseconds=steps * every)
        except OverflowError:
            return None

    def next_due(self, now: datetime, previous_due: datetime) -> datetime | None:
        """``next_after(max(now, previous_due))``: missed firings collapse into one."""
        now = to_utc_ms(now, "now", InvalidTrigger)
        previous_due = to_utc_ms(previous_due, "previous_due", InvalidTrigger)
        return self.next_after(max(now, previous_due))

    def __str__(self) -> str:
        return f"{PREFIX}{format_duration(self.every)} from {format_ts(self.anchor)}"
