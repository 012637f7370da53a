"""SqliteScheduleStore: the store contract on one SQLite file, shared with hexeract.

The table is the reference's (hexeract-scheduler-sql) column for column, so a database
written by the Rust framework opens here and the rows written here are rows it reads.
On top of the reference's two indexes the store adds five partial indexes of its own
(see :func:`~hexeract_lite.store.schema.sqlite_extra_index_ddl`) so that a claim, the
sweep and the wake-up hint stay O(log n) however many rows wait or back off.

Concurrency: one apsw connection per store, used under a lock, so one store object is
safe from many threads; several processes share the file through WAL and
``BEGIN IMMEDIATE`` write transactions, and a claim selects and leases its rows in one
such transaction, so a live lease is never handed out twice.

Beside it: :mod:`.schema` (opening a file, schema versions and upgrades),
:mod:`.statements` (the statements), :mod:`.codec` (rows <-> records).
(Over 700 lines: the store class is the contract's ~20 methods, each a short
transaction, plus the class's own documentation of durability, read-only and fork
behaviour; splitting it would scatter one lock discipline over several files.)
"""

from __future__ import annotations

import os
import pathlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, TypeVar

import apsw

from ..._log import package_logger
from ..._time import format_now, format_ts, parse_ts, to_utc_ms
from ...clock import SYSTEM_CLOCK, Clock
from ...errors import (
    DuplicateSchedule,
    InvalidArgument,
    InvalidConfiguration,
    NotReplayable,
    ScheduleNotFound,
    StoreError,
)
from ...message import ScheduledMessage, validate_message
from ...settle import Settlement, SettlementKind
from ...snapshot import LeasedOccurrence, MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from ..base import (
    SWEEP_ERROR,
    SettlingStore,
    check_claim,
    check_export,
    check_flag,
    check_limit,
    check_max_attempts,
    check_messages,
    check_records,
    check_schedule_id,
    check_settlements,
)
from ..changes import Plan
from ..columns import COLUMN_NAMES
from ..fork import AT_FORK_HOOKS, PidCheckingLock, hold, start_afresh_after_fork
from ..listing import (
    PRUNE_COLUMN,
    check_batch_size,
    check_listing,
    check_prune,
    prune_cut,
    sqlite_glob,
)
from ..notices import malformed_dead_lettered
from ..record import ScheduleRecord
from ..schema import DEFAULT_TABLE, validate_sqlite_table_name
from ..settle_plan import PlannedSettlement, settle_plan
from ..stats import StoreStats
from .codec import (
    COLUMN_INDEX,
    SELECT_LIST,
    diagnose,
    encode_id,
    encode_instant,
    encode_lease,
    leased_from_row,
    malformed,
    message_rows,
    record_from_row,
    row_from_record,
    row_label,
)
from .driver import FileHold, check_driver
from .notify import WalWatcher
from .ops import file_sizes, list_sql, prune_sql, replay_sql, stats_sql
from .schema import (
    APP_NAME,
    DATABASE_FILE_NAME,
    DURABILITY,
    META_TABLE,
    SCHEMA_VERSION,
    connect,
    default_database_path,
    memory_sorts,
    open_database,
)
from .session import set_busy_wait
from .statements import PortableReads, SqliteStatements, claim_rows

_WAL_RECHECK_S = (0.0, 0.001, 0.002, 0.004, 0.008)
"""When another connection's commit may show after a write to the WAL file."""

__all__ = [
    "APP_NAME",
    "DATABASE_FILE_NAME",
    "META_TABLE",
    "SCHEMA_VERSION",
    "SqliteScheduleStore",
    "default_database_path",
]

_BEGIN = "BEGIN IMMEDIATE"
_BEGIN_UNSYNCED = "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE"
_RESYNC = "PRAGMA synchronous=FULL"
_log = package_logger(__name__)

# positions in a row read with SELECT_LIST
_ID = COLUMN_INDEX["schedule_id"]
_LEASED_UNTIL = COLUMN_INDEX["leased_until"]

_INHERITED: list[object] = []
"""Connections a forked child inherited: never used and never closed (SQLite forbids
either across a fork), kept here so that garbage collection does not close them."""


def _claim_order(occurrence: LeasedOccurrence) -> tuple[datetime, bytes]:
    message = occurrence.message
    return (message.scheduled_for, message.schedule_id.bytes)


def _is_duplicate(exc: BaseException) -> bool:
    """A primary-key violation: the schedule id exists already (or the unique name,
    which SQLite may check first: a named schedule's id is its name's)."""
    return isinstance(exc, apsw.ConstraintError) and (
        getattr(exc, "extendedresult", None)
        in (apsw.SQLITE_CONSTRAINT_PRIMARYKEY, apsw.SQLITE_CONSTRAINT_UNIQUE)
    )


class _DuplicateKey(Exception):
    """Raised inside a write transaction when an insert hits the primary key."""


_STATEMENT_KIND = {
    SettlementKind.DELIVERED: "mark_delivered",
    SettlementKind.RESCHEDULE: "reschedule",
    SettlementKind.FAILED: "mark_failed",
    SettlementKind.DEAD_LETTERED: "mark_dead_lettered",
    SettlementKind.RELEASED: "release",
}
"""Each settlement kind's statement (an attribute of :class:`SqliteStatements`)."""


def _select_list(connection: apsw.Connection, table: str) -> str:
    """:data:`SELECT_LIST`, with ``NULL AS <column>`` for each column the table lacks
    (an older table, read-only: it is not upgraded)."""
    try:
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
    except apsw.Error:  # pragma: no cover - the table was just checked
        return SELECT_LIST
    return ", ".join(name if name in present else f"NULL AS {name}" for name in COLUMN_NAMES)


_T = TypeVar("_T")


class SqliteScheduleStore(SettlingStore):
    """The store contract on one SQLite file (apsw, WAL), shared with hexeract.

    Build it with :meth:`open`. One store object is safe to use from several threads:
    it has one connection, used under a lock, so its calls take turns. Several stores
    (in threads or processes) may open the same file and claim from it at once, and a
    live lease is never handed out twice; they take turns on SQLite's write lock
    instead. Throughput is the same either way; a thread whose inserts must not wait
    behind another thread's claims and acknowledgements may open its own store. Every
    write is one short ``BEGIN IMMEDIATE`` transaction: all or nothing. Every instant
    comes from ``clock`` and is bound as a parameter; no SQL reads SQLite's own clock.

    Rows are read and written exactly in the layout of hexeract's
    ``hexeract-scheduler-sql`` (see :mod:`hexeract_lite.store.schema`); a claimed row
    that cannot be decoded is dead-lettered with a ``last_error`` naming the column,
    and a listing shows it as a :class:`~hexeract_lite.snapshot.MalformedSchedule`.

    Durability (``open(durability=...)``); every mode is safe against an application
    crash (WAL: a committed transaction is in the file), and none ever corrupts it:

    - ``"full"`` (the default): ``PRAGMA synchronous=FULL``, every commit waits for
      fsync. A power cut or OS crash loses nothing that was committed.
    - ``"relaxed"``: the application's writes (``insert``, ``insert_many``,
      ``import_records``, ``cancel``, ``set_paused``, ``resume``, ``replay``) commit
      with fsync as under ``"full"``; the worker's own transactions (``claim_due``,
      ``settle`` and the single acknowledgements, the sweep, the rewriting of instants
      another tool wrote) commit without waiting for it (``synchronous=NORMAL`` for
      those transactions only). A power cut or OS crash may therefore roll back the
      last claims, acknowledgements and sweeps committed since the last fsynced commit
      (any later insert or control change, from any connection, fsyncs the log and with
      it everything committed before it), never an insert or a control change. What
      that costs is redeliveries, never a loss: a lost claim leaves the occurrence
      claimable (an attempt is not counted), a lost acknowledgement leaves it leased,
      and it is delivered again, with the same occurrence id, once the lease runs out;
      a lost sweep is swept again. At-least-once holds.
    - ``"normal"``: ``synchronous=NORMAL`` for everything: the last transactions of
      any kind, inserts included, may roll back in a power cut or OS crash.

    Processes: ``fork()`` (``multiprocessing``'s ``fork`` start method, pre-fork
    servers) waits for the store's call in flight, if any (bounded by
    ``busy_timeout``), so that no transaction is open at the fork. The child's store
    opens its own connection on its first call, with a fresh lock; the inherited
    connection is left untouched (SQLite forbids using or closing a connection across
    a fork), and the parent's store goes on as before. A store cannot be pickled (to a
    ``spawn``/``forkserver`` child or a ``ProcessPoolExecutor`` task): open one in
    each process instead.

    Errors from SQLite (a lock held for longer than ``busy_timeout``, an I/O error, a
    full disk, a corrupt file) surface as :class:`~hexeract_lite.errors.StoreError`
    naming the file, with the apsw error chained; the failed operation applied nothing.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        connection: apsw.Connection,
        path: pathlib.Path,
        table: str,
        clock: Clock,
        busy_timeout: timedelta,
        durability: str = "full",
        vfs: str | None = None,
        readonly: bool = False,
        version: int = SCHEMA_VERSION,
        driver: str = "apsw",
        hold: FileHold | None = None,
    ) -> None:
        """Use :meth:`open`; this wraps a connection that :meth:`open` configured."""
        super().__init__()
        self._driver = driver
        self._hold = hold  # this process's claim on the file for the driver
        self._conn: apsw.Connection | None = connection
        self._cursor: apsw.Cursor | None = connection.cursor()
        self._path = path
        self._table = table
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._durability = durability
        self._vfs = vfs
        self._readonly = readonly
        # "relaxed": the worker's transactions begin with synchronous=NORMAL
        self._begin_worker = _BEGIN_UNSYNCED if durability == "relaxed" else _BEGIN
        # read-only on an older table: NULL for the columns of ours it lacks yet
        select_list = _select_list(connection, table) if readonly else SELECT_LIST
        self._sql = SqliteStatements(table, select_list)
        self._settle_sql = {
            kind: getattr(self._sql, name) for kind, name in _STATEMENT_KIND.items()
        }
        # read-only on a table that may lack our indexes or hold instants in another
        # layout (which only a writer may rewrite): listings that need neither
        self._portable: PortableReads | None = (
            PortableReads(table, select_list) if readonly else None
        )
        self._current = version == SCHEMA_VERSION
        self._reopen = False
        # started by the first claim in each process (see .notify)
        self._watcher: WalWatcher | None = None
        self._watch_pid = 0
        self._seen_version: object = None
        self._lock: threading.Lock | PidCheckingLock
        if AT_FORK_HOOKS:
            self._lock = threading.Lock()
            start_afresh_after_fork(self)
        else:  # pragma: no cover - no os.register_at_fork (nor fork): check the pid
            self._lock = PidCheckingLock(self._forget_connection)

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        table: str = DEFAULT_TABLE,
        clock: Clock = SYSTEM_CLOCK,
        durability: str = "full",
        busy_timeout: timedelta = timedelta(seconds=5),
        create: bool = True,
        vfs: str | None = None,
        readonly: bool = False,
        driver: str = "apsw",
    ) -> Self:
        """Open (and, when missing, create) the scheduler table ``table`` in ``path``.

        - ``path``: the database file; None means :func:`default_database_path`, whose
          folders are created. A new file is created with owner-only permissions
          (0600 on POSIX); on any other path the folder must already exist.
        - ``table``: the table name, ``^[a-zA-Z_][a-zA-Z0-9_]*$``, at most 63 bytes, not
          a word SQLite reads as a keyword (:class:`InvalidConfiguration` otherwise,
          before any SQL runs).
        - ``clock``: where "now" comes from (``created_at``, ``delivered_at``, retry
          deadlines, the sweep, replay).
        - ``durability``: ``"full"`` (every commit fsynced), ``"relaxed"`` (the
          application's writes fsynced, the worker's claims and acknowledgements not)
          or ``"normal"`` (``synchronous=NORMAL``); see the class docstring.
        - ``busy_timeout``: how long an operation waits for another connection's write
          lock before it fails with :class:`StoreError`.
        - ``create``: when False, a missing file or a missing table raises
          :class:`StoreError` (``no database at <path>``) and nothing is created; a
          table hexeract (or an older hexeract_lite) created is still adopted.
        - ``vfs``: the name of a registered SQLite VFS (``apsw.VFS``) to open the
          file with; None, the default one. For fault injection and special storage.
        - ``readonly``: open the file read-only (``SQLITE_OPEN_READONLY``), for
          commands that only read: the file is never written, not even to switch it to
          WAL, adopt or upgrade its table, add an index or run ``PRAGMA optimize``, and
          a file the user may only read opens. No ``-wal``/``-shm`` file is left beside a
          WAL file that had none (it is then read through a ``query_only`` connection,
          which removes them as it closes). A missing file or table raises
          :class:`StoreError` (``create`` is not consulted); a table the reference or
          an older hexeract_lite made is read as it is. ``inspect``, the listings,
          ``next_wakeup``, ``export_records`` and ``data_version`` work; every other
          method raises :class:`StoreError` saying the store is read-only.
        - ``driver``: the SQLite library of every connection the store opens:
          ``"apsw"`` (the default) or ``"sqlite3"`` (the standard library's, for an app
          whose own connections are ``sqlite3.Connection`` s: ``insert(...,
          connection=)`` and :class:`~hexeract_lite.transactional.TransactionalSink`
          then take and give ``sqlite3`` connections). One library per file per process
          (see :mod:`.driver`): opening a file this process has open with the
          other one raises :class:`InvalidConfiguration`, as does a SQLite older than
          3.35 or a ``vfs`` with ``"sqlite3"``.

        A new database is built under a temporary name beside ``path`` and linked into
        place only once complete: other processes never see a half-made file, and a
        failed creation (full disk, I/O error) leaves nothing. Several processes
        creating the same file at once all end up sharing the one that got there
        first; where the file system has no hard links the name is claimed atomically
        instead and the table is built in place (see
        :func:`~hexeract_lite.store.sqlite.schema.create_database`).

        A table the Rust reference created (no version recorded) is adopted: its rows
        are kept, hexeract_lite's indexes are added and timestamp text is normalised
        to ``YYYY-MM-DDTHH:MM:SS.mmmZ``, in one transaction; an older version is
        upgraded the same way. A table whose recorded version is newer than
        :data:`SCHEMA_VERSION`, or that is not a scheduler table, is refused before
        anything in the file changes. A path that is a folder, a file that is not a
        SQLite database, a read-only file or folder (unless ``readonly``), or a
        missing folder raise :class:`StoreError` naming the path, changing nothing.
        """
        table = validate_sqlite_table_name(table)
        if durability not in DURABILITY:
            raise InvalidConfiguration(
                f"durability must be 'full', 'relaxed' or 'normal', got {durability!r}"
            )
        if not isinstance(busy_timeout, timedelta) or busy_timeout < timedelta(0):
            raise InvalidConfiguration(
                f"busy_timeout must be a timedelta >= 0, got {busy_timeout!r}"
            )
        if not isinstance(clock, Clock):
            raise InvalidConfiguration(f"clock must have a now() method, got {clock!r}")
        driver = check_driver(driver, vfs)
        if vfs is not None and vfs not in apsw.vfs_names():
            raise InvalidConfiguration(
                f"vfs must name a registered SQLite VFS {apsw.vfs_names()}, got {vfs!r}"
            )
        check_flag("create", create)
        check_flag("readonly", readonly)
        db, connection, version, hold = open_database(
            path,
            table,
            durability=durability,
            busy_timeout=busy_timeout,
            create=create and not readonly,
            vfs=vfs,
            readonly=readonly,
            driver=driver,
        )
        return cls(
            connection=connection,
            path=db,
            table=table,
            clock=clock,
            busy_timeout=busy_timeout,
            durability=durability,
            vfs=vfs,
            readonly=readonly,
            version=version,
            driver=driver,
            hold=hold,
        )

    # -- properties and lifetime -----------------------------------------------------

    @property
    def path(self) -> pathlib.Path:
        """The database file (absolute)."""
        return self._path

    @property
    def table(self) -> str:
        """The scheduler table's name."""
        return self._table

    @property
    def clock(self) -> Clock:
        """The clock the store reads "now" from."""
        return self._clock

    @property
    def durability(self) -> str:
        """``"full"``, ``"relaxed"`` or ``"normal"``, as opened (see the class docstring)."""
        return self._durability

    @property
    def busy_timeout(self) -> timedelta:
        """How long a write waits for another connection's write lock, as opened."""
        return self._busy_timeout

    @property
    def vfs(self) -> str | None:
        """The SQLite VFS the file was opened with (None: the default one)."""
        return self._vfs

    @property
    def driver(self) -> str:
        """``"apsw"`` or ``"sqlite3"``: the SQLite library of the store's connections."""
        return self._driver

    @property
    def readonly(self) -> bool:
        """True when opened with ``readonly=True``: the store never writes."""
        return self._readonly

    def close(self) -> None:
        """Close the connection; later calls raise :class:`StoreError`. Idempotent."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
        with self._lock:
            conn, self._conn, self._cursor = self._conn, None, None
            self._reopen = False
            hold, self._hold = self._hold, None
            try:
                if conn is not None:
                    conn.close()
            except apsw.Error as exc:
                raise self._error("close", exc) from exc
            finally:
                if hold is not None:  # after the close: no lock of ours is left
                    hold.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteScheduleStore({str(self._path)!r}, table={self._table!r})"

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self!r} cannot be pickled (to a spawned process or a process pool): open"
            " the store in each process with SqliteScheduleStore.open(path)"
        )

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes when another connection commits to the file.

        Cheap (no disk read); a worker polls it to notice other processes' inserts
        within its poll interval. Its own commits do not move it (they notify
        :attr:`changes`).
        """
        with self._lock:
            cur = self._live_cursor()
            try:
                value = cur.execute("PRAGMA data_version").fetchall()[0][0]
            except apsw.Error as exc:
                raise self._error("data_version", exc) from exc
        assert isinstance(value, int)
        return value

    # -- a forked child ------------------------------------------------------------------

    def _before_fork(self) -> bool:
        """In the forking thread: wait (bounded) for a call in flight, so that no
        transaction of this store is open at the fork (see :mod:`.fork`)."""
        assert isinstance(self._lock, type(threading.Lock()))
        return hold(self._lock, self._busy_timeout.total_seconds() + 10)

    def _after_fork_in_parent(self) -> None:
        assert isinstance(self._lock, type(threading.Lock()))
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        """In a child made by fork(), before it runs anything else: a fresh lock and no
        connection yet (the next call opens the child's own)."""
        self._lock = threading.Lock()
        self._forget_connection()

    def _forget_connection(self) -> None:
        """Drop the inherited connection without using or closing it; the next call
        opens the store's own (:meth:`_live_cursor`)."""
        if self._conn is not None:
            _INHERITED.append((self._conn, self._cursor))
            self._conn, self._cursor = None, None
            self._reopen = True

    def _reconnect(self) -> apsw.Cursor:
        """The child's own connection to the same file, configured as the parent's
        (the schema was checked when the parent opened the store)."""
        conn = connect(
            self._path,
            self._durability,
            self._busy_timeout,
            self._vfs,
            readonly=self._readonly,
            driver=self._driver,
        )
        try:
            memory_sorts(conn)
        except apsw.Error as exc:
            conn.close()
            raise self._error("reopening after fork", exc) from exc
        self._conn, self._cursor, self._reopen = conn, conn.cursor(), False
        return self._cursor

    # -- plumbing ----------------------------------------------------------------------

    def _now(self) -> datetime:
        return to_utc_ms(self._clock.now(), "clock.now()")

    def _live_cursor(self) -> apsw.Cursor:
        """The connection's cursor (under the lock): opened afresh in a forked child."""
        if self._cursor is None:
            if self._reopen:
                return self._reconnect()
            raise StoreError(f"the store on {self._path} is closed")
        return self._cursor

    def _writable(self, what: str) -> None:
        if self._readonly:
            raise StoreError(f"{what} on {self._path}: the store was opened read-only")

    def _error(self, what: str, exc: apsw.Error) -> StoreError:
        if isinstance(exc, apsw.BusyError | apsw.LockedError):
            seconds = self._busy_timeout.total_seconds()
            return StoreError(
                f"{what} on {self._path}: the database stayed locked by another connection"
                f" for longer than the busy timeout ({seconds:g} s): {exc}"
            )
        return StoreError(f"{what} on {self._path} failed: {type(exc).__name__}: {exc}")

    @contextmanager
    def _write(self, what: str, *, worker: bool = False) -> Iterator[apsw.Cursor]:
        """One ``BEGIN IMMEDIATE`` transaction under the store's lock; rolled back on
        any exception, apsw errors raised as :class:`StoreError`.

        ``worker``: one of the worker's own transactions (claims, acknowledgements, the
        sweep), which ``durability="relaxed"`` commits without waiting for fsync."""
        self._writable(what)
        with self._lock:
            cur = self._live_cursor()
            begin = self._begin_worker if worker else _BEGIN
            try:
                try:
                    cur.execute(begin)
                except apsw.Error as exc:
                    raise self._error(what, exc) from exc
                try:
                    yield cur
                    cur.execute("COMMIT")
                except BaseException as exc:
                    self._rollback()
                    if _is_duplicate(exc):
                        raise _DuplicateKey() from exc
                    if isinstance(exc, apsw.Error):
                        raise self._error(what, exc) from exc
                    raise
            finally:
                resynced = begin is not _BEGIN_UNSYNCED or self._resync()
        if not resynced:  # pragma: no cover - a broken connection fails its next call
            _log.warning("could not restore synchronous=FULL on %s", self._path)

    def _resync(self) -> bool:
        """Back to ``synchronous=FULL`` after a worker transaction under "relaxed";
        False if that failed (logged by the caller, outside the lock)."""
        conn = self._conn
        if conn is not None:
            try:
                conn.execute(_RESYNC)
            except apsw.Error:  # pragma: no cover
                return False
        return True

    def _rollback(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if not conn.get_autocommit():
                conn.execute("ROLLBACK")
        except apsw.Error:
            pass  # SQLite already rolled back (or the connection is broken); nothing applied

    def _read(self, what: str, sql: str, params: Any) -> list[Any]:
        with self._lock:
            cur = self._live_cursor()
            try:
                return cur.execute(sql, params).fetchall()
            except apsw.Error as exc:
                raise self._error(what, exc) from exc

    def _malformed(self, row: Sequence[Any], exc: Exception) -> StoreError:
        why = diagnose(row) or f"{type(exc).__name__}: {exc}"
        return StoreError(
            f"schedule {row_label(row)} in the table {self._table} of {self._path} is"
            f" malformed: {why}"
        )

    def _records(self, rows: list[Any]) -> list[ScheduleRecord]:
        """Rows as records (ids and instants decoded); a malformed row: StoreError."""
        records = []
        for row in rows:
            try:
                records.append(record_from_row(row))
            except Exception as exc:
                raise self._malformed(row, exc) from exc
        return records

    def _listing(self, rows: list[Any]) -> list[ScheduleSnapshot | MalformedSchedule]:
        """Rows as snapshots; a row that does not decode as a MalformedSchedule."""
        listed: list[ScheduleSnapshot | MalformedSchedule] = []
        for row in rows:
            try:
                listed.append(record_from_row(row).snapshot())
            except Exception as exc:
                listed.append(malformed(row, exc))
        return listed

    # -- writing -------------------------------------------------------------------------

    def insert(
        self, message: ScheduledMessage, max_attempts: int, *, connection: object = None
    ) -> None:
        """See :meth:`ScheduleStore.insert`. ``connection``: an ``apsw.Connection`` or
        ``sqlite3.Connection`` on this file with a transaction open: the row is written
        inside that transaction and exists once the caller commits (see
        :func:`~hexeract_lite.store.sqlite.transaction.insert_within`)."""
        check_max_attempts(max_attempts)
        validate_message(message)
        self._writable("insert")
        row = message_rows((message,), max_attempts, format_now(self._clock.now()))[0]
        if connection is not None:
            from .transaction import insert_within  # sqlite3 and settlement: not for reads

            insert_within(
                connection, self._path, self._sql, [message], [row], "insert", self._driver
            )
            return
        # The hot path of enqueueing, kept lean: one call runs BEGIN IMMEDIATE, the
        # INSERT and COMMIT; a duplicate id is the primary key's constraint error.
        with self._lock:
            cur = self._live_cursor()
            try:
                cur.execute(self._sql.insert_one, row)
            except BaseException as exc:
                self._rollback()
                if _is_duplicate(exc):
                    raise DuplicateSchedule(message.schedule_id) from exc
                if isinstance(exc, apsw.Error):
                    raise self._error("insert", exc) from exc
                raise
        self.changes.notify()

    def insert_many(
        self,
        messages: Sequence[ScheduledMessage],
        max_attempts: int,
        *,
        connection: object = None,
    ) -> None:
        """See :meth:`ScheduleStore.insert_many`; ``connection`` as for :meth:`insert`
        (the batch is all or nothing inside the caller's transaction)."""
        check_max_attempts(max_attempts)
        messages = check_messages(messages)
        if not messages and connection is None:
            return
        rows = message_rows(messages, max_attempts, format_now(self._clock.now()))
        if connection is not None:
            self._writable("insert_many")
            from .transaction import insert_within

            insert_within(
                connection, self._path, self._sql, messages, rows, "insert_many", self._driver
            )
            return
        try:
            with self._write("insert_many") as cur:
                cur.executemany(self._sql.insert, rows)
        except _DuplicateKey as exc:
            raise self._first_duplicate(messages) from exc.__cause__
        self.changes.notify()

    def _first_duplicate(self, messages: Sequence[ScheduledMessage]) -> Exception:
        """After a rolled-back batch: the first id that repeats or already exists."""
        seen: set[uuid.UUID] = set()
        for m in messages:
            sid = m.schedule_id
            if sid in seen or self._read("insert_many", self._sql.exists, (sid.bytes,)):
                return DuplicateSchedule(sid)
            seen.add(sid)
        return StoreError(f"insert_many on {self._path}: a duplicate id vanished")

    # -- the worker's side ---------------------------------------------------------------------

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        now = check_claim(now, batch_size, lease)
        claim = self._claim_params(now, batch_size, lease)
        with self._write("claim_due", worker=True) as cur:
            rows = self._claim_rows(cur, claim[0])
        return self._claimed(rows, claim)

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        """See :meth:`ScheduleStore.settle_and_claim`: one ``BEGIN IMMEDIATE``
        transaction, the fenced ``UPDATE`` of each settlement then the claim; on a
        store error nothing of it is recorded."""
        now = check_claim(now, batch_size, lease)
        claim = self._claim_params(now, batch_size, lease)
        checked, plan = self._settle_plan(outcomes)
        results = [False] * len(checked)
        with self._write("settle_and_claim", worker=True) as cur:
            self._apply_settlements(cur, plan, results)
            rows = self._claim_rows(cur, claim[0])
        if any(ok and item.wakes for ok, item in zip(results, checked, strict=True)):
            self.changes.notify()
        return results, self._claimed(rows, claim)

    def _claim_params(
        self, now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[dict[str, Any], str, datetime]:
        """The claim's parameters, and the lease it hands out (text, instant)."""
        until = to_utc_ms(now + lease, "lease deadline")
        until_text = format_ts(until)
        return {"now": format_ts(now), "until": until_text, "n": batch_size}, until_text, until

    def _claim_rows(self, cur: apsw.Cursor, params: dict[str, Any]) -> list[Any]:
        """The claim's statements, inside the caller's write transaction."""
        if self._watch_pid != os.getpid():
            self._watch_commits(cur)
        cur.execute(self._sql.normalise)
        return claim_rows(cur, self._sql, params)

    def _claimed(
        self, rows: list[Any], claim: tuple[dict[str, Any], str, datetime]
    ) -> list[LeasedOccurrence]:
        """Claimed rows decoded after the commit (the write lock is held for SQL only);
        one that does not decode is dead-lettered, not returned."""
        _, until_text, until = claim
        claimed: list[LeasedOccurrence] = []
        bad: list[tuple[Sequence[Any], Exception]] = []
        for row in rows:
            try:
                claimed.append(leased_from_row(row, until_text, until))
            except Exception as exc:
                bad.append((row, exc))
        if bad:
            self._dead_letter_malformed(bad)
        claimed.sort(key=_claim_order)
        return claimed

    def _watch_commits(self, cur: apsw.Cursor) -> None:
        """Once per process, at the first claim (under the store's lock): signal
        :attr:`changes` whenever another connection commits, noticed as a write to the
        WAL file (:class:`~.notify.WalWatcher`), so an idle worker wakes at once
        for other processes' commits. Stores that only enqueue or read run no thread."""
        self._watch_pid = os.getpid()
        self._seen_version = cur.execute("PRAGMA data_version").fetchall()[0][0]
        self._watcher = WalWatcher.start(self._path, self._on_wal_write)
        if self._watcher is not None:
            self.changes.look = self._look_for_commits

    def _on_wal_write(self) -> None:
        """The WAL file was written: signal :attr:`changes` once another connection's
        commit shows (``data_version`` moved); this store's own commits signal already,
        and only when they may have made work claimable. A commit shows only after its
        writer's fsync, so the version is looked at again for a few milliseconds, each
        time only if a worker waits for work: a busy one (whose own commits wake this
        thread all the time) would otherwise share the store's lock with it for
        nothing; the next wait looks first instead (:meth:`ChangeSignal.mark_stale`)."""
        for pause in _WAL_RECHECK_S:
            if pause:
                time.sleep(pause)
            if not self.changes.waiting():
                self.changes.mark_stale()
                continue
            if self._look_for_commits():
                return

    def _look_for_commits(self) -> bool:
        """Notify :attr:`changes` if another connection committed since the last look;
        True when it did (or the look failed: the poll notices later)."""
        try:
            version = self.data_version()
        except StoreError:  # closed, or the lock stayed busy: the poll notices later
            return True
        if version == self._seen_version:
            return False
        self._seen_version = version
        self.changes.notify()
        return True

    def _dead_letter_malformed(self, bad: list[tuple[Sequence[Any], Exception]]) -> None:
        """A claimed row that cannot be decoded (written badly by another tool or by
        hand) is never dispatched: it is dead-lettered at once, its last_error naming
        the column, so the rows claimed with it go on and an operator can see it. If
        that write fails, the row keeps its lease and the next claim after it tries
        again; the healthy rows are returned either way."""
        now = format_ts(self._now())
        reasons = [(row, diagnose(row) or f"{type(exc).__name__}: {exc}") for row, exc in bad]
        try:
            with self._write("claim_due", worker=True) as cur:
                for row, why in reasons:
                    params = {
                        "id": row[_ID],
                        "lease": row[_LEASED_UNTIL],
                        "now": now,
                        "error": f"malformed row, dead-lettered without dispatch: {why}",
                    }
                    cur.execute(self._sql.mark_dead_lettered, params)
        except StoreError as exc:
            _log.error("could not dead-letter malformed rows in %s: %s", self._table, exc)
            return
        for row, why in reasons:
            _log.error(
                "schedule %s in %s is malformed and was dead-lettered: %s",
                row_label(row),
                self._table,
                why,
            )
            malformed_dead_lettered(row_label(row), why)

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        """See :meth:`ScheduleStore.settle`: one ``BEGIN IMMEDIATE`` transaction, one
        fenced ``UPDATE`` per item (prepared once, cached by the connection); an item
        whose lease no stored lease can equal is answered False without SQL."""
        checked, plan = self._settle_plan(outcomes)
        results = [False] * len(checked)
        if plan:
            with self._write("settle", worker=True) as cur:
                self._apply_settlements(cur, plan, results)
        if any(ok and item.wakes for ok, item in zip(results, checked, strict=True)):
            self.changes.notify()
        return results

    def _settle_plan(
        self, outcomes: Sequence[Settlement]
    ) -> tuple[list[Settlement], list[PlannedSettlement]]:
        """The checked items and the statements' plan (:func:`.settle_plan`)."""
        checked = check_settlements(outcomes)
        if not checked:
            return checked, []
        plan = settle_plan(
            checked,
            self._now(),
            encode_id=encode_id,
            encode_lease=encode_lease,
            encode_instant=encode_instant,
        )
        return checked, plan

    def _apply_settlements(
        self,
        cur: apsw.Cursor,
        plan: list[PlannedSettlement],
        results: list[bool],
    ) -> None:
        """The planned fenced statements, inside the caller's write transaction."""
        statements = self._settle_sql
        changes = cur.connection.changes
        for index, kind, params in plan:
            cur.execute(statements[kind], params)
            if changes():
                results[index] = True

    def dead_letter_exhausted(self) -> int:
        self._writable("dead_letter_exhausted")
        params = {"now": format_ts(self._now()), "error": SWEEP_ERROR}
        # Every poll cycle runs this; almost always there is nothing to do, and a read
        # says so without taking the write lock (other processes' claims go on).
        [(work,)] = self._read("dead_letter_exhausted", self._sql.sweep_probe, params)
        if not work:
            return 0
        with self._write("dead_letter_exhausted", worker=True) as cur:
            cur.execute(self._sql.normalise)
            cur.execute(self._sql.sweep, params)
            return cur.connection.changes()

    def _normalise_if_needed(self) -> bool:
        """Rewrite live rows' instants that another tool wrote in another layout (a
        read when there are none, which is the normal case). A read-only store cannot:
        it says whether there are any (True: its reads must not trust text order)."""
        if self._readonly and not self._current:
            return True  # an older table: our index to ask may not exist
        if not self._read("normalise", self._sql.any_noncanonical, ()):
            return False
        if self._readonly:
            return True
        with self._write("normalise", worker=True) as cur:
            cur.execute(self._sql.normalise)
        return False

    def transaction_runner(
        self,
        handler: Callable[[ScheduledMessage, Any], object],
        clock: Clock,
        policy: Any,
        timeout: float,
    ) -> Any:
        from .transaction import SqliteTransactionRunner

        return SqliteTransactionRunner(self, handler, clock, policy, timeout)

    def next_wakeup(self) -> datetime | None:
        sql = self._sql.next_wakeup
        if self._normalise_if_needed():
            assert self._portable is not None
            sql = self._portable.next_wakeup
        [(fresh, leased)] = self._read("next_wakeup", sql, ())
        candidates = [parse_ts(text) for text in (fresh, leased) if text is not None]
        return min(candidates, default=None)

    # -- upkeep (issue 15) ---------------------------------------------------------------

    def list_schedules(
        self,
        *,
        status: ScheduleStatus | str | None = None,
        event_type: str | None = None,
        after: uuid.UUID | None = None,
        limit: int = 50,
        name: str | None = None,
    ) -> list[ScheduleSnapshot | MalformedSchedule]:
        """See :meth:`ScheduleStore.list_schedules`: one read of the primary key from
        ``after`` on."""
        wanted, glob, named, after, limit = check_listing(status, event_type, name, after, limit)
        sql = list_sql(
            self._table,
            wanted,
            glob is not None,
            after is not None,
            named is not None,
            self._sql.select_list,
        )
        params: dict[str, Any] = {"n": limit}
        if named is not None:
            params["name"] = sqlite_glob(named)
        if glob is not None:
            params["glob"] = sqlite_glob(glob)
        if after is not None:
            params["after"] = after.bytes
        return self._listing(self._read("list_schedules", sql, params))

    def prune(
        self,
        older_than: timedelta,
        *,
        statuses: Iterable[ScheduleStatus | str] = ("delivered", "cancelled"),
        batch_size: int = 500,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """See :meth:`ScheduleStore.prune`: one ``BEGIN IMMEDIATE`` per batch; then the
        free pages go back to the file system (``PRAGMA incremental_vacuum``, with
        incremental auto-vacuum: every file this version creates; older files need
        :meth:`vacuum` once) and the WAL is checkpointed and truncated."""
        older_than, wanted = check_prune(older_than, statuses)
        size = check_batch_size(batch_size)
        if not dry_run:
            self._writable("prune")
        cut = format_ts(prune_cut(self._now(), older_than))
        total = 0
        for status in wanted:
            count_sql, delete_sql = prune_sql(self._table, PRUNE_COLUMN[status])
            if dry_run:
                [(n,)] = self._read("prune", count_sql, {"cut": cut})
                total += n
                continue
            while True:
                with self._write("prune") as cur:
                    cur.execute(delete_sql, {"cut": cut, "n": size})
                    deleted = cur.connection.changes()
                total += deleted
                if progress is not None and deleted:
                    progress(total)
                if deleted < size:
                    break
        if total and not dry_run:
            self._release_space()
        return total

    def _release_space(self) -> None:
        """Free pages back to the file system, and the WAL checkpointed and truncated."""
        with self._lock:
            cur = self._live_cursor()
            try:
                cur.execute("PRAGMA incremental_vacuum").fetchall()
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.Error as exc:
                raise self._error("prune", exc) from exc

    def checkpoint(self) -> bool:
        """Fold the WAL into the file and truncate it (``PRAGMA wal_checkpoint(TRUNCATE)``)
        without waiting: when another connection reads or writes at that moment it gives
        up at once and returns False (the next burst's end tries again). The worker calls
        it when a burst of work ends. A read-only store does nothing (False)."""
        if self._readonly:
            return False
        with self._lock:
            cur = self._live_cursor()
            conn = cur.connection
            conn.set_busy_timeout(0)
            try:
                [(busy, _, _)] = cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.BusyError:
                return False
            except apsw.Error as exc:
                raise self._error("checkpoint", exc) from exc
            finally:
                set_busy_wait(conn, int(self._busy_timeout.total_seconds() * 1000))
            return not busy

    def vacuum(self) -> None:
        """Rebuild the file with incremental auto-vacuum (what older files lack, so that
        :meth:`prune` can give space back), returning every free page; then checkpoint
        and truncate the WAL. Takes the write lock for as long as the copy takes."""
        self._writable("vacuum")
        with self._lock:
            cur = self._live_cursor()
            try:
                cur.execute("PRAGMA auto_vacuum = INCREMENTAL")
                cur.execute("VACUUM")
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except apsw.Error as exc:
                raise self._error("vacuum", exc) from exc

    def replay_dead_letters(self, ids: Sequence[uuid.UUID]) -> int:
        """See :meth:`ScheduleStore.replay_dead_letters`: one ``BEGIN IMMEDIATE``."""
        checked = [check_schedule_id(sid) for sid in ids]
        if not checked:
            return 0
        now = format_ts(self._now())
        sql = replay_sql(self._table)
        count = 0
        with self._write("replay") as cur:
            for sid in checked:
                cur.execute(sql, {"id": sid.bytes, "now": now})
                count += cur.connection.changes()
        if count:
            self.changes.notify()
        return count

    def stats(self) -> StoreStats:
        """See :meth:`ScheduleStore.stats`: partial-index counts, plus the sizes of the
        file and its WAL."""
        now = self._now()
        params = {"now": format_ts(now)}
        try:
            [row] = self._read("stats", stats_sql(self._table), params)
        except StoreError as exc:
            if "no such index" not in str(exc):
                raise
            [row] = self._read("stats", stats_sql(self._table, indexed=False), params)
        (fresh, leased, paused, delivered, cancelled, dead, due_fresh, oldest_fresh) = row[:8]
        (due_leased, oldest_leased, backoff, in_flight) = row[8:]
        oldest = min((parse_ts(t) for t in (oldest_fresh, oldest_leased) if t), default=None)
        file_bytes, wal_bytes = file_sizes(self._path)
        return StoreStats(
            at=now,
            pending=fresh + leased,
            paused=paused,
            delivered=delivered,
            cancelled=cancelled,
            dead_lettered=dead,
            due=due_fresh + due_leased,
            in_flight=in_flight,
            in_backoff=backoff,
            oldest_due_lag=None if oldest is None else now - oldest,
            next_wakeup=self.next_wakeup(),
            file_bytes=file_bytes,
            wal_bytes=wal_bytes,
        )

    # -- control -------------------------------------------------------------------------

    def _require(self, cur: apsw.Cursor, sid: uuid.UUID) -> None:
        """Inside a write: raise ScheduleNotFound unless the row exists."""
        if not cur.execute(self._sql.exists, (sid.bytes,)).fetchall():
            raise ScheduleNotFound(sid)

    def cancel(self, schedule_id: uuid.UUID) -> bool:
        sid = check_schedule_id(schedule_id)
        params = {"id": sid.bytes, "now": format_ts(self._now())}
        with self._write("cancel") as cur:
            cur.execute(self._sql.cancel, params)
            if cur.connection.changes():
                return True
            self._require(cur, sid)
            return False

    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        sid = check_schedule_id(schedule_id)
        params = {"id": sid.bytes, "paused": 1 if paused else 0}
        with self._write("set_paused") as cur:
            cur.execute(self._sql.set_paused, params)
            changed = cur.connection.changes() > 0
            if not changed:
                self._require(cur, sid)
        if changed:
            self.changes.notify()
        return changed

    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        if next is not None:
            next = to_utc_ms(next, "next", InvalidArgument)
        sid = check_schedule_id(schedule_id)
        now = self._now()
        with self._write("resume") as cur:
            rows = cur.execute(self._sql.select_one, (sid.bytes,)).fetchall()
            if not rows:
                raise ScheduleNotFound(sid)
            [record] = self._records(rows)
            resumes, next = record.resume_plan(next, now)
            if not resumes:
                return False
            if next is not None:
                # a live lease stays, as stored: the dispatch in flight may still ack
                live = record.live_lease(now) is not None
                params = {
                    "id": sid.bytes,
                    "next": format_ts(next),
                    "lease": rows[0][_LEASED_UNTIL] if live else None,
                }
                cur.execute(self._sql.resume_realign, params)
            else:
                cur.execute(self._sql.resume_flag, {"id": sid.bytes})
        self.changes.notify()
        return True

    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        sid = check_schedule_id(schedule_id)
        rows = self._read("inspect", self._sql.select_one, (sid.bytes,))
        if not rows:
            return None
        try:
            return record_from_row(rows[0]).snapshot()
        except Exception as exc:
            raise self._malformed(rows[0], exc) from exc

    # -- admin -----------------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """See :meth:`ScheduleStore.list_pending`. A row that cannot be decoded is a
        :class:`MalformedSchedule` in its place (naming the column)."""
        check_limit(limit)
        sql = self._sql.list_pending
        if self._normalise_if_needed():
            assert self._portable is not None
            sql = self._portable.list_pending
        return self._listing(self._read("list_pending", sql, {"n": limit}))

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        """See :meth:`ScheduleStore.list_dead_letter`. A row that cannot be decoded is
        a :class:`MalformedSchedule` in its place (naming the column)."""
        check_limit(limit)
        sql = self._sql.list_dead_letter
        if self._portable is not None and not self._current:
            sql = self._portable.list_dead_letter
        return self._listing(self._read("list_dead_letter", sql, {"n": limit}))

    def replay(self, schedule_id: uuid.UUID) -> None:
        sid = check_schedule_id(schedule_id)
        params = {"id": sid.bytes, "now": format_ts(self._now())}
        with self._write("replay") as cur:
            rows = cur.execute(self._sql.select_one, (sid.bytes,)).fetchall()
            if not rows:
                raise ScheduleNotFound(sid)
            status = self._records(rows)[0].status()
            if status is not ScheduleStatus.DEAD_LETTERED:
                raise NotReplayable(sid, status)
            cur.execute(self._sql.replay, params)
        self.changes.notify()

    def modify_record(self, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """See :meth:`ScheduleStore.modify_record`: read, plan and write back in one
        ``BEGIN IMMEDIATE`` transaction."""
        sid = check_schedule_id(schedule_id)
        with self._write("modify") as cur:
            rows = cur.execute(self._sql.select_one, (sid.bytes,)).fetchall()
            if not rows:
                raise ScheduleNotFound(sid)
            [record] = self._records(rows)
            answer, new = plan(record.copy(), self._now())
            if new is not None:
                values = row_from_record(new)
                cur.execute(self._sql.write_row, (*values[1:], values[0]))
        if new is not None:
            self.changes.notify()
        return answer

    def modify_within(self, connection: object, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """See :meth:`ScheduleStore.modify_within`: through the caller's ``connection``
        as for :meth:`insert` (:func:`~hexeract_lite.store.sqlite.transaction.modify_within`)."""
        sid = check_schedule_id(schedule_id)
        self._writable("modify")
        now = self._now()
        from .transaction import modify_within

        return modify_within(connection, self._path, self._sql, sid, plan, now, self._driver)

    def list_named(self, prefix: str) -> list[ScheduleSnapshot]:
        """See :meth:`ScheduleStore.list_named`; a row that cannot be decoded raises
        :class:`StoreError` naming it."""
        if not isinstance(prefix, str):
            raise InvalidArgument(f"prefix must be a str, got {prefix!r:.100}")
        params = {"prefix": prefix, "length": len(prefix)}
        rows = self._read("list_named", self._sql.list_named, params)
        return [record.snapshot() for record in self._records(rows)]

    # -- copying rows between stores (hexeract scheduler migrate) ---------------------

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """See :meth:`ScheduleStore.export_records`: one read of the primary key.

        A row that cannot be read as a record (a schedule id that is not 16 bytes, a
        timestamp that is not one) raises :class:`StoreError` naming it and the column:
        a copy never silently leaves a row behind."""
        after = check_export(after, limit)
        if after is None:
            rows = self._read("export_records", self._sql.export_first, {"n": limit})
        else:
            params = {"after": after.bytes, "n": limit}
            rows = self._read("export_records", self._sql.export_after, params)
        records = []
        for row in rows:
            try:
                records.append(record_from_row(row))
            except Exception as exc:
                why = diagnose(row) or f"{type(exc).__name__}: {exc}"
                raise StoreError(
                    f"cannot export the row with schedule_id {row_label(row)} of {self._table}"
                    f" in {self._path}: {why}"
                ) from exc
        return records

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """See :meth:`ScheduleStore.import_records`: the rows whose id is absent are
        inserted as given (every column, instants as the reference's text), in one
        ``BEGIN IMMEDIATE`` transaction."""
        rows = [row_from_record(record) for record in check_records(records)]
        if not rows:
            return 0
        with self._write("import_records") as cur:
            conn = cur.connection
            before = conn.total_changes()
            cur.executemany(self._sql.import_row, rows)
            inserted = conn.total_changes() - before
        if inserted:
            self.changes.notify()
        return inserted
