"""The dialect interface of :class:`~hexeract_lite.store.sql.store.SqlScheduleStore`:
the row, the row codec and the session a SQL engine supplies."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from ...errors import StoreError
from ...snapshot import MalformedSchedule
from ..record import ScheduleRecord

__all__ = [
    "MALFORMED",
    "Codec",
    "MalformedRowError",
    "Row",
    "Session",
    "lock_timed_out",
    "seconds_text",
    "statement_timed_out",
]

Row = Sequence[Any]
"""A row as the driver returns it, every column in registry order
(:data:`~hexeract_lite.store.columns.COLUMN_NAMES`)."""


class MalformedRowError(StoreError):
    """A row that does not decode was asked for whole; :attr:`reason` names the
    column. The pure SQL changes (cancel, pause) still apply to it."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def seconds_text(value: timedelta) -> str:
    """``5 s``, ``0.25 s``: a duration as people read it in a message."""
    return f"{value.total_seconds():g} s"


def lock_timed_out(lock: timedelta) -> str:
    """A server store's error detail for a lock wait that ran past ``lock``."""
    return (
        f"waited longer than the lock timeout ({seconds_text(lock)}) for a lock held by"
        " another session"
    )


def statement_timed_out(statement: timedelta) -> str:
    """A server store's error detail for a statement cancelled at ``statement``."""
    return (
        f"the statement ran longer than the statement timeout ({seconds_text(statement)})"
        " and was cancelled"
    )


MALFORMED = "malformed row, dead-lettered without dispatch: "
"""The start of the ``last_error`` of a claimed row that could not be decoded."""


class Codec(Protocol):
    """A dialect's row codec (a module satisfies it): how values are bound and how a
    :data:`Row` decodes."""

    def encode_id(self, schedule_id: uuid.UUID, /) -> Any:
        """A schedule id as bound."""

    def encode_instant(self, instant: datetime, /) -> Any:
        """An instant as bound."""

    def encode_lease(self, lease: object, /) -> Any:
        """A lease token as bound; None when no stored lease can equal it."""

    def decode(self, row: Row, /) -> ScheduleRecord:
        """A row as a record; raises on a value that does not decode."""

    def why(self, row: Row, exc: BaseException, /) -> str:
        """Why ``row`` did not decode: the column, else the exception."""

    def diagnose(self, row: Row, /) -> str:
        """Which column keeps ``row`` from decoding whole ('' when none does)."""

    def row_label(self, row: Row, /) -> str:
        """The row's schedule id as text, for a message."""

    def malformed(self, row: Row, exc: BaseException, /) -> MalformedSchedule:
        """What a listing returns in place of a row that does not decode."""


class Session(Protocol):
    """One connection inside one transaction (or one statement), as a SQL store uses it."""

    def execute(self, statement: Any, params: Any = ()) -> int:
        """Run a statement; the number of rows it changed."""

    def execute_each(self, statements: list[tuple[Any, Any]]) -> list[int]:
        """Run each ``(statement, params)`` in order (perhaps sent together); the counts."""

    def fetch(self, statement: Any, params: Any = ()) -> list[Any]:
        """Run a statement; every row of its result."""

    def wake(self, others: bool = True) -> None:
        """After the commit, notify :attr:`ScheduleStore.changes` (``others``: and other
        processes waiting on this table)."""
