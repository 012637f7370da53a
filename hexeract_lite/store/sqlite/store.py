"""SqliteScheduleStore: the store contract on one SQLite file, shared with hexeract."""

from __future__ import annotations

import os
import pathlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Self, TypeVar

import apsw

from ..._time import format_now, format_ts, parse_ts, to_utc_ms
from ...clock import SYSTEM_CLOCK, Clock
from ...errors import StoreError
from ...message import ScheduledMessage, place_first, validate_message
from ...runlog import this_worker
from ...snapshot import LeasedOccurrence, ScheduleStatus
from ..base import SWEEP_ERROR, SWEEP_KEPT
from ..changes import Plan
from ..checks import (
    check_max_attempts,
    check_messages,
    check_records,
    check_schedule_id,
    duplicate,
)
from ..columns import COLUMN_NAMES
from ..fork import AT_FORK_HOOKS, PidCheckingLock, hold, start_afresh_after_fork
from ..record import ScheduleRecord
from ..schema import DEFAULT_TABLE, validate_sqlite_table_name
from ..sql.store import SqlScheduleStore
from . import codec
from .codec import (
    SELECT_LIST,
    leased_from_row,
    message_rows,
    row_from_record,
    row_label,
)
from .connections import Connections, DuplicateKey, is_duplicate
from .driver import check_open
from .notify import CommitWatch
from .plain import present_columns
from .runs import RUNS_VERSION, encode_ms, run_statements, sweep_runs
from .schema import SCHEMA_VERSION, default_database_path, open_database
from .session import SqliteSession
from .statements import (
    FEW_ROWS,
    SqliteStatements,
    claim_rows,
    file_sizes,
)

__all__ = ["SqliteScheduleStore", "default_database_path"]


_T = TypeVar("_T")


def _instant_or_none(text: object) -> datetime | None:
    """A stored instant; None for NULL and for text that is not one (a malformed row)."""
    try:
        return None if text is None else parse_ts(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


class SqliteScheduleStore(SqlScheduleStore):
    """The store contract on one SQLite file (apsw, WAL), shared with hexeract.

    Build it with :meth:`open`. Thread-safe; any number of stores, in threads or
    processes, may claim from one file, and a live lease is never handed out twice.

    Durability: ``"full"`` (the default) fsyncs every commit; ``"relaxed"`` fsyncs the
    application's writes but not the worker's (a power cut may redeliver, never lose an
    insert or control change); ``"normal"`` fsyncs nothing. Every mode survives an
    application crash and none corrupts the file.

    After ``fork()`` the child opens its own connection on its first call; a store
    cannot be pickled. SQLite errors raise :class:`~hexeract_lite.errors.StoreError`
    naming the file; the failed operation applied nothing.

    .. versionadded:: 0.1.0
    """

    _sql: SqliteStatements

    def __init__(self, db: Connections, table: str, clock: Clock, version: int) -> None:
        """Use :meth:`open`."""
        super().__init__()
        self._db = db
        self._path = path = db.path
        self._table = table
        self._clock = clock
        self._readonly = readonly = db.readonly
        if not AT_FORK_HOOKS:  # pragma: no cover - no os.register_at_fork: check the pid
            db.lock = PidCheckingLock(db.forget)
        connection = db.conn
        assert connection is not None
        # read-only on an older table: NULL for the columns it lacks
        select_list = present_columns(connection, table) if readonly else SELECT_LIST
        self._current = current = version == SCHEMA_VERSION  # always, once writable
        self._sql = SqliteStatements(table, select_list, indexed=current)
        if version >= RUNS_VERSION:
            self._run_sql = run_statements(table, version)
            self._sweep_runs = sweep_runs(table, self._sql.sweepable)
        self._codec = codec
        self._place = f"the table {table} of {path}"
        # started by the first claim in each process
        self._watch: CommitWatch | None = None
        self._watch_pid = 0
        if AT_FORK_HOOKS:
            start_afresh_after_fork(self)

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

        - ``path``: the database file; None means :func:`default_database_path`. A new
          file is created owner-only (0600) in an existing folder.
        - ``table``: ``^[a-zA-Z_][a-zA-Z0-9_]*$``, at most 63 bytes, not an SQLite keyword.
        - ``busy_timeout``: how long an operation waits for another connection's write
          lock before it fails with :class:`StoreError`.
        - ``create``: when False, a missing file or table raises :class:`StoreError`.
        - ``vfs``: the name of a registered SQLite VFS (``apsw.VFS``).
        - ``readonly``: the file is never written and no ``-wal``/``-shm`` file is left
          behind; only the reading methods work, the others raise :class:`StoreError`.
        - ``driver``: ``"apsw"`` or ``"sqlite3"`` (for an app whose own connections,
          passed as ``connection=``, are ``sqlite3.Connection`` s); one library per
          file per process.

        A table the Rust reference created is adopted and an older version upgraded, in
        one transaction; a newer version or a table that is not a scheduler table is
        refused before anything changes.
        """
        table = validate_sqlite_table_name(table)
        driver = check_open(durability, busy_timeout, clock, driver, vfs, create, readonly)
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
        connections = Connections(
            connection,
            path=db,
            durability=durability,
            busy_timeout=busy_timeout,
            vfs=vfs,
            readonly=readonly,
            driver=driver,
            hold=hold,
        )
        return cls(connections, table, clock, version)

    @property
    def path(self) -> pathlib.Path:
        """The database file (absolute)."""
        return self._path

    @property
    def durability(self) -> str:
        """``"full"``, ``"relaxed"`` or ``"normal"``, as opened (see the class docstring)."""
        return self._db.durability

    @property
    def busy_timeout(self) -> timedelta:
        """How long a write waits for another connection's write lock, as opened."""
        return self._db.busy_timeout

    @property
    def vfs(self) -> str | None:
        """The SQLite VFS the file was opened with (None: the default one)."""
        return self._db.vfs

    @property
    def driver(self) -> str:
        """``"apsw"`` or ``"sqlite3"``: the SQLite library of the store's connections."""
        return self._db.driver

    @property
    def readonly(self) -> bool:
        """True when opened with ``readonly=True``: the store never writes."""
        return self._readonly

    def close(self) -> None:
        """Close the connection; later calls raise :class:`StoreError`. Idempotent."""
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()
        self._db.close()

    def __repr__(self) -> str:
        return f"SqliteScheduleStore({str(self._path)!r}, table={self._table!r})"

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self!r} cannot be pickled (to a spawned process or a process pool): open"
            " the store in each process with SqliteScheduleStore.open(path)"
        )

    @property
    def writers_take_turns(self) -> bool:
        """True: every writer of the file waits for SQLite's one write lock."""
        return True

    def data_version(self) -> int:
        """``PRAGMA data_version``: changes when another connection commits to the file."""
        [(value,)] = self._db.run("data_version", "PRAGMA data_version")
        assert isinstance(value, int)
        return value

    def _before_fork(self) -> bool:
        assert isinstance(self._lock, type(threading.Lock()))
        return hold(self._lock, self._db.busy_timeout.total_seconds() + 10)

    def _after_fork_in_parent(self) -> None:
        assert isinstance(self._lock, type(threading.Lock()))
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        self._db.lock = threading.Lock()
        self._db.forget()

    @property
    def _lock(self) -> threading.Lock | PidCheckingLock:
        return self._db.lock

    @property
    def _conn(self) -> apsw.Connection | None:
        return self._db.conn

    def _writable(self, what: str) -> None:
        self._db.writable(what)

    @contextmanager
    def _write(
        self, what: str, *, worker: bool = False, atomic: bool = True
    ) -> Iterator[SqliteSession]:
        with self._db.transaction(what, worker) as tx:
            yield tx
        if tx.woken:
            self.changes.notify()

    def _read(self, what: str, sql: str, params: Any) -> list[Any]:
        return self._db.read(what, sql, params)

    def _row_params(self, record: ScheduleRecord) -> dict[str, Any]:
        return dict(zip(COLUMN_NAMES, row_from_record(record), strict=True))

    def _export_error(self, row: Sequence[Any], exc: BaseException) -> StoreError:
        return StoreError(
            f"cannot export the row with schedule_id {row_label(row)} of {self._table}"
            f" in {self._path}: {codec.why(row, exc)}"
        )

    def insert(
        self, message: ScheduledMessage, max_attempts: int, *, connection: object = None
    ) -> None:
        """``connection``: an ``apsw.Connection`` or ``sqlite3.Connection`` on this file
        with a transaction open, which the row is written in."""
        check_max_attempts(max_attempts)
        now = self._clock.now()
        message = place_first(validate_message(message), now)
        self._writable("insert")
        row = message_rows((message,), max_attempts, format_now(now))[0]
        if connection is not None:
            from .transaction import insert_within

            insert_within(self, connection, [message], [row], "insert")
            return
        self._db.outside_sink("insert")
        with self._lock:  # autocommit: the INSERT is its own write transaction
            cur = self._db.live_cursor()
            try:
                cur.execute(self._sql.insert, row)
            except BaseException as exc:
                self._db.rollback()
                if is_duplicate(exc):
                    raise duplicate(message) from exc
                if isinstance(exc, apsw.Error):
                    raise self._db.error("insert", exc) from exc
                raise
        self.changes.notify()

    def insert_many(
        self,
        messages: Sequence[ScheduledMessage],
        max_attempts: int,
        *,
        connection: object = None,
    ) -> None:
        """``connection`` as for :meth:`insert` (all or nothing in its transaction)."""
        check_max_attempts(max_attempts)
        now = self._clock.now()
        messages = check_messages(messages, now)
        if not messages and connection is None:
            return
        rows = message_rows(messages, max_attempts, format_now(now))
        if connection is not None:
            self._writable("insert_many")
            from .transaction import insert_within

            insert_within(self, connection, messages, rows, "insert_many")
            return
        try:
            with self._write("insert_many") as tx:
                tx.cur.executemany(self._sql.insert, rows)
        except DuplicateKey as exc:
            raise self._first_duplicate(
                messages, "insert_many", "a duplicate id vanished", where=str(self._path)
            ) from exc.__cause__
        self.changes.notify()

    def _claim_params(
        self, now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[dict[str, Any], str, datetime]:
        until = to_utc_ms(now + lease, "lease deadline")
        until_text = format_ts(until)
        return {"now": format_ts(now), "until": until_text, "n": batch_size}, until_text, until

    def _claim_rows(self, tx: Any, claim: tuple[dict[str, Any], str, datetime]) -> list[Any]:
        cur = tx.cur
        if self._watch_pid != os.getpid():  # once per process, at the first claim
            self._watch_pid = os.getpid()
            version = cur.execute("PRAGMA data_version").fetchall()[0][0]
            self._watch = CommitWatch.start(self._path, self.changes, self.data_version, version)
        cur.execute(self._sql.normalise)
        return claim_rows(cur, self._sql, claim[0])

    def _leased(
        self, row: Sequence[Any], claim: tuple[dict[str, Any], str, datetime]
    ) -> LeasedOccurrence:
        return leased_from_row(row, claim[1], claim[2])

    def dead_letter_exhausted(self) -> int:
        self._writable("dead_letter_exhausted")
        now = self._now()
        params = {"now": format_ts(now), "error": SWEEP_ERROR, "kept": SWEEP_KEPT}
        # a read first: usually there is nothing to do, and no write lock is taken
        [(work,)] = self._read("dead_letter_exhausted", self._sql.sweep_probe, params)
        if not work:
            return 0
        with self._write("dead_letter_exhausted", worker=True) as tx:
            tx.execute(self._sql.normalise)
            if self._run_sql is not None:  # the runs first, while the rows are sweepable
                host, pid = this_worker()
                figures = {"now_ms": encode_ms(now), "host": host, "pid": pid}
                tx.execute(self._sweep_runs, {**params, **figures})
            return tx.execute(self._sql.sweep, params)

    def _insert_runs(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        assert self._run_sql is not None
        tx.cur.executemany(self._run_sql.insert, rows)

    def _normalise_if_needed(self) -> bool:
        """Rewrite live rows' off-layout instants; True: read-only, text order untrusted."""
        if self._readonly and not self._current:
            return True  # an older table may lack the index to ask
        if not self._read("normalise", self._sql.any_noncanonical, ()):
            return False
        if self._readonly:
            return True
        with self._write("normalise", worker=True) as tx:
            tx.execute(self._sql.normalise)
        return False

    def _list_pending_statement(self) -> Any:
        return self._sql.portable_pending if self._normalise_if_needed() else self._sql.list_pending

    def _list_query(
        self,
        status: ScheduleStatus | None,
        glob: str | None,
        name: str | None,
        after: uuid.UUID | None,
        limit: int,
    ) -> tuple[str, dict[str, Any]]:
        # a status few rows have is read from its partial index (which an older table,
        # read-only, may lack)
        few = False
        if status is not None and name is None and self._current:
            [(count,)] = self._read("list_schedules", self._sql.status_count(status), {})
            few = count < FEW_ROWS
        return self._sql.list_query(status, glob, name, after, limit, few)

    def _prune_statements(self, column: str) -> tuple[Any, Any]:
        return self._sql.prune(column)

    def _after_prune(self) -> None:
        self._db.run("prune", "PRAGMA incremental_vacuum", "PRAGMA wal_checkpoint(TRUNCATE)")

    def _replay_statements(
        self, ids: list[uuid.UUID], now: datetime
    ) -> list[tuple[str, dict[str, Any]]]:
        sql, at = self._sql.replay_many, format_ts(now)
        return [(sql, {"id": sid.bytes, "now": at}) for sid in ids]

    def _stats_row(self) -> tuple[datetime, Sequence[Any]]:
        now = self._now()
        params = {"now": format_ts(now)}
        # an older table (read-only: not upgraded) may lack the indexes the counts name
        [row] = self._read("stats", self._sql.stats, params)
        row = list(row)
        for index in (7, 9):  # the oldest due instants
            row[index] = None if row[index] is None else parse_ts(row[index])
        return now, row

    def _stats_extra(self) -> dict[str, Any]:
        file_bytes, wal_bytes = file_sizes(self._path)
        return {"file_bytes": file_bytes, "wal_bytes": wal_bytes}

    def _runner_type(self) -> Callable[..., Any]:
        from .transaction import SqliteTransactionRunner

        return SqliteTransactionRunner

    def next_wakeup(self) -> datetime | None:
        portable = self._normalise_if_needed()
        sql = self._sql.portable_next_wakeup if portable else self._sql.next_wakeup
        [(fresh, leased)] = self._read("next_wakeup", sql, ())
        return min(filter(None, map(_instant_or_none, (fresh, leased))), default=None)

    def checkpoint(self) -> bool:
        """Fold the WAL into the file and truncate it, without waiting: False when another
        connection is busy or the store is read-only."""
        return not self._readonly and self._db.checkpoint()

    def vacuum(self) -> None:
        """Rebuild the file with incremental auto-vacuum (so :meth:`prune` gives space
        back) and truncate the WAL, holding the write lock meanwhile."""
        self._writable("vacuum")
        incremental = "PRAGMA auto_vacuum = INCREMENTAL"
        self._db.run("vacuum", incremental, "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)")

    def modify_within(self, connection: object, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        """``connection`` as for :meth:`insert`."""
        sid = check_schedule_id(schedule_id)
        self._writable("modify")
        now = self._now()
        from .transaction import modify_within

        return modify_within(self, connection, sid, plan, now)

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        rows = [row_from_record(record) for record in check_records(records)]
        if not rows:
            return 0
        with self._write("import_records") as tx:
            cur = tx.cur
            conn = cur.connection
            before = conn.total_changes()
            cur.executemany(self._sql.import_row, rows)
            inserted = conn.total_changes() - before
        if inserted:
            self.changes.notify()
        return inserted
