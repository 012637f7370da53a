"""A SQLite connection's session: how it waits for a lock, and a transaction's cursor."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import apsw

from .salvage import fetch_rows

__all__ = [
    "RETRY_MAX_S",
    "RETRY_MIN_S",
    "SqliteSession",
    "not_waiting",
    "roll_back",
    "set_busy_wait",
]

RETRY_MIN_S = 0.0002
"""The shortest pause between two tries to get a lock."""
RETRY_MAX_S = 0.001
"""The longest pause between two tries to get a lock."""
_JITTER = random.Random()  # not the global one: that belongs to the application


class _BusyWait:
    """The busy handler (``tries`` is 0 at each wait's first call); True: try again."""

    __slots__ = ("_deadline", "_limit")

    def __init__(self, limit_s: float) -> None:
        self._limit = limit_s
        self._deadline = 0.0

    def __call__(self, tries: int) -> bool:
        now = time.monotonic()
        if tries == 0:
            self._deadline = now + self._limit
        left = self._deadline - now
        if left <= 0:
            return False
        time.sleep(min(_JITTER.uniform(RETRY_MIN_S, RETRY_MAX_S), left))
        return True


def set_busy_wait(conn: apsw.Connection, busy_ms: int) -> None:
    """Make ``conn`` wait up to ``busy_ms`` for another connection's lock, retrying
    every :data:`RETRY_MIN_S` to :data:`RETRY_MAX_S` (``sqlite3``: SQLite's back-off)."""
    if busy_ms <= 0:
        conn.set_busy_timeout(0)
    elif not hasattr(conn, "set_busy_handler"):
        conn.set_busy_timeout(busy_ms)
    else:
        conn.set_busy_handler(_BusyWait(busy_ms / 1000))


@contextmanager
def not_waiting(conn: apsw.Connection, busy_timeout: timedelta) -> Iterator[None]:
    """Inside: ``conn`` fails at once on another connection's lock; then waits again."""
    conn.set_busy_timeout(0)
    try:
        yield
    finally:
        set_busy_wait(conn, int(busy_timeout.total_seconds() * 1000))


def roll_back(conn: apsw.Connection, sql: str = "ROLLBACK") -> bool:
    """Roll back the open transaction, if any; False when the connection could not."""
    try:
        if not conn.get_autocommit():
            conn.execute(sql)
    except apsw.Error:
        return False
    return True


class SqliteSession:
    """A write transaction's cursor as :class:`~hexeract_lite.store.sql.dialect.Session`."""

    __slots__ = ("cur", "woken")

    def __init__(self, cur: apsw.Cursor) -> None:
        self.cur = cur
        self.woken = False

    def execute(self, statement: str, params: Any = ()) -> int:
        """Run a statement; the rows it changed."""
        cur = self.cur
        cur.execute(statement, params)
        return cur.connection.changes()

    def execute_each(self, statements: list[tuple[str, Any]]) -> list[int]:
        """Run each statement in turn; the rows each changed."""
        return [self.execute(statement, params) for statement, params in statements]

    def fetch(self, statement: str, params: Any = ()) -> list[Any]:
        """Run a statement; its rows (salvaged: :func:`~.salvage.fetch_rows`)."""
        return fetch_rows(self.cur, statement, params)

    def wake(self, others: bool = True) -> None:
        """Notify the store's change signal after the commit."""
        self.woken = True
