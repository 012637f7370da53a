"""The standard library's ``sqlite3`` behind the part of apsw's interface the store
uses, loaded only by a store opened with ``driver="sqlite3"``."""

from __future__ import annotations

import os
import pathlib
import sqlite3
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import apsw

__all__ = ["Sqlite3Connection", "Sqlite3Cursor", "open_sqlite3"]

_DQS = (apsw.SQLITE_DBCONFIG_DQS_DML, apsw.SQLITE_DBCONFIG_DQS_DDL)
_NOT_UTF8 = "Could not decode to UTF-8"  # sqlite3's error for TEXT that is not UTF-8


def _apsw_error(exc: BaseException) -> BaseException:
    """The apsw exception for a ``sqlite3`` one (the same SQLite result code)."""
    if isinstance(exc, sqlite3.ProgrammingError):
        text = str(exc)
        if "closed" in text:
            return apsw.ConnectionClosedError(text)
        if "thread" in text:
            return apsw.ThreadingViolationError(text)
    if not isinstance(exc, sqlite3.Error):
        return exc
    if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(_NOT_UTF8):
        return UnicodeDecodeError("utf-8", b"", 0, 0, str(exc))  # as apsw raises it
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code > 0:
        error: BaseException = apsw.exception_for(code)
        error.args = exc.args
        return error
    return apsw.SQLError(f"{type(exc).__name__}: {exc}")


@contextmanager
def _as_apsw() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        error = _apsw_error(exc)
        if error is exc:
            raise
        raise error from exc


_INCREMENTAL_VACUUM = "PRAGMA INCREMENTAL_VACUUM"


def _incremental_vacuum(raw: sqlite3.Connection, sql: str) -> list[Any]:
    """Run again while it frees pages: sqlite3 takes its first column-less row for the end."""
    free = raw.execute("PRAGMA freelist_count").fetchall()[0][0]
    while free:
        raw.execute(sql).fetchall()
        left = raw.execute("PRAGMA freelist_count").fetchall()[0][0]
        if left >= free:
            break
        free = left
    return []


class Sqlite3Cursor:
    """apsw's ``Cursor`` subset: each statement runs to its end at once (rows kept)."""

    def __init__(self, connection: Sqlite3Connection) -> None:
        self.connection = connection
        self._rows: list[Any] = []

    def execute(self, sql: str, params: Any = ()) -> Sqlite3Cursor:
        """Run the statement ``sql`` with ``params``; return self."""
        raw = self.connection.raw
        with _as_apsw():
            if sql.lstrip().upper().startswith(_INCREMENTAL_VACUUM):
                self._rows = _incremental_vacuum(raw, sql)
            else:
                self._rows = raw.execute(sql, params).fetchall()
        return self

    def executemany(self, sql: str, rows: Sequence[Any]) -> Sqlite3Cursor:
        """Run ``sql`` once for each of ``rows``."""
        with _as_apsw():
            self.connection.raw.executemany(sql, rows)
        self._rows = []
        return self

    def fetchall(self) -> list[Any]:
        """The rows of the last statement."""
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Sqlite3Connection:
    """apsw's ``Connection`` subset on a ``sqlite3.Connection`` (:attr:`raw`)."""

    def __init__(self, raw: _Tracked, path: str, *, readonly: bool) -> None:
        self.raw = raw
        self._path = path
        self._readonly = readonly

    def cursor(self) -> Sqlite3Cursor:
        """A new cursor."""
        return Sqlite3Cursor(self)

    def execute(self, sql: str, params: Any = ()) -> Sqlite3Cursor:
        """Run ``sql`` on a new cursor and return it."""
        return Sqlite3Cursor(self).execute(sql, params)

    def changes(self) -> int:
        """Rows changed by the last INSERT, UPDATE or DELETE."""
        [(count,)] = self.execute("SELECT changes()").fetchall()
        return int(count)

    def total_changes(self) -> int:
        """Rows changed since the connection opened."""
        with _as_apsw():
            return self.raw.total_changes

    def get_autocommit(self) -> bool:
        """True when no transaction is open."""
        with _as_apsw():
            return not self.raw.in_transaction

    def set_busy_timeout(self, milliseconds: int) -> None:
        """How long to wait for another connection's lock."""
        self.execute(f"PRAGMA busy_timeout = {int(milliseconds)}")

    def config(self, op: int, *values: int) -> int:
        """The double-quoted-string switches, where ``sqlite3`` has ``setconfig`` (3.12+)."""
        setconfig = getattr(self.raw, "setconfig", None)
        if setconfig is not None and op in _DQS and values:
            with _as_apsw():
                setconfig(op, bool(values[0]))  # SQLite's own numbers, as apsw's
        return 0

    def readonly(self, name: str) -> bool:
        """Whether the file was opened read-only (or the process may not write it)."""
        self.get_autocommit()  # raises for a closed connection, as apsw does
        return self._readonly or not os.access(self._path, os.W_OK)

    def pragma(self, name: str, value: object = None) -> Any:
        """``PRAGMA name [= value]``, answered as apsw does: None, a value, or rows."""
        if value is None:
            sql = f"PRAGMA {name}"
        elif isinstance(value, str):
            sql = "PRAGMA {} = '{}'".format(name, value.replace("'", "''"))
        else:
            sql = f"PRAGMA {name} = {int(cast(int, value))}"
        rows = self.execute(sql).fetchall()
        if not rows:
            return None
        if len(rows) == 1:
            return rows[0][0] if len(rows[0]) == 1 else tuple(rows[0])
        return rows

    def set_authorizer(self, callback: Any) -> None:
        """The authorizer (``sqlite3``'s own callback signature is apsw's), or None."""
        with _as_apsw():
            self.raw.set_authorizer(callback)

    def interrupt(self) -> None:
        """Make the statement running now (from any thread) stop."""
        with _as_apsw():
            self.raw.interrupt()

    def close(self, force: bool = False) -> None:
        """Close, rolling back. ``force`` (from another thread, at a deadline): first
        interrupt, close the handler's cursors (which would keep the write lock), roll
        back and set ``query_only`` (a later statement of the handler cannot commit)."""
        if force:
            for _ in range(400):
                try:
                    self.raw.interrupt()
                    self.raw.close_cursors()
                    if self.raw.in_transaction:
                        self.raw.execute("ROLLBACK")
                    self.raw.execute("PRAGMA query_only = 1")
                    break
                except sqlite3.ProgrammingError as exc:
                    if "closed database" in str(exc):
                        return
                except sqlite3.Error:
                    pass  # a statement still running, or the ROLLBACK met the interrupt
                time.sleep(0.005)
        with _as_apsw():
            self.raw.close()


class _Tracked(sqlite3.Connection):
    """A ``sqlite3.Connection`` that remembers its cursors, for a forced close."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        """A new cursor, remembered."""
        cur = super().cursor(*args, **kwargs)
        self.open_cursors.add(cur)
        return cur

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """``cursor().execute(...)`` (``sqlite3``'s own skips :meth:`cursor`)."""
        return self.cursor().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        """``cursor().executemany(...)``."""
        return self.cursor().executemany(*args, **kwargs)

    def close_cursors(self) -> None:
        """Close the cursors (``OperationalError`` when the set changed meanwhile)."""
        try:
            cursors = list(self.open_cursors)
        except RuntimeError:  # the set changed while it was copied: try again
            raise sqlite3.OperationalError("cursors changing") from None
        for cur in cursors:
            cur.close()


def open_sqlite3(uri: str, path: pathlib.Path, *, readonly: bool) -> apsw.Connection:
    """:func:`~.driver.open_connection` for ``driver="sqlite3"``."""
    with _as_apsw():
        raw = sqlite3.connect(
            uri,
            uri=True,
            isolation_level=None,  # the store runs BEGIN IMMEDIATE and COMMIT itself
            check_same_thread=False,  # the store serialises its use under its lock
            timeout=0,  # set_busy_timeout follows
            factory=_Tracked,
        )
    return cast(apsw.Connection, Sqlite3Connection(raw, str(path), readonly=readonly))
