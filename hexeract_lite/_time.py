"""Instants as the reference stores them: UTC, millisecond precision, sortable text."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from .errors import InvalidConfiguration

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_ZERO = timedelta(0)

MIN_LEASE = timedelta(milliseconds=1)
"""The shortest lease: ``leased_until`` is stored at millisecond precision."""


def lease_too_short(shown: str) -> InvalidConfiguration:
    """The error for a lease under :data:`MIN_LEASE`, ``shown`` naming the value."""
    return InvalidConfiguration(
        f"lease must be at least 1 ms (leases are stored at millisecond precision), got {shown}"
    )


def seconds_text(value: object) -> str:
    """A duration as error messages show it (``"-1.5 s"``); any other value's repr."""
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g} s"
    return repr(value)


def check_whole_ms(name: str, value: object, error: type[Exception]) -> timedelta | None:
    """``value`` when None or a timedelta >= 0 of whole milliseconds; else ``error``."""
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise error(f"{name} must be a timedelta or None, got {value!r:.100}")
    if value < _ZERO:
        raise error(f"{name} must not be negative, got {seconds_text(value)}")
    if value % _ONE_MS:
        raise error(
            f"{name} must be a whole number of milliseconds (stored instants have"
            f" millisecond precision), got {value!r}"
        )
    return value


def to_utc_ms(
    value: object,
    name: str,
    error: type[Exception] = InvalidConfiguration,
    *,
    round_up: bool = False,
) -> datetime:
    """An aware datetime in UTC at whole milliseconds, truncated or with ``round_up``
    rounded up (a firing is never stored early); else ``error`` naming ``name``."""
    if value.__class__ is datetime and value.tzinfo is UTC:  # the common case, cheaply
        micro = value.microsecond % 1000
        if not micro:
            return value
        utc = value
    else:
        if not isinstance(value, datetime):
            raise error(f"{name} must be a timezone-aware datetime, got {value!r}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise error(
                f"{name} must be a timezone-aware datetime, got naive {value.isoformat()!r}"
                " (use datetime.now(timezone.utc) or attach a tzinfo)"
            )
        try:
            utc = value.astimezone(UTC)
        except OverflowError:
            raise error(_out_of_range(name, value)) from None
        micro = utc.microsecond % 1000
        if not micro:
            return utc
    if not round_up:
        return utc.replace(microsecond=utc.microsecond - micro)
    try:
        return utc + timedelta(microseconds=1000 - micro)
    except OverflowError:
        raise error(_out_of_range(name, value)) from None


def _out_of_range(name: str, value: datetime) -> str:
    return (
        f"{name} {value.isoformat()!r} is out of range: in UTC, at millisecond precision,"
        " it falls outside years 1 to 9999"
    )


_TWO_DIGITS = tuple("%02d" % i for i in range(100))  # noqa: UP031
_THREE_DIGITS = tuple("%03d" % i for i in range(1000))  # noqa: UP031
_DAY_PREFIXES: dict[date, str] = {}
"""``YYYY-MM-DDT`` of the days formatted lately (cleared when it holds too many)."""
_MAX_DAY_PREFIXES = 1024


def format_ts(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` for an aware UTC datetime (a finer part than the
    millisecond is dropped); any other datetime raises ValueError."""
    if value.tzinfo is not UTC and value.utcoffset() != _ZERO:
        raise ValueError(f"format_ts needs a UTC datetime, got {value!r}")
    # on every insert, claim and acknowledgement: cached day prefixes, tables of digits
    day = value.date()
    prefix = _DAY_PREFIXES.get(day)
    if prefix is None:
        if len(_DAY_PREFIXES) >= _MAX_DAY_PREFIXES:
            _DAY_PREFIXES.clear()
        prefix = "%04d-%02d-%02dT" % (value.year, value.month, value.day)  # noqa: UP031
        _DAY_PREFIXES[day] = prefix
    two = _TWO_DIGITS
    return (
        f"{prefix}{two[value.hour]}:{two[value.minute]}:{two[value.second]}"
        f".{_THREE_DIGITS[value.microsecond // 1000]}Z"
    )


def format_now(value: object, name: str = "clock.now()") -> str:
    """The stored text of an instant read as "now" (:func:`to_utc_ms`'s rules and errors)."""
    return format_ts(to_utc_ms(value, name))


def parse_ts(text: str) -> datetime:
    """Read a stored timestamp: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` or SQLite's
    ``YYYY-MM-DD HH:MM:SS`` (taken as UTC), with or without fractional seconds."""
    if (
        len(text) == 24
        and text[23] == "Z"
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
        and text[19] == "."
    ):
        try:  # the canonical layout, read on every claim: already UTC milliseconds
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not a timestamp: {text!r}") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return to_utc_ms(value, "timestamp", ValueError)


def rfc3339(value: datetime | None) -> str | None:
    """RFC 3339 text with a ``Z`` suffix, millisecond precision, or None."""
    return None if value is None else format_ts(value)
