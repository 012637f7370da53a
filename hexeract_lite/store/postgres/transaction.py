"""Transactions the application shares with the PostgreSQL store: writes through the
caller's ``psycopg`` connection under a savepoint, a ``NOTIFY`` delivered at its commit,
and the transactional sink's runner."""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from ..._log import package_logger
from ...errors import DispatchError, InvalidArgument, StoreError
from ...message import ScheduledMessage
from ..checks import bad_connection as _bad
from ..checks import duplicate, first_duplicate
from ..sql.runner import ServerRunner, savepoint
from ..sql.server import NAME_HELD
from .connections import connect
from .notify import channel_name

if TYPE_CHECKING:
    from ..sql.server import ServerStore

log = package_logger(__name__)

_IDENTITY = (
    "SELECT current_database(), current_setting('port'), pg_postmaster_start_time(),"
    " to_regclass(%s)::oid::bigint"
)
"""What tells one database's table apart, whatever the route to the server: the
database, the server's port and start instant, the table's oid as the connection
resolves its name."""
_IDENTITIES: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_AFTER_HANDLER = "SELECT txid_current(), to_regclass(%s)::oid::bigint"
"""After the handler: the sink's transaction, and what the table's name resolves to."""


def _identity(conn: psycopg.Connection[Any], table: str) -> tuple[Any, ...]:
    row = conn.execute(_IDENTITY, [table]).fetchone()
    assert row is not None
    return tuple(row)


def _store_identity(store: ServerStore, fresh: bool = False) -> tuple[Any, ...]:
    """The :data:`_IDENTITY` the store's connections see (read again when ``fresh``:
    a server restart changes its start instant)."""
    found = None if fresh else _IDENTITIES.get(store)
    if found is None:
        with store._db.connection("insert") as conn:
            found = _IDENTITIES[store] = _identity(conn, store.table)
    return found


def notify(conn: psycopg.Connection[Any], store: ServerStore) -> None:
    """Tell other processes' workers, at the commit of ``conn``'s transaction."""
    conn.execute("SELECT pg_notify(%s, %s)", [channel_name(store.table), f"tx:{os.getpid()}"])


def _check(store: ServerStore, conn: psycopg.Connection[Any], what: str) -> None:
    if conn.closed:
        raise _bad(what, "is closed")
    status = conn.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise _bad(what, "is in a failed transaction (roll it back first)")
    if status == TransactionStatus.ACTIVE:
        raise _bad(what, "is busy running another statement (used from another thread?)")
    if status == TransactionStatus.IDLE and conn.autocommit:
        raise _bad(
            what,
            "is in autocommit mode with no open transaction; insert inside"
            " `with conn.transaction():` so that the schedule commits with your writes",
        )
    try:
        theirs = _identity(conn, store.table)
        [read_only] = conn.execute("SHOW transaction_read_only").fetchone() or ("off",)
    except psycopg.Error as exc:
        raise _bad(what, f"cannot be used: {type(exc).__name__}: {exc}") from exc
    ours = _store_identity(store)
    if theirs != ours:
        ours = _store_identity(store, fresh=True)
    if theirs != ours or ours[3] is None:
        raise _bad(
            what,
            f"is on another database or sees another table {store.table!r}"
            f" ({theirs[0]!r} on the server of port {theirs[1]} started {theirs[2]}),"
            f" not the store's ({store._where})",
        )
    if read_only == "on":
        raise _bad(what, "is read-only (transaction_read_only is on)")


@contextlib.contextmanager
def within(
    store: ServerStore, connection: object, what: str, write: bool = True
) -> Iterator[psycopg.Connection[Any]]:
    """The caller's connection, checked, reading tuples while the store uses it; with
    ``write``, in a savepoint (a read-only transaction: :class:`InvalidArgument`)."""
    if isinstance(connection, psycopg.Transaction):
        connection = connection.connection
    if not isinstance(connection, psycopg.Connection):
        raise InvalidArgument(
            f"{what}: connection must be a psycopg.Connection (or psycopg.Transaction) on"
            f" {store._where}, got {connection!r}"
        )
    conn: psycopg.Connection[Any] = connection

    def read_only(exc: BaseException) -> Exception | None:
        if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
            return _bad(what, f"is read-only ({exc})")
        return None

    factory, conn.row_factory = conn.row_factory, tuple_row
    try:
        _check(store, conn, what)
        if not write:
            yield conn
            return
        with savepoint(conn.execute, (psycopg.Error,), what, store._where, read_only):
            yield conn
    finally:
        conn.row_factory = factory


def insert_within(
    store: ServerStore,
    connection: object,
    messages: Sequence[ScheduledMessage],
    params: dict[str, Any],
) -> None:
    """Insert ``messages`` (``params`` bound to the insert) through the caller's
    connection, inside its transaction. :class:`InvalidArgument` for a connection that
    is closed, on another database, read-only, failed, or in autocommit mode with no
    transaction; :class:`DuplicateSchedule` for an id stored or repeated in the batch
    (the batch undone, the caller's transaction usable); :class:`StoreError` for a
    driver error."""
    try:
        with within(store, connection, "insert", write=bool(messages)) as conn:
            if not messages:
                return
            repeated = first_duplicate(messages, lambda _: False)
            if repeated is not None:
                raise repeated
            inserted = {row[0] for row in conn.execute(store._sql.insert, params).fetchall()}
            for m in messages:
                if m.schedule_id not in inserted:
                    raise duplicate(m)
            notify(conn, store)
    except StoreError as exc:  # as the store's own insert: a racing insert's name index
        if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
            raise
        raise store._first_duplicate(messages, "insert", NAME_HELD) from exc


def _close_quietly(conn: psycopg.Connection[Any], pid: int) -> None:
    if pid == os.getpid():
        with contextlib.suppress(psycopg.Error):
            conn.close()


class PostgresTransactionRunner(ServerRunner):
    """:class:`ServerRunner` on PostgreSQL: ``SET LOCAL`` timeouts; at the deadline the
    watchdog terminates the session."""

    _errors = (psycopg.Error,)
    _conn: psycopg.Connection[Any] | None

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            db = self._store._db
            self._conn = conn = connect(db._conninfo, db.timeouts)
            # a handler's COMMIT then opens a new transaction, which the sink rolls back
            conn.autocommit = False
            weakref.finalize(self, _close_quietly, conn, os.getpid())
        return self._conn

    def _ender(self, conn: psycopg.Connection[Any]) -> Callable[[], None]:
        """The watchdog's action: terminate the sink's session from a pooled connection."""
        pid = conn.info.backend_pid
        store = self._store

        def end() -> None:
            try:
                with store._db.connection("ending a transactional dispatch at its deadline") as c:
                    c.execute("SELECT pg_terminate_backend(%s)", [pid])
            except StoreError as exc:
                log.warning("could not end the transactional dispatch's session %d: %s", pid, exc)

        return end

    def _opened(self, conn: psycopg.Connection[Any]) -> Any:
        ms = f"{max(1, int(self._timeout * 1000))}ms"
        return (
            conn.cursor(row_factory=tuple_row)
            .execute(
                "SELECT set_config('statement_timeout', %s, true),"
                " set_config('idle_in_transaction_session_timeout', %s, true),"
                " txid_current()",
                [ms, ms],
            )
            .fetchone()
        )

    def _check_after(self, conn: psycopg.Connection[Any], opened: Any) -> None:
        store = self._store
        after = conn.cursor(row_factory=tuple_row).execute(_AFTER_HANDLER, [store.table]).fetchone()
        if opened is None or after is None or after[0] != opened[-1]:
            raise DispatchError(
                f"transactional handler {self._handler!r:.80} ended the sink's transaction"
                " (COMMIT, ROLLBACK or END run as SQL); its writes after that were rolled"
                " back. A handler must leave the transaction to the sink"
            )
        if after[1] != _store_identity(store)[3]:
            raise DispatchError(
                f"the transactional handler created a TEMP table or view named {store.table!r}"
                f" on the sink's session: it would hide the store's table ({store._where}) from"
                " every later acknowledgement; its writes and the acknowledgement were rolled"
                " back (name TEMP tables otherwise)"
            )

    def _settled(self, conn: psycopg.Connection[Any], fired: bool, failed: bool) -> None:
        if fired or conn.broken or conn.closed:
            self.close()

    def _timed_out(self, exc: BaseException, deadline: float) -> bool:
        timeouts = psycopg.errors.QueryCanceled | psycopg.errors.IdleInTransactionSessionTimeout
        return isinstance(exc, timeouts) or (
            isinstance(exc, psycopg.OperationalError) and time.monotonic() > deadline
        )


Runner = PostgresTransactionRunner
