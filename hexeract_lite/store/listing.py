"""Listing filters every store shares: a status, globs (``*``, ``?``, every other
character itself, matched on the whole text), keyset pages by id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .._time import seconds_text, to_utc_ms
from ..errors import InvalidArgument, InvalidConfiguration
from .schema import LIVE

if TYPE_CHECKING:
    import uuid

    from ..snapshot import ScheduleStatus

# The status enum lives with the value classes (attrs): this module imports it only when
# a status is asked for, so that the CLI's arguments and its plain listing do without.
# A status is a StrEnum: the tables below are keyed by its text.

__all__ = [
    "LIST_STATUSES",
    "PRUNE_COLUMN",
    "check_prune",
    "check_batch_size",
    "check_glob",
    "check_listing",
    "check_status",
    "glob_regex",
    "sqlite_glob",
    "sqlite_status_where",
    "postgres_status_where",
]

LIST_STATUSES = ("pending", "paused", "delivered", "cancelled", "dead-lettered", "all")
"""The statuses a listing takes; ``all`` (or None) lists every row."""


def check_status(status: object) -> ScheduleStatus | None:
    """``status`` as a :class:`ScheduleStatus`, None for all; else :class:`InvalidArgument`."""
    if status is None or status == "all":
        return None
    from ..snapshot import ScheduleStatus

    if isinstance(status, str):
        try:
            return ScheduleStatus(status.replace("_", "-"))
        except ValueError:
            pass
    raise InvalidArgument(f"unknown status {status!r}: expected one of {', '.join(LIST_STATUSES)}")


def check_glob(pattern: object, what: str = "event_type") -> str | None:
    """A glob (on ``what``): a non-empty text without NUL, or None (no filter)."""
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
        raise InvalidArgument(f"a {what} glob must be a non-empty text, got {what}={pattern!r}")
    return pattern


def check_listing(
    status: object, event_type: object, name: object, after: object, limit: object
) -> tuple[ScheduleStatus | None, str | None, str | None, uuid.UUID | None, int]:
    """``list_schedules``' arguments, checked in this order: ``(status, event_type glob,
    name glob, after, limit)``; ``after`` is a keyset cursor, a schedule id or None.
    """
    import uuid

    from .checks import check_limit

    checked = check_status(status), check_glob(event_type), check_glob(name, "name")
    if after is not None and not isinstance(after, uuid.UUID):
        raise InvalidArgument(f"after must be a schedule id (a UUID), got after={after!r}")
    return (*checked, after, check_limit(limit))


def glob_regex(pattern: str) -> str:
    """The glob as an anchored regular expression (Python's :mod:`re` and PostgreSQL's ``~``)."""
    parts = []
    for ch in pattern:
        if ch == "*":
            parts.append(".*")
        elif ch == "?":
            parts.append(".")
        elif ch.isalnum() or ch == "_":
            parts.append(ch)
        else:
            parts.append("\\" + ch if ch != "\n" else "\\n")
    return "^" + "".join(parts) + "$"


def matches(pattern: str | None, event_type: str) -> bool:
    """Whether ``event_type`` matches the glob (None: everything)."""
    return pattern is None or re.fullmatch(glob_regex(pattern), event_type, re.S) is not None


def sqlite_glob(pattern: str) -> str:
    """The glob for SQLite's ``GLOB``: ``[`` made literal."""
    return pattern.replace("[", "[[]")


PRUNE_COLUMN: dict[str, str] = {
    "delivered": "delivered_at",
    "cancelled": "cancelled_at",
    "dead-lettered": "dead_lettered_at",
}
"""Each ended status's end instant column."""


def _where(status: ScheduleStatus | None, paused: str, not_paused: str) -> str:
    if status is None:
        return "1 = 1"
    if status in PRUNE_COLUMN:
        return f"{PRUNE_COLUMN[status]} IS NOT NULL"
    return f"{LIVE} AND {paused if status == 'paused' else not_paused}"


def sqlite_status_where(status: ScheduleStatus | None) -> str:
    """The SQLite condition of a status (constant text: nothing user-given in it)."""
    return _where(status, "paused <> 0", "paused = 0")


def postgres_status_where(status: ScheduleStatus | None) -> str:
    """The PostgreSQL condition of a status (constant text)."""
    return _where(status, "paused = TRUE", "paused = FALSE")


def check_prune(older_than: object, statuses: object) -> tuple[timedelta, list[ScheduleStatus]]:
    """``prune``'s ``older_than`` (> 0) and ended ``statuses``, checked."""
    if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
        raise InvalidArgument(
            "older_than must be a positive datetime.timedelta,"
            f" got older_than={seconds_text(older_than)}"
        )
    if isinstance(statuses, str) or not isinstance(statuses, Iterable):
        raise InvalidArgument(f"statuses must be a list of statuses, got statuses={statuses!r}")
    wanted: list[ScheduleStatus] = []
    for item in statuses:
        status = check_status(item)
        if status not in PRUNE_COLUMN:  # ended rows only
            raise InvalidArgument(
                f"prune deletes ended rows only (delivered, cancelled, dead-lettered),"
                f" got status {item!r}"
            )
        if status not in wanted:
            wanted.append(status)
    return older_than, wanted


def prune_cut(now: datetime, older_than: timedelta) -> datetime:
    """``now - older_than`` rounded up to the millisecond (an instant stored at millisecond
    precision is before it exactly when it is before ``now - older_than``); before the
    year 1: :class:`InvalidArgument`."""
    try:
        return to_utc_ms(now - older_than, "the prune cut", InvalidArgument, round_up=True)
    except OverflowError:
        raise InvalidArgument(
            f"older_than={older_than!r} reaches before the year 1; give a shorter duration"
        ) from None


def check_batch_size(batch_size: object) -> int:
    """Rows per transaction of an upkeep command: an int >= 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidConfiguration(
            f"batch_size must be an integer >= 1, got batch_size={batch_size!r}"
        )
    return batch_size
