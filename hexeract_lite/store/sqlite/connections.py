"""The SQLite store's one connection, used under a lock: its transactions, reads and
errors, and a forked child's own connection, opened on its first call."""

from __future__ import annotations

import os
import pathlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

import apsw

from ..._log import package_logger
from ...errors import InvalidArgument, StoreError
from ..fork import PidCheckingLock
from .driver import FileHold
from .salvage import fetch_rows
from .schema import connect, memory_sorts
from .session import SqliteSession, not_waiting, roll_back

__all__ = ["Connections", "DuplicateKey", "is_duplicate", "sink_transaction"]

_log = package_logger(__name__)

# a forked child's inherited connections: never used nor closed (nor garbage collected)
_INHERITED: list[object] = []
# the file whose write lock the transactional handler running in this context holds
_SINK_FILE: ContextVar[str | None] = ContextVar("hexeract_lite_sink_file", default=None)


@contextmanager
def sink_transaction(path: pathlib.Path) -> Iterator[None]:
    """Mark the code inside as a transactional handler holding ``path``'s write lock
    (the store's own writes on it then refuse at once)."""
    token = _SINK_FILE.set(os.path.realpath(path))
    try:
        yield
    finally:
        _SINK_FILE.reset(token)


def is_duplicate(exc: BaseException) -> bool:
    """A primary-key (or unique name) violation."""
    return isinstance(exc, apsw.ConstraintError) and (
        getattr(exc, "extendedresult", None)
        in (apsw.SQLITE_CONSTRAINT_PRIMARYKEY, apsw.SQLITE_CONSTRAINT_UNIQUE)
    )


class DuplicateKey(Exception):
    """Raised out of a write transaction when an insert hit the primary key."""


class Connections:
    """The store's connection to ``path`` and the lock its calls take turns on."""

    def __init__(
        self,
        connection: apsw.Connection,
        *,
        path: pathlib.Path,
        durability: str,
        busy_timeout: timedelta,
        vfs: str | None,
        readonly: bool,
        driver: str,
        hold: FileHold,
    ) -> None:
        self.conn: apsw.Connection | None = connection
        self.cursor: apsw.Cursor | None = connection.cursor()
        self.path = path
        self.durability = durability
        self.busy_timeout = busy_timeout
        self.vfs = vfs
        self.readonly = readonly
        self.driver = driver
        self._hold = hold  # this process's claim on the file for the driver
        self.lock: threading.Lock | PidCheckingLock = threading.Lock()
        self._reopen = False

    def live_cursor(self) -> apsw.Cursor:
        """The connection's cursor (under the lock): opened afresh in a forked child."""
        if self.cursor is None:
            if self._reopen:
                return self._reconnect()
            raise StoreError(f"the store on {self.path} is closed")
        return self.cursor

    def writable(self, what: str) -> None:
        """Raise :class:`StoreError` when the store was opened read-only."""
        if self.readonly:
            raise StoreError(f"{what} on {self.path}: the store was opened read-only")

    def outside_sink(self, what: str) -> None:
        """Raise :class:`InvalidArgument` inside a transactional handler on this file."""
        held = _SINK_FILE.get()
        if held is not None and held == os.path.realpath(self.path):
            raise InvalidArgument(
                f"{what} on {self.path} inside a transactional handler: the sink's"
                " transaction holds the database's write lock, so the store's own"
                " connection cannot write until it ends; pass connection= (the"
                " handler's connection) to write within that transaction; nothing was"
                " written"
            )

    def error(self, what: str, exc: apsw.Error | UnicodeDecodeError) -> StoreError:
        """An apsw error as the :class:`StoreError` naming ``what`` and the file."""
        if isinstance(exc, apsw.BusyError | apsw.LockedError):
            seconds = self.busy_timeout.total_seconds()
            return StoreError(
                f"{what} on {self.path}: the database stayed locked by another connection"
                f" for longer than the busy timeout ({seconds:g} s): {exc}"
            )
        return StoreError(f"{what} on {self.path} failed: {type(exc).__name__}: {exc}")

    @contextmanager
    def transaction(self, what: str, worker: bool) -> Iterator[SqliteSession]:
        """One ``BEGIN IMMEDIATE`` transaction under the lock (a primary-key violation
        raised as :class:`DuplicateKey`); ``worker``: unsynced under "relaxed"."""
        self.writable(what)
        self.outside_sink(what)
        unsynced = worker and self.durability == "relaxed"
        with self.lock:
            cur = self.live_cursor()
            tx = SqliteSession(cur)
            try:
                try:
                    if unsynced:
                        cur.execute("PRAGMA synchronous=NORMAL")
                    cur.execute("BEGIN IMMEDIATE")
                except apsw.Error as exc:
                    raise self.error(what, exc) from exc
                try:
                    yield tx
                    cur.execute("COMMIT")
                except BaseException as exc:
                    self.rollback()
                    if is_duplicate(exc):
                        raise DuplicateKey() from exc
                    if isinstance(exc, apsw.Error | UnicodeDecodeError):
                        raise self.error(what, exc) from exc
                    raise
            finally:
                if unsynced and self.conn is not None:
                    try:
                        self.conn.execute("PRAGMA synchronous=FULL")
                    except apsw.Error:  # pragma: no cover - a broken connection fails next
                        _log.warning("could not restore synchronous=FULL on %s", self.path)

    def rollback(self) -> None:
        """Roll back the transaction in progress, if any."""
        if self.conn is not None:  # a failure: SQLite rolled back already, or it is broken
            roll_back(self.conn)

    @contextmanager
    def _cursor(self, what: str) -> Iterator[apsw.Cursor]:
        with self.lock:
            try:
                yield self.live_cursor()
            except (apsw.Error, UnicodeDecodeError) as exc:
                raise self.error(what, exc) from exc

    def read(self, what: str, sql: str, params: Any = ()) -> list[Any]:
        """The rows of one statement, under the lock."""
        with self._cursor(what) as cur:
            return fetch_rows(cur, sql, params)

    def run(self, what: str, *statements: str) -> list[Any]:
        """Run ``statements`` in turn under the lock, outside a transaction; the last's rows."""
        rows: list[Any] = []
        with self._cursor(what) as cur:
            for statement in statements:
                rows = cur.execute(statement).fetchall()
        return rows

    def checkpoint(self) -> bool:
        """``PRAGMA wal_checkpoint(TRUNCATE)`` without waiting (False: another was busy)."""
        with self._cursor("checkpoint") as cur, not_waiting(cur.connection, self.busy_timeout):
            try:
                [(busy, _, _)] = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.BusyError:
                return False
            return not busy

    def close(self) -> None:
        """Close the connection and release the file; later calls raise. Idempotent."""
        with self.lock:
            conn, self.conn, self.cursor = self.conn, None, None
            self._reopen = False
            try:
                if conn is not None:
                    conn.close()
            except apsw.Error as exc:
                raise self.error("close", exc) from exc
            finally:
                self._hold.release()  # after the close: no lock of ours is left

    def forget(self) -> None:
        """In a forked child: drop the inherited connection; the next call opens another."""
        if self.conn is not None:
            _INHERITED.append((self.conn, self.cursor))
            self.conn, self.cursor = None, None
            self._reopen = True

    def _reconnect(self) -> apsw.Cursor:
        conn = connect(
            self.path,
            self.durability,
            self.busy_timeout,
            self.vfs,
            readonly=self.readonly,
            driver=self.driver,
        )
        try:
            memory_sorts(conn)
        except apsw.Error as exc:
            conn.close()
            raise self.error("reopening after fork", exc) from exc
        self.conn, self.cursor, self._reopen = conn, conn.cursor(), False
        return self.cursor
