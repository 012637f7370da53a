"""Transactions the application shares with the MySQL store: writes through the
caller's ``pymysql`` connection under a savepoint (workers see its commit at their next
poll), and the transactional sink's runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import pymysql
from pymysql.constants import SERVER_STATUS

from ..._log import package_logger
from ...errors import DispatchError, InvalidArgument, StoreError
from ..checks import bad_connection as _bad
from ..checks import duplicate, first_duplicate
from ..sql.runner import ServerRunner, savepoint
from ..sql.server import NAME_HELD
from .session import DUPLICATE_KEY, MysqlSession

if TYPE_CHECKING:
    from ...message import ScheduledMessage
    from ..sql.server import ServerStore

_log = package_logger(__name__)
_IDENTITY = "SELECT DATABASE(), @@hostname, @@port, @@server_id"


def _check(store: ServerStore, connection: object, what: str) -> pymysql.Connection[Any]:
    """The caller's connection, when it is open, in a transaction, on the store's
    server and database."""
    if not isinstance(connection, pymysql.Connection):
        raise InvalidArgument(
            f"{what}: connection must be a pymysql.Connection on {store._where},"
            f" got {connection!r:.100}"
        )
    if not connection.open:
        raise _bad(what, "is closed")
    status: int = connection.server_status  # type: ignore[attr-defined]
    in_tx = status & SERVER_STATUS.SERVER_STATUS_IN_TRANS
    if connection.get_autocommit() and not in_tx:
        raise _bad(
            what,
            "is in autocommit mode with no open transaction; call conn.begin() first so"
            " that the schedule commits with your writes",
        )
    try:
        theirs = MysqlSession(connection).fetch(_IDENTITY)[0]
    except pymysql.MySQLError as exc:
        raise _bad(what, f"cannot be used: {type(exc).__name__}: {exc}") from exc
    with store._db.connection(what) as conn:
        ours = MysqlSession(conn).fetch(_IDENTITY)[0]
    if tuple(theirs) != tuple(ours):
        raise _bad(
            what,
            f"is on another server or database ({theirs[0]!r} on {theirs[1]}:{theirs[2]}),"
            f" not the store's ({store._where})",
        )
    return connection


def _savepoint(store: ServerStore, conn: pymysql.Connection[Any], what: str) -> Any:
    return savepoint(MysqlSession(conn).execute, (pymysql.MySQLError,), what, store._where)


def insert_within(
    store: ServerStore,
    connection: object,
    messages: Sequence[ScheduledMessage],
    rows: list[dict[str, Any]],
) -> None:
    """Insert ``messages`` (bound as ``rows``) through the caller's connection, inside
    its transaction. Raises :class:`InvalidArgument` for a connection that is closed,
    on another database, or in autocommit mode with no transaction;
    :class:`DuplicateSchedule` for an id stored already or repeated in the batch (the
    batch undone, the caller's transaction still usable); :class:`StoreError` saying so
    when a unique name is held by another schedule."""
    conn = _check(store, connection, "insert")
    if not messages:
        return
    repeated = first_duplicate(messages, lambda _: False)
    if repeated is not None:
        raise repeated
    try:
        with _savepoint(store, conn, "insert"), conn.cursor() as cur:
            cur.executemany(store._sql.insert, rows)
    except StoreError as exc:
        cause = exc.__cause__
        if not isinstance(cause, pymysql.IntegrityError):
            raise
        for m in messages:
            if MysqlSession(conn).fetch(store._sql.exists, {"id": m.schedule_id.bytes}):
                raise duplicate(m) from exc
        if cause.args[0] != DUPLICATE_KEY:
            raise
        raise StoreError(f"insert on {store._place}: {NAME_HELD}") from exc


@contextmanager
def within(store: ServerStore, connection: object, what: str) -> Iterator[pymysql.Connection[Any]]:
    """The caller's connection, checked, in a savepoint."""
    conn = _check(store, connection, what)
    with _savepoint(store, conn, what):
        yield conn


def notify(conn: pymysql.Connection[Any], store: ServerStore) -> None:
    """Nothing to send: other processes' workers see the commit at their next poll."""


_MARK = "hexeract_sink_transaction"
"""A savepoint set first in the sink's transaction: it exists while the transaction does."""
_NO_SAVEPOINT = 1305  # ER_SP_DOES_NOT_EXIST


class MysqlTransactionRunner(ServerRunner):
    """:class:`ServerRunner` on MySQL: at the deadline the watchdog kills the session;
    a handler ending the transaction itself is rolled back."""

    _errors = (pymysql.MySQLError,)
    _conn: pymysql.Connection[Any] | None

    def _connection(self) -> pymysql.Connection[Any]:
        if self._conn is None or not self._conn.open:
            self._conn = conn = self._store._db.new()
            # Not autocommit: should the handler end the transaction, its later writes
            # open a new one (which the sink rolls back) instead of committing each.
            conn.autocommit(False)
        return self._conn

    def _ender(self, conn: pymysql.Connection[Any]) -> Callable[[], None]:
        thread_id: int = conn.thread_id()  # type: ignore[no-untyped-call]

        def end() -> None:
            try:
                with self._store._db.connection("ending a transactional dispatch") as c:
                    MysqlSession(c).execute(f"KILL CONNECTION {int(thread_id)}")
            except StoreError as exc:
                _log.warning("could not end the transactional dispatch's session: %s", exc)

        return end

    def _opened(self, conn: pymysql.Connection[Any]) -> None:
        conn.query(f"SAVEPOINT {_MARK}")

    def _check_after(self, conn: pymysql.Connection[Any], opened: Any) -> None:
        # a COMMIT or ROLLBACK (as SQL or through commit()/rollback()/begin()) or a
        # statement that commits implicitly (DDL) drops every savepoint
        try:
            conn.query(f"RELEASE SAVEPOINT {_MARK}")
        except pymysql.OperationalError as exc:
            if exc.args[0] != _NO_SAVEPOINT:
                raise
            raise DispatchError(
                f"transactional handler {self._handler!r:.80} ended the sink's transaction"
                " (COMMIT, ROLLBACK, begin() or a statement that commits implicitly); its"
                " writes after that were rolled back. A handler must leave the transaction"
                " to the sink"
            ) from None

    def _settled(self, conn: pymysql.Connection[Any], fired: bool, failed: bool) -> None:
        if failed:
            with suppress(Exception):
                conn.rollback()
        if fired or not conn.open:
            self.close()


Runner = MysqlTransactionRunner
