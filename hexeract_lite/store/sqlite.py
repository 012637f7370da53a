"""SqliteScheduleStore: the store contract on one SQLite file, shared with hexeract.

The table is the reference's (hexeract-scheduler-sql) column for column, so a database
written by the Rust framework opens here and the rows written here are rows it reads.
On top of the reference's two indexes the store adds four partial indexes of its own
(see :func:`~hexeract_lite.store.schema.sqlite_extra_index_ddl`) so that a claim, the
sweep and the wake-up hint stay O(log n) however many rows wait or back off.

Concurrency: one apsw connection per store, used under a lock, so one store object is
safe from many threads; several processes share the file through WAL and
``BEGIN IMMEDIATE`` write transactions, and a claim selects and leases its rows in one
such transaction, so a live lease is never handed out twice.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import secrets
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self

import apsw
import apsw.bestpractice
import platformdirs

from .._time import format_ts, parse_ts, to_utc_ms
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (
    DuplicateSchedule,
    InvalidArgument,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTrigger,
    NotReplayable,
    ScheduleNotFound,
    StoreError,
)
from ..message import ScheduledMessage, Target, validate_message
from ..snapshot import LeasedOccurrence, ScheduleSnapshot, ScheduleStatus
from ..trigger import CronExpression, Trigger
from .base import (
    SWEEP_ERROR,
    Settlement,
    SettlementKind,
    SettlingStore,
    check_claim,
    check_limit,
    check_max_attempts,
    check_messages,
    check_schedule_id,
    check_settlements,
)
from .record import ScheduleRecord, cached_cron_trigger, cached_target
from .schema import (
    CANONICAL_TS,
    DEFAULT_TABLE,
    LIVE,
    NONCANONICAL,
    REFERENCE_COLUMNS,
    sqlite_extra_index_ddl,
    sqlite_noncanonical,
    sqlite_reference_index_ddl,
    sqlite_table_ddl,
    validate_table_name,
)

__all__ = [
    "APP_NAME",
    "DATABASE_FILE_NAME",
    "META_TABLE",
    "SCHEMA_VERSION",
    "SqliteScheduleStore",
    "default_database_path",
]

APP_NAME = "hexeract_lite"
"""The platformdirs application name of the default database's folder."""
DATABASE_FILE_NAME = "scheduler.db"
"""The file name of the default database."""
SCHEMA_VERSION = 1
"""The schema version this code writes and understands.

Version 0 is the reference's layout as hexeract creates it (no version recorded);
version 1 adds hexeract_lite's indexes and normalises timestamp text.
"""
META_TABLE = "hexeract_lite_schema"
"""One row per scheduler table in the file: ``(table_name, version)``.

A table of its own rather than ``PRAGMA user_version``, because several scheduler
tables (``--table``) may share one file and each has its own version.
"""

_DURABILITY = {"full": "FULL", "relaxed": "FULL", "normal": "NORMAL"}
"""``durability`` -> the connection's ``PRAGMA synchronous`` (``"relaxed"`` switches to
``NORMAL`` around the worker's own transactions only: see the class docstring)."""
_BEGIN = "BEGIN IMMEDIATE"
_BEGIN_UNSYNCED = "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE"
_RESYNC = "PRAGMA synchronous=FULL"
_log = logging.getLogger(__name__)
_COLUMNS = ", ".join(name for name, _, _ in REFERENCE_COLUMNS)
_TIMESTAMP_COLUMNS = (
    "scheduled_for",
    "leased_until",
    "created_at",
    "delivered_at",
    "cancelled_at",
    "dead_lettered_at",
)


def default_database_path() -> pathlib.Path:
    """``<user data dir>/hexeract_lite/scheduler.db`` (platformdirs), e.g.
    ``~/.local/share/hexeract_lite/scheduler.db`` on Linux."""
    return pathlib.Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / DATABASE_FILE_NAME


def _ts(text: str | None) -> datetime | None:
    return None if text is None else parse_ts(text)


def _record(row: Sequence[Any]) -> ScheduleRecord:
    """A row of ``SELECT <every reference column>`` as a record."""
    return ScheduleRecord(
        schedule_id=uuid.UUID(bytes=bytes(row[0])),
        event_type=row[1],
        payload=row[2],
        trigger_kind=row[3],
        cron_expr=row[4],
        scheduled_for=parse_ts(row[5]),
        target_kind=row[6],
        target_routing_key=row[7],
        attempts=row[8],
        max_attempts=row[9],
        leased_until=_ts(row[10]),
        paused=bool(row[11]),
        last_error=row[12],
        created_at=parse_ts(row[13]),
        delivered_at=_ts(row[14]),
        cancelled_at=_ts(row[15]),
        dead_lettered_at=_ts(row[16]),
    )


def _leased(row: Sequence[Any], until_text: str, until: datetime) -> LeasedOccurrence:
    """A row the claim just returned as the occurrence to dispatch: what
    ``_record(row).leased()`` builds, without the record in between. Shared Target and
    cron Trigger values, the lease parsed once per claim (``until`` is its text)."""
    scheduled_for = parse_ts(row[5])
    parse_ts(row[13])  # created_at: a row that cannot be read whole is malformed
    leased_until = until if row[10] == until_text else parse_ts(row[10])
    if row[3] == "cron":
        trigger = cached_cron_trigger(row[4] or "")
    else:
        trigger = Trigger("delay", at=scheduled_for)
    payload = row[2]
    message = ScheduledMessage(
        schedule_id=uuid.UUID(bytes=bytes(row[0])),
        event_type=row[1],
        payload=json.loads(payload),
        payload_json=payload,
        target=cached_target(row[6], row[7]),
        trigger=trigger,
        scheduled_for=scheduled_for,
    )
    return LeasedOccurrence(
        message=message, attempts=row[8], max_attempts=row[9], leased_until=leased_until
    )


def _claim_order(occurrence: LeasedOccurrence) -> tuple[datetime, bytes]:
    message = occurrence.message
    return (message.scheduled_for, message.schedule_id.bytes)


def _lease_text(lease: object) -> str | None:
    """The stored text of a lease token, or None when no stored lease can equal it."""
    if not isinstance(lease, datetime) or lease.tzinfo is None or lease.utcoffset() is None:
        return None
    utc = lease.astimezone(UTC)
    if utc.microsecond % 1000:
        return None  # stored leases have millisecond precision: this one matches none
    return format_ts(utc)


def _is_duplicate(exc: BaseException) -> bool:
    """A primary-key violation: the schedule id exists already."""
    return isinstance(exc, apsw.ConstraintError) and (
        getattr(exc, "extendedresult", None) == apsw.SQLITE_CONSTRAINT_PRIMARYKEY
    )


_TIMESTAMP_INDEX = {
    name: index
    for index, (name, _, _) in enumerate(REFERENCE_COLUMNS)
    if name in _TIMESTAMP_COLUMNS
}
_REQUIRED_TIMESTAMPS = {"scheduled_for", "created_at"}


def _diagnose(row: Sequence[Any]) -> str:
    """Which column makes a row undecodable, and why ('' when none is found)."""
    sid = row[0]
    if not isinstance(sid, bytes) or len(sid) != 16:
        return f"schedule_id is not 16 bytes: {sid!r:.60}"
    for name, index in _TIMESTAMP_INDEX.items():
        value = row[index]
        if value is None:
            if name in _REQUIRED_TIMESTAMPS:
                return f"{name} is NULL"
            continue
        try:
            parse_ts(str(value))
        except ValueError:
            return f"{name} is not a timestamp: {value!r:.60}"
    try:
        json.loads(row[2])
    except (TypeError, ValueError) as exc:
        return f"payload is not JSON: {exc}"
    if row[3] not in ("delay", "cron"):
        return f"trigger_kind must be 'delay' or 'cron', got {row[3]!r:.60}"
    if row[3] == "cron":
        try:
            CronExpression.parse(row[4] or "")
        except InvalidTrigger as exc:
            return f"cron_expr: {exc}"
    if row[6] not in ("mediator", "outbox", "bus"):
        return f"target_kind must be 'mediator', 'outbox' or 'bus', got {row[6]!r:.60}"
    try:
        Target(row[6], row[7])
    except (InvalidMessage, TypeError) as exc:
        return f"target_routing_key: {exc}"
    for index, name in ((8, "attempts"), (9, "max_attempts"), (11, "paused")):
        if not isinstance(row[index], int):
            return f"{name} is not an integer: {row[index]!r:.60}"
    return ""


def _row_label(row: Sequence[Any]) -> str:
    sid = row[0]
    if isinstance(sid, bytes) and len(sid) == 16:
        return str(uuid.UUID(bytes=sid))
    return repr(sid)[:60]


class _DuplicateKey(Exception):
    """Raised inside a write transaction when an insert hits the primary key."""


class _Sql:
    """Every statement of one store, built once, for one validated table name."""

    def __init__(self, table: str) -> None:
        t = validate_table_name(table)
        due = f"{t} INDEXED BY idx_{t}_due"
        leased = f"{t} INDEXED BY idx_{t}_leased"
        self.insert = (
            f"INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
            " scheduled_for, target_kind, target_routing_key, attempts, max_attempts,"
            " leased_until, paused, last_error, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, NULL, 0, NULL, ?)"
        )
        self.insert_one = f"BEGIN IMMEDIATE; {self.insert}; COMMIT"
        self.exists = f"SELECT 1 FROM {t} WHERE schedule_id = ?"
        self.select_one = f"SELECT {_COLUMNS} FROM {t} WHERE schedule_id = ?"
        # The claim: up to n candidates from each of two indexes (fresh rows in claim
        # order; rows whose lease or backoff has expired), merged, the first n leased.
        self.claim = (
            f"UPDATE {t} SET attempts = attempts + 1, leased_until = :until"
            " WHERE rowid IN ("
            " SELECT rid FROM ("
            "  SELECT * FROM ("
            f"   SELECT rowid AS rid, scheduled_for, schedule_id FROM {due}"
            f"   WHERE {LIVE} AND paused = 0 AND leased_until IS NULL"
            "     AND scheduled_for <= :now AND attempts < max_attempts"
            "   ORDER BY scheduled_for, schedule_id LIMIT :n)"
            "  UNION ALL"
            "  SELECT * FROM ("
            f"   SELECT rowid AS rid, scheduled_for, schedule_id FROM {leased}"
            f"   WHERE {LIVE} AND paused = 0 AND leased_until IS NOT NULL"
            "     AND leased_until <= :now AND scheduled_for <= :now"
            "     AND attempts < max_attempts"
            "   ORDER BY scheduled_for, schedule_id LIMIT :n))"
            " ORDER BY scheduled_for, schedule_id LIMIT :n)"
            f" RETURNING {_COLUMNS}"
        )
        # Live rows with an instant in another layout (another tool wrote it),
        # rewritten canonically (the same instant) before any comparison; the index
        # is normally empty, so this costs a claim one probe of an empty index.
        odd = f"{t} INDEXED BY idx_{t}_noncanonical"
        self.any_noncanonical = f"SELECT 1 FROM {odd} WHERE {NONCANONICAL} LIMIT 1"
        self.normalise = (
            f"UPDATE {odd} SET"
            f" scheduled_for = CASE WHEN {sqlite_noncanonical('scheduled_for')}"
            f"  THEN strftime({CANONICAL_TS}, scheduled_for) ELSE scheduled_for END,"
            f" leased_until = CASE WHEN {sqlite_noncanonical('leased_until')}"
            f"  THEN strftime({CANONICAL_TS}, leased_until) ELSE leased_until END"
            f" WHERE {NONCANONICAL}"
        )
        fence = f"schedule_id = :id AND leased_until = :lease AND {LIVE}"
        self.mark_delivered = (
            f"UPDATE {t} SET delivered_at = :now, leased_until = NULL WHERE {fence}"
        )
        self.reschedule = (
            f"UPDATE {t} SET scheduled_for = :next, attempts = 0, leased_until = NULL,"
            f" last_error = NULL WHERE {fence}"
        )
        self.mark_failed = (
            f"UPDATE {t} SET leased_until = :until, last_error = :error WHERE {fence}"
        )
        self.mark_dead_lettered = (
            f"UPDATE {t} SET dead_lettered_at = :now, last_error = :error,"
            f" leased_until = NULL WHERE {fence}"
        )
        self.release = (
            f"UPDATE {t} SET attempts = max(attempts - 1, 0), leased_until = NULL WHERE {fence}"
        )
        sweepable = (
            f"{LIVE} AND paused = 0 AND attempts >= max_attempts"
            " AND (leased_until IS NULL OR leased_until <= :now)"
        )
        self.sweep = (
            f"UPDATE {t} INDEXED BY idx_{t}_exhausted"
            " SET dead_lettered_at = :now, last_error = :error, leased_until = NULL"
            f" WHERE {sweepable}"
        )
        # Run before the sweep's write transaction, which it usually spares: is there
        # anything to sweep, or an instant to rewrite before comparing? (Two probes of
        # normally empty index ranges, no write lock.)
        self.sweep_probe = (
            f"SELECT EXISTS (SELECT 1 FROM {odd} WHERE {NONCANONICAL})"
            f" OR EXISTS (SELECT 1 FROM {t} INDEXED BY idx_{t}_exhausted WHERE {sweepable})"
        )
        # The wake-up hint: the first fresh row; among leased rows the least
        # max(scheduled_for, leased_until). The first leased row (l, s) in index order
        # gives it when s <= l (every other lease is at least l); otherwise only rows
        # whose lease ends in (l, s] can beat s, and that range is read.
        leased_rows = f"{LIVE} AND paused = 0 AND leased_until IS NOT NULL"
        self.next_wakeup = (
            "SELECT"
            f" (SELECT scheduled_for FROM {due}"
            f"   WHERE {LIVE} AND paused = 0 AND leased_until IS NULL"
            "   ORDER BY scheduled_for, schedule_id LIMIT 1),"
            " (SELECT CASE WHEN f.s <= f.l THEN f.l ELSE min(f.s, coalesce("
            f"   (SELECT min(max(scheduled_for, leased_until)) FROM {leased}"
            f"    WHERE {leased_rows} AND leased_until > f.l AND leased_until <= f.s),"
            "   f.s)) END"
            f"  FROM (SELECT leased_until AS l, scheduled_for AS s FROM {leased}"
            f"   WHERE {leased_rows} ORDER BY leased_until, scheduled_for LIMIT 1) AS f)"
        )
        self.cancel = (
            f"UPDATE {t} SET cancelled_at = :now, leased_until = NULL"
            f" WHERE schedule_id = :id AND {LIVE}"
        )
        self.set_paused = (
            f"UPDATE {t} SET paused = :paused"
            f" WHERE schedule_id = :id AND {LIVE} AND (paused <> 0) <> :paused"
        )
        self.resume_realign = (
            f"UPDATE {t} SET scheduled_for = :next, attempts = 0, last_error = NULL,"
            " leased_until = NULL, paused = 0 WHERE schedule_id = :id"
        )
        self.resume_flag = f"UPDATE {t} SET paused = 0 WHERE schedule_id = :id"
        self.replay = (
            f"UPDATE {t} SET scheduled_for = :now, attempts = 0, leased_until = NULL,"
            " last_error = NULL, paused = 0, dead_lettered_at = NULL WHERE schedule_id = :id"
        )
        self.list_pending = (
            f"SELECT {_COLUMNS} FROM ("
            " SELECT * FROM ("
            f"  SELECT {_COLUMNS} FROM {t} INDEXED BY idx_{t}_pending"
            f"  WHERE {LIVE} AND paused = 0"
            "  ORDER BY scheduled_for, schedule_id LIMIT :n)"
            " UNION ALL"
            " SELECT * FROM ("
            f"  SELECT {_COLUMNS} FROM {t} INDEXED BY idx_{t}_paused"
            f"  WHERE {LIVE} AND paused <> 0"
            "  ORDER BY scheduled_for, schedule_id LIMIT :n))"
            " ORDER BY scheduled_for, schedule_id LIMIT :n"
        )
        self.list_dead_letter = (
            f"SELECT {_COLUMNS} FROM {t} INDEXED BY idx_{t}_dead_letter"
            " WHERE dead_lettered_at IS NOT NULL"
            " ORDER BY dead_lettered_at DESC, schedule_id LIMIT :n"
        )


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
    that cannot be decoded is dead-lettered with a ``last_error`` naming the column.

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
      a lost sweep is swept again. At-least-once holds; fewer fsyncs per batch make
      the worker faster and its dispatch lag shorter.
    - ``"normal"``: ``synchronous=NORMAL`` for everything: the last transactions of
      any kind, inserts included, may roll back in a power cut or OS crash.

    Errors from SQLite (a lock held for longer than ``busy_timeout``, an I/O error, a
    full disk, a corrupt file) surface as :class:`~hexeract_lite.errors.StoreError`
    naming the file, with the apsw error chained; the failed operation applied nothing.
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
    ) -> None:
        """Use :meth:`open`; this wraps a connection that :meth:`open` configured."""
        super().__init__()
        self._conn: apsw.Connection | None = connection
        self._cursor: apsw.Cursor | None = connection.cursor()
        self._path = path
        self._table = table
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._durability = durability
        # "relaxed": the worker's transactions begin with synchronous=NORMAL
        self._begin_worker = _BEGIN_UNSYNCED if durability == "relaxed" else _BEGIN
        self._sql = _Sql(table)
        self._lock = threading.Lock()

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
    ) -> Self:
        """Open (and, when missing, create) the scheduler table ``table`` in ``path``.

        - ``path``: the database file; None means :func:`default_database_path`, whose
          folders are created. A new file is created with owner-only permissions
          (0600 on POSIX); on any other path the folder must already exist.
        - ``table``: the table name, ``^[a-zA-Z_][a-zA-Z0-9_]*$``, at most 63 bytes
          (:class:`InvalidConfiguration` otherwise, before any SQL runs).
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

        A new database is built under a temporary name beside ``path`` and linked into
        place only once complete: other processes never see a half-made file, several
        processes creating the same file at once all end up sharing the one that got
        there first, and a failed creation (full disk, I/O error) leaves nothing.

        A table the Rust reference created (no version recorded) is adopted: its rows
        are kept, hexeract_lite's indexes are added and timestamp text is normalised
        to ``YYYY-MM-DDTHH:MM:SS.mmmZ``, in one transaction. A table whose recorded
        version is newer than :data:`SCHEMA_VERSION` is refused. A path that is a
        folder, a file that is not a SQLite database, a read-only file or folder, or a
        missing folder raise :class:`StoreError` naming the path, changing nothing.
        """
        table = validate_table_name(table)
        if durability not in _DURABILITY:
            raise InvalidConfiguration(
                f"durability must be 'full', 'relaxed' or 'normal', got {durability!r}"
            )
        if not isinstance(busy_timeout, timedelta) or busy_timeout < timedelta(0):
            raise InvalidConfiguration(
                f"busy_timeout must be a timedelta >= 0, got {busy_timeout!r}"
            )
        if not isinstance(clock, Clock):
            raise InvalidConfiguration(f"clock must have a now() method, got {clock!r}")
        if vfs is not None and vfs not in apsw.vfs_names():
            raise InvalidConfiguration(
                f"vfs must name a registered SQLite VFS {apsw.vfs_names()}, got {vfs!r}"
            )
        db = _check_path(path, create)
        if not db.exists():
            _create_database(db, table, busy_timeout, vfs)
        # An existing file is never deleted or rewritten when opening it fails.
        connection = _connect(db, durability, busy_timeout, vfs)
        try:
            _ensure_schema(connection, table, db, create, busy_timeout)
            _optimize(connection, busy_timeout)
            # The claim merges two index walks and sorts at most 2 x batch_size rows;
            # with SQLite's default file-backed temp store those tiny sorts cost more
            # than the rest of the claim (about 270 us against 110 us at 300k rows).
            # Every sort the store runs is bounded by a batch size or a limit. (Set
            # after the schema work: adopting a big table sorts its rows into indexes.)
            connection.pragma("temp_store", "MEMORY")
        except BaseException:
            connection.close()
            raise
        return cls(
            connection=connection,
            path=db,
            table=table,
            clock=clock,
            busy_timeout=busy_timeout,
            durability=durability,
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

    def close(self) -> None:
        """Close the connection; later calls raise :class:`StoreError`. Idempotent."""
        with self._lock:
            conn, self._conn, self._cursor = self._conn, None, None
            if conn is not None:
                try:
                    conn.close()
                except apsw.Error as exc:
                    raise self._error("close", exc) from exc

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

    # -- copying rows between stores (hexeract scheduler migrate) ---------------------

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """See :meth:`ScheduleStore.export_records` (in :mod:`.sqlite_records`)."""
        from . import sqlite_records

        return sqlite_records.export_records(self, after, limit)

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """See :meth:`ScheduleStore.import_records` (in :mod:`.sqlite_records`)."""
        from . import sqlite_records

        return sqlite_records.import_records(self, records)

    # -- plumbing ----------------------------------------------------------------------

    def _now(self) -> datetime:
        return to_utc_ms(self._clock.now(), "clock.now()")

    def _live_cursor(self) -> apsw.Cursor:
        if self._cursor is None:
            raise StoreError(f"the store on {self._path} is closed")
        return self._cursor

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
                if begin is _BEGIN_UNSYNCED:
                    self._resync()

    def _resync(self) -> None:
        """Back to ``synchronous=FULL`` after a worker transaction under "relaxed"."""
        conn = self._conn
        if conn is not None:
            try:
                conn.execute(_RESYNC)
            except apsw.Error:  # pragma: no cover - a broken connection fails its next call
                _log.warning("could not restore synchronous=FULL on %s", self._path)

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
        why = _diagnose(row) or f"{type(exc).__name__}: {exc}"
        return StoreError(
            f"schedule {_row_label(row)} in the table {self._table} of {self._path} is"
            f" malformed: {why}"
        )

    def _records(self, rows: list[Any]) -> list[ScheduleRecord]:
        """Rows as records (ids and instants decoded); a malformed row: StoreError."""
        records = []
        for row in rows:
            try:
                records.append(_record(row))
            except Exception as exc:
                raise self._malformed(row, exc) from exc
        return records

    def _snapshots(self, rows: list[Any]) -> list[ScheduleSnapshot]:
        """Rows as snapshots (every column decoded); a malformed row: StoreError."""
        snapshots = []
        for row in rows:
            try:
                snapshots.append(_record(row).snapshot())
            except Exception as exc:
                raise self._malformed(row, exc) from exc
        return snapshots

    # -- writing -------------------------------------------------------------------------

    def insert(self, message: ScheduledMessage, max_attempts: int) -> None:
        check_max_attempts(max_attempts)
        validate_message(message)
        trigger, target = message.trigger, message.target
        row = (
            message.schedule_id.bytes,
            message.event_type,
            message.payload_json,
            trigger.kind,
            trigger.expression,
            format_ts(message.scheduled_for),
            target.kind,
            target.routing_key,
            max_attempts,
            format_ts(self._now()),
        )
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

    def insert_many(self, messages: Sequence[ScheduledMessage], max_attempts: int) -> None:
        check_max_attempts(max_attempts)
        messages = check_messages(messages)
        if not messages:
            return
        created = format_ts(self._now())
        rows = [
            (
                m.schedule_id.bytes,
                m.event_type,
                m.payload_json,
                m.trigger.kind,
                m.trigger.expression,
                format_ts(m.scheduled_for),
                m.target.kind,
                m.target.routing_key,
                max_attempts,
                created,
            )
            for m in messages
        ]
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
        until = to_utc_ms(now + lease, "lease deadline")
        until_text = format_ts(until)
        params = {"now": format_ts(now), "until": until_text, "n": batch_size}
        with self._write("claim_due", worker=True) as cur:
            cur.execute(self._sql.normalise)
            rows = cur.execute(self._sql.claim, params).fetchall()
        claimed: list[LeasedOccurrence] = []
        malformed: list[tuple[Sequence[Any], Exception]] = []
        for row in rows:  # decoded after the commit: the write lock is held for SQL only
            try:
                claimed.append(_leased(row, until_text, until))
            except Exception as exc:
                malformed.append((row, exc))
        if malformed:
            self._dead_letter_malformed(malformed)
        claimed.sort(key=_claim_order)
        return claimed

    def _dead_letter_malformed(self, malformed: list[tuple[Sequence[Any], Exception]]) -> None:
        """A claimed row that cannot be decoded (written badly by another tool or by
        hand) is never dispatched: it is dead-lettered at once, its last_error naming
        the column, so the rows claimed with it go on and an operator can see it. If
        that write fails, the row keeps its lease and the next claim after it tries
        again; the healthy rows are returned either way."""
        now = format_ts(self._now())
        reasons = [
            (row, _diagnose(row) or f"{type(exc).__name__}: {exc}") for row, exc in malformed
        ]
        try:
            with self._write("claim_due", worker=True) as cur:
                for row, why in reasons:
                    params = {
                        "id": row[0],
                        "lease": row[10],
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
                _row_label(row),
                self._table,
                why,
            )

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        """See :meth:`ScheduleStore.settle`: one ``BEGIN IMMEDIATE`` transaction, one
        fenced ``UPDATE`` per item (prepared once, cached by the connection); an item
        whose lease no stored lease can equal is answered False without SQL."""
        checked = check_settlements(outcomes)
        if not checked:
            return []
        now = self._now()
        now_text = format_ts(now)
        sql = self._sql
        plan: list[tuple[int, str, dict[str, Any]]] = []
        lease: object = None
        token: str | None = None
        for index, item in enumerate(checked):
            if item.lease is not lease:  # a batch's items share the claim's lease
                lease = item.lease
                token = _lease_text(lease)
            if token is None:
                continue  # no lease this store hands out: fenced out
            params: dict[str, Any] = {"id": item.schedule_id.bytes, "lease": token}
            kind = item.kind
            if kind is SettlementKind.DELIVERED:
                params["now"] = now_text
                statement = sql.mark_delivered
            elif kind is SettlementKind.RESCHEDULE:
                assert item.next is not None
                params["next"] = format_ts(item.next)
                statement = sql.reschedule
            elif kind is SettlementKind.FAILED:
                assert item.retry_in is not None
                params["until"] = format_ts(to_utc_ms(now + item.retry_in, "retry deadline"))
                params["error"] = item.error
                statement = sql.mark_failed
            elif kind is SettlementKind.RELEASED:
                statement = sql.release
            else:
                params["now"] = now_text
                params["error"] = item.error
                statement = sql.mark_dead_lettered
            plan.append((index, statement, params))
        results = [False] * len(checked)
        if plan:
            with self._write("settle", worker=True) as cur:
                changes = cur.connection.changes
                for index, statement, params in plan:
                    cur.execute(statement, params)
                    if changes():
                        results[index] = True
        if any(ok and item.wakes for ok, item in zip(results, checked, strict=True)):
            self.changes.notify()
        return results

    def dead_letter_exhausted(self) -> int:
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

    def _normalise_if_needed(self) -> None:
        """Rewrite live rows' instants that another tool wrote in another layout (a
        read when there are none, which is the normal case)."""
        if self._read("normalise", self._sql.any_noncanonical, ()):
            with self._write("normalise", worker=True) as cur:
                cur.execute(self._sql.normalise)

    def next_wakeup(self) -> datetime | None:
        self._normalise_if_needed()
        [(fresh, leased)] = self._read("next_wakeup", self._sql.next_wakeup, ())
        candidates = [parse_ts(text) for text in (fresh, leased) if text is not None]
        return min(candidates, default=None)

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
                cur.execute(self._sql.resume_realign, {"id": sid.bytes, "next": format_ts(next)})
            else:
                cur.execute(self._sql.resume_flag, {"id": sid.bytes})
        self.changes.notify()
        return True

    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        sid = check_schedule_id(schedule_id)
        rows = self._read("inspect", self._sql.select_one, (sid.bytes,))
        return self._snapshots(rows)[0] if rows else None

    # -- admin -----------------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot]:
        check_limit(limit)
        self._normalise_if_needed()
        rows = self._read("list_pending", self._sql.list_pending, {"n": limit})
        return sorted(self._snapshots(rows), key=lambda s: (s.scheduled_for, s.schedule_id.bytes))

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot]:
        check_limit(limit)
        rows = self._read("list_dead_letter", self._sql.list_dead_letter, {"n": limit})
        return self._snapshots(rows)

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


# -- opening a file ------------------------------------------------------------------


def _check_path(path: str | os.PathLike[str] | None, create: bool) -> pathlib.Path:
    """The absolute database path, after the checks that need no SQL (default folders are
    made here when ``create``)."""
    if path is None:
        db = default_database_path()
        if create and not db.parent.is_dir():
            try:
                db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder {db.parent} for the database {db}: {exc}"
                ) from exc
    else:
        if not isinstance(path, str | os.PathLike):
            raise InvalidConfiguration(f"path must be a str or os.PathLike, got {path!r}")
        db = pathlib.Path(os.fsdecode(os.fspath(path)))
    db = db.absolute()
    if db.is_dir():
        raise StoreError(f"cannot open the database {db}: it is a directory")
    if db.exists():
        return db
    if not create:
        raise StoreError(f"no database at {db}")
    if not db.parent.is_dir():
        raise StoreError(f"cannot create the database {db}: the folder {db.parent} does not exist")
    return db


def _create_database(
    db: pathlib.Path, table: str, busy_timeout: timedelta, vfs: str | None
) -> None:
    """Build a complete new database under a temporary name beside ``db`` (0600, WAL,
    the table at :data:`SCHEMA_VERSION`), then link it to ``db``, which must not exist.

    Losing the race to another process that created ``db`` first is fine: its file is
    used. Any failure removes the temporary file and leaves ``db`` untouched.
    """
    tmp = db.with_name(f".{db.name}.{os.getpid()}-{secrets.token_hex(4)}.creating")
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the database {db}: {exc.strerror or exc}") from exc
    os.close(fd)
    try:
        conn = _connect(tmp, "full", busy_timeout, vfs, label=db)
        try:
            _ensure_schema(conn, table, db, True, busy_timeout)
            conn.pragma("wal_checkpoint", "TRUNCATE")  # everything in the file itself
        finally:
            conn.close()
        try:
            os.link(tmp, db)
        except FileExistsError:
            return  # another process created it first; use theirs
        except OSError:
            # no hard links on this file system: a rename is nearly as good here
            if not db.exists():
                os.replace(tmp, db)
    except StoreError:
        raise  # (a StoreError is an OSError too) it names the path already
    except OSError as exc:
        raise StoreError(f"cannot create the database {db}: {exc.strerror or exc}") from exc
    except apsw.Error as exc:
        raise _open_error(db, exc) from exc
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(OSError):
                os.unlink(f"{tmp}{suffix}")


def _connect(
    path: pathlib.Path,
    durability: str,
    busy_timeout: timedelta,
    vfs: str | None,
    *,
    label: pathlib.Path | None = None,
) -> apsw.Connection:
    """Open and configure the store's own connection (never apsw.bestpractice.apply).

    Errors name ``label`` (the user's path) when given, else ``path``."""
    db = label or path
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE, vfs=vfs)
    except apsw.Error as exc:
        raise _open_error(db, exc) from exc
    try:
        apsw.bestpractice.connection_busy_timeout(conn, int(busy_timeout.total_seconds() * 1000))
        apsw.bestpractice.connection_dqs(conn)
        if conn.readonly("main"):
            raise StoreError(f"cannot write to the database {db}: the file is read-only")
        conn.pragma("synchronous", _DURABILITY[durability])
    except apsw.Error as exc:
        conn.close()
        raise _open_error(db, exc) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _open_error(db: pathlib.Path, exc: apsw.Error) -> StoreError:
    if isinstance(exc, apsw.NotADBError):
        return StoreError(f"cannot open {db}: it is not a SQLite database ({exc})")
    if isinstance(exc, apsw.CorruptError):
        return StoreError(f"cannot open {db}: the database is corrupt ({exc})")
    if isinstance(exc, apsw.ReadOnlyError | apsw.CantOpenError | apsw.AuthError):
        return StoreError(
            f"cannot open the database {db} for writing (read-only file or folder?): {exc}"
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreError(f"cannot open the database {db}: it stayed locked ({exc})")
    return StoreError(f"cannot open the database {db}: {type(exc).__name__}: {exc}")


def _optimize(conn: apsw.Connection, busy_timeout: timedelta) -> None:
    """``PRAGMA optimize`` at open (apsw.bestpractice), bounded by ``analysis_limit``;
    skipped, without waiting, when another connection holds the write lock (it is only
    an optimisation, and the store's hot queries name their indexes anyway)."""
    try:
        conn.pragma("analysis_limit", 1000)
        conn.set_busy_timeout(0)
        apsw.bestpractice.connection_optimize(conn)
    except apsw.Error:
        pass
    finally:
        conn.set_busy_timeout(int(busy_timeout.total_seconds() * 1000))


def _schema_state(conn: apsw.Connection, table: str) -> tuple[bool, int | None]:
    """(does the table exist, its recorded version or None)."""
    names = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?)",
            (table, META_TABLE),
        )
    }
    version: int | None = None
    if META_TABLE in names:
        rows = conn.execute(
            f"SELECT version FROM {META_TABLE} WHERE table_name = ?", (table,)
        ).fetchall()
        if rows:
            version = int(str(rows[0][0]))
    return table in names, version


def _too_new(db: pathlib.Path, table: str, version: int) -> StoreError:
    return StoreError(
        f"the table {table} in {db} has schema version {version}, newer than this"
        f" hexeract_lite understands ({SCHEMA_VERSION}); upgrade hexeract_lite"
    )


def _switch_to_wal(conn: apsw.Connection, db: pathlib.Path, busy_timeout: timedelta) -> None:
    """``journal_mode=WAL`` (a no-op when it already is). Changing the mode needs a lock
    that SQLite does not wait for through the busy handler, so retry until the busy
    timeout has passed."""
    if str(conn.pragma("journal_mode")).lower() == "wal":
        return
    deadline = time.monotonic() + busy_timeout.total_seconds()
    while True:
        try:
            apsw.bestpractice.connection_wal(conn)
            break
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
    mode = conn.pragma("journal_mode")
    if str(mode).lower() != "wal":
        raise StoreError(f"cannot switch the database {db} to WAL (journal_mode is {mode!r})")


def _ensure_schema(
    conn: apsw.Connection, table: str, db: pathlib.Path, create: bool, busy_timeout: timedelta
) -> None:
    """Create, adopt or upgrade ``table`` to :data:`SCHEMA_VERSION`, in one transaction."""
    try:
        exists, version = _schema_state(conn, table)
        if version is not None and version > SCHEMA_VERSION:
            raise _too_new(db, table, version)
        if not exists and not create:
            raise StoreError(f"no database at {db}: the file has no table {table}")
        # Only now, with nothing to refuse, may the file change: WAL is recorded in it.
        _switch_to_wal(conn, db, busy_timeout)
        if exists and version == SCHEMA_VERSION:
            return  # the common case: a read, no write lock
        conn.execute("BEGIN IMMEDIATE")
        try:
            exists, version = _schema_state(conn, table)  # again, under the write lock
            if version is not None and version > SCHEMA_VERSION:
                raise _too_new(db, table, version)
            if not exists:
                if not create:
                    raise StoreError(f"no database at {db}: the file has no table {table}")
                conn.execute(sqlite_table_ddl(table))
                for ddl in sqlite_reference_index_ddl(table):
                    conn.execute(ddl)
                version = 0
            elif version is None:
                _check_reference_layout(conn, table, db)
                version = 0
            for step in _UPGRADES[version:]:
                step(conn, table)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {META_TABLE} ("
                " table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)"
            )
            conn.execute(
                f"INSERT INTO {META_TABLE} (table_name, version) VALUES (?, ?)"
                " ON CONFLICT (table_name) DO UPDATE SET version = excluded.version",
                (table, SCHEMA_VERSION),
            )
            conn.execute("COMMIT")
        except BaseException:
            if not conn.get_autocommit():
                with suppress(apsw.Error):
                    conn.execute("ROLLBACK")
            raise
    except apsw.Error as exc:
        raise _open_error(db, exc) from exc


def _check_reference_layout(conn: apsw.Connection, table: str, db: pathlib.Path) -> None:
    """An existing table without a recorded version must have the reference's columns."""
    columns = {row[1]: str(row[2]).upper() for row in conn.execute(f"PRAGMA table_info({table})")}
    wrong = [
        name for name, decl, _ in REFERENCE_COLUMNS if name not in columns or columns[name] != decl
    ]
    if wrong:
        raise StoreError(
            f"the table {table} in {db} is not a scheduler table: the columns"
            f" {', '.join(wrong)} are missing or have another type"
        )
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0").fetchall()
    except apsw.SQLError as exc:
        raise StoreError(
            f"the table {table} in {db} is WITHOUT ROWID; the reference's layout (and"
            " hexeract_lite's claim) needs an ordinary rowid table"
        ) from exc


def _upgrade_to_1(conn: apsw.Connection, table: str) -> None:
    """0 → 1: hexeract_lite's indexes; timestamps rewritten as ``...T...mmmZ`` text.

    Text comparison orders instants only when every value has the same layout, and the
    reference's readers also accept ``YYYY-MM-DD HH:MM:SS``; such values are rewritten
    to the canonical form (the same instant) so claims and listings order them right.
    """
    for ddl in (*sqlite_reference_index_ddl(table), *sqlite_extra_index_ddl(table)):
        conn.execute(ddl)
    for column in _TIMESTAMP_COLUMNS:
        odd = conn.execute(
            f"SELECT schedule_id, {column} FROM {table} WHERE {column} IS NOT NULL"
            f" AND (length({column}) <> 24 OR substr({column}, 11, 1) <> 'T'"
            f" OR substr({column}, 24, 1) <> 'Z')"
        ).fetchall()
        for sid, text in odd:
            try:
                canonical = format_ts(parse_ts(str(text)))
            except ValueError:
                continue  # not a timestamp at all: left for a human to look at
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE schedule_id = ?", (canonical, sid))


_UPGRADES = [_upgrade_to_1]
"""``_UPGRADES[v]`` moves a table from version v to v + 1; run in order, in one transaction."""
assert len(_UPGRADES) == SCHEMA_VERSION
