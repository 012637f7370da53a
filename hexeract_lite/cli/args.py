"""The values the command line takes: each parser turns one argument's text into its
value or raises :class:`argparse.ArgumentTypeError` naming the bad text (argparse then
prints it as a usage error, exit 2)."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._time import to_utc_ms
from ..connect import parse_conn
from ..errors import InvalidArgument, InvalidMessage
from ..store.schema import validate_table_name

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable

    from ..message import Target

# The modules a value needs are imported by its parser: a command imports only what its
# own arguments use.

TABLE_ENV = "HEXERACT_SCHEDULER_TABLE"
"""The environment variable giving the table name when ``--table`` is absent."""

DEFAULT_LIMIT = 50
"""How many schedules ``list`` and ``dead-letter list`` show without ``--limit``."""

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_MONTHS = re.compile(r"\dM(?![sS])")
"""An upper-case M unit: minutes here, but months to systemd, whose spans these mimic."""
_DURATION_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


class Duration(timedelta):
    """A duration from the command line: a :class:`~datetime.timedelta` that keeps the
    text it was typed as (:attr:`text`), for error messages."""

    text: str

    def __new__(cls, value: timedelta, text: str) -> Duration:
        """``value``, remembering ``text``."""
        made = super().__new__(cls, value.days, value.seconds, value.microseconds)
        made.text = text
        return made


def parse_duration(text: str) -> Duration:
    """``90s``, ``5m``, ``2h``, ``1d``, ``250ms``, ``1h30m``, ``0.5s``; a bare number is
    seconds (as systemd reads it). Raises :class:`argparse.ArgumentTypeError` naming
    the text (a negative one, ``-5d``, said to be negative)."""
    return Duration(_duration(text), text)


def _duration(text: str) -> timedelta:
    if _MONTHS.search(text):
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: M is ambiguous (systemd reads it as months);"
            " write m for minutes, or the days (30d)"
        )
    value = text.strip().lower()
    if value.startswith("-") and _parses(value[1:]):
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: a duration cannot be negative; give the"
            f" length of time, e.g. {value[1:]}"
        )
    try:
        if re.fullmatch(r"\d+(?:\.\d+)?", value):
            return timedelta(seconds=float(value))
        if re.fullmatch(f"(?:{_DURATION_PART.pattern})+", value):
            parts = _DURATION_PART.findall(value)
            return sum((float(n) * _DURATION_UNITS[unit] for n, unit in parts), timedelta(0))
    except OverflowError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: too long") from None
    raise argparse.ArgumentTypeError(
        f"invalid duration {text!r}: write a number and a unit (ms, s, m, h, d),"
        " e.g. 90s, 5m, 2h or 1h30m"
    )


def parse_checked_duration(
    text: str, *, positive: bool = False, whole_ms: bool = False
) -> Duration:
    """:func:`parse_duration`; with ``positive`` more than zero (``0s`` refused), with
    ``whole_ms`` in whole milliseconds, the precision a schedule stores (``1.5ms``
    refused)."""
    value = parse_duration(text)
    if positive and value <= timedelta(0):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must be more than 0")
    if whole_ms and value.microseconds % 1000:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: a schedule stores whole milliseconds"
        )
    return value


def _parses(text: str) -> bool:
    try:
        parse_duration(text)
    except argparse.ArgumentTypeError:
        return False
    return True


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant with a timezone (``2026-03-01T12:00:00Z``,
    ``2026-03-01T13:00+01:00``); a naive one is refused, never guessed."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid instant {text!r}: write ISO 8601 with a timezone, e.g. 2026-03-01T12:00:00Z"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise argparse.ArgumentTypeError(
            f"instant {text!r} has no timezone: add Z (UTC) or an offset such as +01:00"
        )
    # Rounded up like ScheduledMessage.delay's ``at``: a firing is never early.
    return to_utc_ms(value, "instant", argparse.ArgumentTypeError, round_up=True)


def parse_schedule_id(text: str) -> uuid.UUID:
    """A schedule id: a UUID in any of the spellings :class:`uuid.UUID` accepts."""
    import uuid

    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid schedule id {text!r}: not a UUID") from None


MAX_INT_ARG = 2**31 - 1


def parse_positive_int(text: str, most: int = MAX_INT_ARG) -> int:
    """An integer from 1 to ``most`` (default 2**31 - 1)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: expected an integer >= 1"
            + (f" and <= {most}" if value > most else "")
        )
    return value


def parse_conn_arg(text: str) -> str:
    """A connection string given explicitly (``migrate``'s ``--from`` and ``--to``):
    not empty, and of a scheme :func:`~hexeract_lite.connect.parse_conn` accepts."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty connection string")
    return _checked(parse_conn, text)


def parse_table(text: str) -> str:
    """A table name, checked by :func:`validate_table_name`."""
    return _checked(validate_table_name, text)


def parse_target(text: str) -> Target:
    """``mediator``, ``outbox`` or ``bus:ROUTING_KEY``."""
    from ..message import Target  # the value classes: not for the commands that only read

    kind, sep, key = text.partition(":")
    try:
        if kind == "bus" and sep:
            return Target.bus(key)
        if kind == "mediator" and not sep:
            return Target.mediator()
        if kind == "outbox" and not sep:
            return Target.outbox()
    except InvalidMessage as exc:
        raise argparse.ArgumentTypeError(f"invalid target {text!r}: {exc}") from None
    raise argparse.ArgumentTypeError(
        f"invalid target {text!r}: expected mediator, outbox or bus:ROUTING_KEY"
    )


class Payload:
    """A parsed ``--payload``: the JSON text and where it came from."""

    def __init__(self, value: Any, origin: str) -> None:
        self.value = value
        self.origin = origin


def parse_payload(text: str) -> Payload:
    """``--payload``: JSON text, ``@path`` (read the file) or ``-`` (read stdin)."""
    import json

    if text == "-":
        origin, raw = "stdin", sys.stdin.read()
    elif text.startswith("@"):
        origin = text[1:]
        try:
            with open(origin, encoding="utf-8") as fh:
                raw = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise argparse.ArgumentTypeError(
                f"cannot read payload file {origin!r}: {exc}"
            ) from None
    else:
        origin, raw = "argument", text
    bad = f"invalid JSON payload {raw!r:.60}" + ("" if origin == "argument" else f" in {origin}")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise argparse.ArgumentTypeError(
            f"{bad}: nested too deeply (more levels than Python's recursion limit,"
            f" {sys.getrecursionlimit()})"
        ) from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{bad}: {exc}") from None
    return Payload(value, origin)


def parse_sink_spec(text: str) -> str:
    """``MODULE:ATTR`` (``ATTR`` may be dotted)."""
    module, sep, attr = text.partition(":")
    dotted = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
    if not sep or not re.fullmatch(dotted, module) or not re.fullmatch(dotted, attr):
        raise argparse.ArgumentTypeError(
            f"invalid sink {text!r}: expected MODULE:ATTR, e.g. myapp.scheduling:sink"
        )
    return text


def parse_name(text: str) -> str:
    """A schedule name (see :mod:`hexeract_lite.names`)."""
    from ..names import check_name

    return _checked(check_name, text)


def _checked(check: Callable[[str], object], text: str) -> str:
    """``text`` once ``check`` accepts it; its :class:`InvalidArgument` raised as
    :class:`argparse.ArgumentTypeError`."""
    try:
        check(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
