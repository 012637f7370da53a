"""Listing filters (issue 15): a status, an event-type glob, keyset pages by id.

``store.list_schedules(status=..., event_type=..., after=..., limit=...)`` walks the
schedules in schedule id order (byte order, :class:`uuid.UUID` order) so a million
rows can be paged through with ``after`` = the last id of the page before. This
module holds what every store shares: the checks, and the glob's meaning.

A glob matches the whole event type: ``*`` any run of characters, ``?`` one
character, every other character itself (case-sensitive; no ``[...]`` classes, so
the stores agree on every pattern).
"""

from __future__ import annotations

import re
import uuid

from ..errors import InvalidArgument
from ..snapshot import ScheduleStatus

__all__ = [
    "LIST_STATUSES",
    "check_after",
    "check_glob",
    "check_status",
    "glob_regex",
    "sqlite_glob",
    "sqlite_status_where",
    "postgres_status_where",
]

LIST_STATUSES = ("pending", "paused", "delivered", "cancelled", "dead-lettered", "all")
"""The statuses a listing takes; ``all`` (or None) lists every row."""

_LIVE = "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"


def check_status(status: object) -> ScheduleStatus | None:
    """``status`` (a :class:`ScheduleStatus`, one of :data:`LIST_STATUSES`, or None)
    as a status, None for all; anything else raises :class:`InvalidArgument`."""
    if status is None or status == "all":
        return None
    if isinstance(status, str):
        try:
            return ScheduleStatus(status.replace("_", "-"))
        except ValueError:
            pass
    raise InvalidArgument(f"unknown status {status!r}: expected one of {', '.join(LIST_STATUSES)}")


def check_glob(pattern: object) -> str | None:
    """An event-type glob: a non-empty text without NUL, or None (no filter)."""
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
        raise InvalidArgument(
            f"an event-type glob must be a non-empty text, got event_type={pattern!r}"
        )
    return pattern


def check_after(after: object) -> uuid.UUID | None:
    """A keyset cursor: a schedule id (a :class:`uuid.UUID`) or None."""
    if after is None or isinstance(after, uuid.UUID):
        return after
    raise InvalidArgument(f"after must be a schedule id (a UUID), got after={after!r}")


def glob_regex(pattern: str) -> str:
    """The glob as a regular expression anchored at both ends, in the syntax shared by
    Python's :mod:`re` and PostgreSQL's ``~``."""
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
    """The glob for SQLite's ``GLOB``: ``[`` made literal (``[[]``); ``*`` and ``?``
    keep their meaning, ``]`` outside a class is literal already."""
    return pattern.replace("[", "[[]")


def _where(status: ScheduleStatus | None, paused: str, not_paused: str) -> str:
    if status is None:
        return "1 = 1"
    if status is ScheduleStatus.PENDING:
        return f"{_LIVE} AND {not_paused}"
    if status is ScheduleStatus.PAUSED:
        return f"{_LIVE} AND {paused}"
    if status is ScheduleStatus.DELIVERED:
        return "delivered_at IS NOT NULL"
    if status is ScheduleStatus.CANCELLED:
        return "cancelled_at IS NOT NULL"
    return "dead_lettered_at IS NOT NULL"


def sqlite_status_where(status: ScheduleStatus | None) -> str:
    """The SQLite condition of a status (constant text: nothing user-given in it)."""
    return _where(status, "paused <> 0", "paused = 0")


def postgres_status_where(status: ScheduleStatus | None) -> str:
    """The PostgreSQL condition of a status (constant text)."""
    return _where(status, "paused = TRUE", "paused = FALSE")
