"""Writes inside the caller's transaction on the store's file (:func:`insert_within`,
:func:`modify_within`, under a savepoint, nothing committed) and the transactional
sink's runner."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, TypeVar

import apsw

from ...errors import (
    DispatchError,
    InvalidArgument,
    InvalidConfiguration,
    ScheduleNotFound,
    StoreError,
)
from ...message import ScheduledMessage
from ...settle import Acknowledged, DispatchResult
from ...snapshot import LeasedOccurrence
from ..changes import Plan
from ..checks import bad_connection as _bad
from ..checks import first_duplicate
from ..sql.runner import TransactionRunner, savepoint
from .codec import diagnose, record_from_row, row_label
from .connections import is_duplicate, sink_transaction
from .driver import FileHold, hold_file, shares_sqlite_with_apsw, two_copies
from .schema import connect
from .session import roll_back

__all__ = ["SqliteTransactionRunner", "insert_within", "modify_within", "shares_sqlite_with_apsw"]

_T = TypeVar("_T")


def _plain_row(cursor: object, row: Any) -> Any:
    return row


class _Caller:
    """The caller's connection: rows read as plain tuples whatever factory it has."""

    def __init__(self, conn: Any, kind: str) -> None:
        self.conn = conn
        self.kind = kind

    def execute(self, sql: str, params: Any = ()) -> list[Any]:
        cursor = self.conn.cursor()
        if self.kind == "apsw":
            cursor.row_trace = _plain_row
            return list(cursor.execute(sql, params).fetchall())
        cursor.row_factory = None
        text_factory, self.conn.text_factory = self.conn.text_factory, str
        try:
            return list(cursor.execute(sql, params).fetchall())
        finally:
            self.conn.text_factory = text_factory
            cursor.close()

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        self.conn.cursor().executemany(sql, rows)


def _check_sqlite3(conn: sqlite3.Connection, what: str) -> _Caller:
    try:
        in_transaction = conn.in_transaction
        conn.execute("SELECT 1").fetchall()  # checks the thread and that it is open
    except sqlite3.ProgrammingError as exc:
        state = (
            "is used from another thread than it allows" if "thread" in str(exc) else "is closed"
        )
        raise _bad(what, f"(sqlite3) {state} ({exc})") from exc
    autocommit = getattr(conn, "autocommit", None)  # Python 3.12+; -1: legacy control
    legacy = autocommit is not True and autocommit is not False
    implicit = autocommit is False or (legacy and conn.isolation_level is not None)
    if not in_transaction and not implicit:
        raise _bad(
            what,
            "(sqlite3) is in autocommit mode with no open transaction; run BEGIN on it"
            " first (or use isolation_level other than None), so that the schedule"
            " commits with your writes",
        )
    return _Caller(conn, "sqlite3")


# a TEMP table or view named like the store's, which SQLite resolves first
_TEMP_SHADOW = (
    "SELECT 1 FROM temp.sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE"
)


def _check(connection: object, store: Any, what: str) -> _Caller:
    """The caller's connection, checked (:class:`InvalidArgument` naming the problem)."""
    path, driver, table = store.path, store.driver, store.table
    if isinstance(connection, apsw.Connection):
        try:
            autocommit = connection.get_autocommit()
            readonly = connection.readonly("main")
        except apsw.ConnectionClosedError as exc:
            raise _bad(what, "(apsw) is closed") from exc
        except apsw.Error as exc:
            raise _bad(what, f"(apsw) cannot be used: {exc}") from exc
        if autocommit:
            raise _bad(
                what,
                "(apsw) has no open transaction; run BEGIN (or BEGIN IMMEDIATE) on it first",
            )
        if readonly:
            raise _bad(what, f"(apsw) opened {path} read-only")
        caller = _Caller(connection, "apsw")
    elif isinstance(connection, sqlite3.Connection):
        caller = _check_sqlite3(connection, what)
    else:
        raise InvalidArgument(
            f"{what}: connection must be an apsw.Connection or a sqlite3.Connection on"
            f" {path}, got {connection!r}"
        )
    try:
        rows = caller.execute("PRAGMA database_list")
        [query_only] = caller.execute("PRAGMA query_only")[0]
    except (apsw.Error, sqlite3.Error) as exc:
        raise _bad(what, f"cannot be used: {type(exc).__name__}: {exc}") from exc
    main = next((str(row[2] or "") for row in rows if row[1] == "main"), "")
    if not main or os.path.realpath(main) != os.path.realpath(path):  # '': in memory, temporary
        raise _bad(what, f"is on another database ({main or 'in memory'!r}), not on {path}")
    if query_only:
        raise _bad(what, "is read-only (PRAGMA query_only is on)")
    if caller.execute(_TEMP_SHADOW, (table,)):
        raise _bad(
            what,
            f"sees another table {table!r}: a TEMP table of that name hides the store's in {path}",
        )
    if caller.kind != driver and not shares_sqlite_with_apsw():
        if driver == "apsw":
            raise _bad(
                what,
                f"is a sqlite3.Connection, but the store uses apsw: {two_copies()}. Open"
                " the store with SqliteScheduleStore.open(path, driver='sqlite3') to use"
                " sqlite3 connections with it",
            )
        raise _bad(
            what,
            f"is an apsw.Connection, but the store was opened with driver='sqlite3':"
            f" {two_copies()}. Pass a sqlite3.Connection on {path}, or open the store"
            " with driver='apsw'",
        )
    return caller


def _is_readonly(exc: BaseException) -> bool:
    if isinstance(exc, apsw.ReadOnlyError):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "readonly" in str(exc)


def _is_duplicate(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.IntegrityError):
        return getattr(exc, "sqlite_errorname", "") in (
            "SQLITE_CONSTRAINT_PRIMARYKEY",
            "SQLITE_CONSTRAINT_UNIQUE",
        )
    return is_duplicate(exc)


def insert_within(
    store: Any,
    connection: object,
    messages: Sequence[ScheduledMessage],
    rows: Sequence[Sequence[Any]],
    what: str,
) -> None:
    """Insert ``rows`` through the caller's ``connection`` in its transaction, all or
    nothing; the caller's transaction stays open whatever is raised."""
    caller = _check(connection, store, what)
    path, statements = store.path, store._sql
    if not rows:
        return

    def duplicate(exc: BaseException) -> Exception | None:
        if not _is_duplicate(exc):
            return None
        found = first_duplicate(
            messages, lambda s: caller.execute(statements.exists, {"id": s.bytes})
        )
        return StoreError("insert: a duplicate id or name vanished") if found is None else found

    with _savepoint(caller, path, what, duplicate):
        caller.executemany(statements.insert, rows)


def _savepoint(
    caller: _Caller,
    path: os.PathLike[str] | str,
    what: str,
    mapped: Callable[[BaseException], Exception | None] = lambda exc: None,
) -> AbstractContextManager[None]:
    errors = (apsw.Error, sqlite3.Error)
    if caller.kind == "sqlite3" and not caller.conn.in_transaction:
        level = caller.conn.isolation_level or ""
        try:
            caller.execute(f"BEGIN {level}")  # what sqlite3 runs before an INSERT anyway
        except errors as exc:
            raise StoreError(f"{what} on {path} failed: {type(exc).__name__}: {exc}") from exc

    def refused(exc: BaseException) -> Exception | None:
        error = mapped(exc)
        if error is None and _is_readonly(exc):
            error = _bad(what, f"cannot write to {path}: it is read-only ({exc})")
        return error

    return savepoint(caller.execute, errors, what, path, refused)


def modify_within(
    store: Any, connection: object, schedule_id: uuid.UUID, plan: Plan[_T], now: datetime
) -> _T:
    """``modify_record`` through the caller's ``connection`` in its transaction."""
    what = "modify"
    caller = _check(connection, store, what)
    path, statements = store.path, store._sql
    with _savepoint(caller, path, what):
        rows = caller.execute(statements.select_one, {"id": schedule_id.bytes})
        if not rows:
            raise ScheduleNotFound(schedule_id)
        try:
            record = record_from_row(rows[0])
        except Exception as exc:
            raise StoreError(
                f"schedule {row_label(rows[0])} in {path} is malformed: {diagnose(rows[0]) or exc}"
            ) from exc
        answer, new = plan(record.copy(), now)
        if new is not None:
            caller.execute(statements.write_row, store._row_params(new))
    return answer


def _close_from_outside(conn: apsw.Connection) -> None:
    for _ in range(2000):
        conn.interrupt()
        try:
            conn.close(True)
            return
        except apsw.ThreadingViolationError:
            time.sleep(0.005)
        except apsw.Error:
            return


def _plain_rows(conn: apsw.Connection) -> None:
    raw = getattr(conn, "raw", None)
    if isinstance(raw, sqlite3.Connection):
        raw.row_factory = None
        raw.text_factory = str


# texts no handler's statement shares: the authorizer runs when one is prepared and cached
_COMMIT = "COMMIT -- the sink's own"
_ROLLBACK = "ROLLBACK -- the sink's own"


class _TransactionGuard:
    """While the handler runs: refuses ``BEGIN``/``COMMIT``/``ROLLBACK`` (not
    savepoints) and notes the TEMP tables and views it makes."""

    __slots__ = ("active", "refused", "temp_changed")

    def __init__(self) -> None:
        self.active = False
        self.refused: list[str] = []
        self.temp_changed = False

    def __call__(self, op: int, arg1: str | None, *_: object) -> int:
        if self.active:
            if op == apsw.SQLITE_TRANSACTION:
                self.refused.append(str(arg1))
                return apsw.SQLITE_DENY
            if op in _TEMP_DDL or (op == apsw.SQLITE_ALTER_TABLE and arg1 == "temp"):
                self.temp_changed = True
        return apsw.SQLITE_OK

    def error(self, cause: BaseException | None = None) -> BaseException:
        err = DispatchError(
            "the transactional handler may not end the sink's transaction; it ran"
            f" {', '.join(dict.fromkeys(self.refused))} (refused): don't call commit(),"
            " rollback() or `with conn:` on the handler's connection; the sink commits"
            " its writes with the acknowledgement"
        )
        err.__cause__ = cause
        return err


_TEMP_DDL = frozenset({apsw.SQLITE_CREATE_TEMP_TABLE, apsw.SQLITE_CREATE_TEMP_VIEW})


class SqliteTransactionRunner(TransactionRunner):
    """:class:`TransactionRunner` on SQLite; at ``timeout`` the watchdog closes the connection."""

    _conn: apsw.Connection | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hold: FileHold | None = None  # the file, for the connection's library
        self._inherited: list[apsw.Connection] = []
        self._guard = _TransactionGuard()

    def _forget_if_forked(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's, neither used nor closed
            if self._conn is not None:
                self._inherited.append(self._conn)  # its hold stays: open in the child too
            self._conn, self._hold, self._pid = None, None, os.getpid()

    def _connection(self) -> apsw.Connection:
        self._forget_if_forked()
        if self._conn is None:
            s = self._store
            # the claim on the file for its library lasts while this connection is open
            hold = hold_file(s.path, s.driver)
            try:
                conn = connect(s.path, s.durability, s.busy_timeout, s.vfs, driver=s.driver)
                conn.set_authorizer(self._guard)
            except BaseException:
                hold.release()
                raise
            self._conn, self._hold = conn, hold
        return self._conn

    def _closed(self) -> None:
        self._conn = None
        hold, self._hold = self._hold, None
        if hold is not None:
            hold.release()

    def close(self) -> None:
        """Close the runner's own connection."""
        self._forget_if_forked()
        conn = self._conn
        if conn is None:
            return
        try:
            conn.close()
        except apsw.Error:  # in use by an abandoned handler: its claim on the file stays
            self._conn, self._hold = None, None
            return
        self._closed()

    def _drop(self) -> None:
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(apsw.Error):
                conn.close(True)
        self._closed()

    def run(self, occ: LeasedOccurrence) -> DispatchResult:
        """The handler and ``occ``'s acknowledgement in one transaction."""
        from ...transactional import bad_return, timed_out

        planned = self._acknowledgement(occ)
        if isinstance(planned, Acknowledged):
            return planned
        settlement, statement, params = planned
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except (apsw.Error, StoreError, InvalidConfiguration) as exc:
            self._drop()
            return DispatchResult.failed(self._error(exc))
        guard = self._guard

        def end_at_deadline() -> None:
            guard.active = False
            _close_from_outside(conn)

        self._watchdog.arm(self._timeout, end_at_deadline)
        committed = False
        error: BaseException | None = None
        try:
            conn.execute(statement, params)
            if conn.changes():  # else fenced out: the handler is not called
                guard.refused.clear()
                guard.temp_changed = False
                guard.active = True
                began = time.monotonic()
                try:
                    with sink_transaction(self._store.path):
                        returned = self._handler(occ.message, getattr(conn, "raw", conn))
                finally:
                    guard.active = False
                    _plain_rows(conn)
                if guard.refused:
                    error = guard.error()
                elif guard.temp_changed and conn.execute(_TEMP_SHADOW, (self._store.table,)):
                    error = DispatchError(
                        "the transactional handler created a TEMP table or view named"
                        f" {self._store.table!r} on the sink's connection: it would hide the"
                        f" store's table in {self._store.path} from every later"
                        " acknowledgement; its writes and the acknowledgement were rolled"
                        " back (name TEMP tables otherwise)"
                    )
                elif returned is not None:
                    error = bad_return(self._handler, returned)
                else:
                    if self._runs is not None:
                        conn.execute(self._runs.insert, self._run_row(occ, began))
                    conn.execute(_COMMIT)
                    committed = True
        except BaseException as exc:  # the handler's failure, whatever its type
            error = guard.error(exc) if guard.refused else exc
        fired = self._watchdog.disarm()
        if fired:
            self._closed()  # the watchdog closed it (rolling back what was not committed)
        elif not committed and not roll_back(conn, _ROLLBACK):
            self._drop()
        if error is None:  # committed, or fenced out before the handler
            return Acknowledged(settlement=settlement, applied=committed)
        if fired:
            return DispatchResult.failed(timed_out(self._timeout, error))
        return DispatchResult.failed(error)  # the handler's SQL and ours share the errors

    def _error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, StoreError):
            return exc
        err = StoreError(
            f"transactional dispatch on {self._store.path} failed: {type(exc).__name__}: {exc}"
        )
        err.__cause__ = exc
        return err
