"""MysqlScheduleStore: the store contract on a MySQL 8 or MariaDB 10.6+ table. With no
``LISTEN``, other processes' changes are seen by polling."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql

from ..._time import to_utc_ms
from ...clock import SYSTEM_CLOCK, Clock
from ...errors import InvalidMessage, StoreError
from ...message import ScheduledMessage
from ...redact import redact_conn
from ...runlog import this_worker
from ..base import SWEEP_ERROR, SWEEP_KEPT
from ..checks import check_int32_counts, check_records
from ..record import ScheduleRecord
from ..schema import DEFAULT_TABLE
from ..sql.server import NAME_HELD, ServerStore, check_count, check_open
from . import codec
from .codec import encode_instant, record_params
from .connections import Conn, Connections, connect, url_params
from .runs import RUNS_VERSION, run_statements, sweep_runs
from .schema import SCHEMA_VERSION, ensure_schema
from .session import DUPLICATE_KEY, MysqlSession, Timeouts, store_error
from .statements import Statements

MAX_JSON_DEPTH = 32
"""The deepest payload the store takes: MariaDB's JSON functions (the column's check)
stop at 32 levels of arrays and objects (MySQL 8 at 100)."""
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class MysqlScheduleStore(ServerStore):
    """Schedules in a MySQL or MariaDB table, shared by every worker that can reach it.

    Open it with :meth:`open`; close it (or use it as a context manager) to release its
    connections. Safe to share between threads: each operation borrows a pooled
    connection and runs as one statement or one short transaction. Errors of the
    driver or the server are raised as :class:`~hexeract_lite.errors.StoreError`,
    chained to the original; no message shows the password.
    """

    _name = "MysqlScheduleStore"
    _codec = codec
    _session = MysqlSession
    _transaction_module = f"{__package__}.transaction"
    _db: Connections
    _sql: Statements
    _regex_flags = "(?s)"

    def __init__(
        self,
        url: str,
        *,
        table: str,
        clock: Clock,
        timeouts: Timeouts,
        pool: int,
        version: int = SCHEMA_VERSION,
    ):
        """Use :meth:`open`: it checks the arguments and the table first."""
        super().__init__()
        self._table = table
        self._clock = clock
        self._sql = Statements(table)
        if version >= RUNS_VERSION:
            self._run_sql = run_statements(table)
            self._sweep_runs = sweep_runs(table)
        self._db = Connections(url, table=table, timeouts=timeouts, pool_max_size=pool)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        table: str = DEFAULT_TABLE,
        clock: Clock = SYSTEM_CLOCK,
        create: bool = True,
        pool_max_size: int = 10,
        connect_timeout: timedelta = timedelta(seconds=10),
        read_timeout: timedelta = timedelta(seconds=60),
        pool_timeout: timedelta = timedelta(seconds=10),
        lock_timeout: timedelta = timedelta(seconds=5),
        statement_timeout: timedelta = timedelta(seconds=30),
    ) -> MysqlScheduleStore:
        """Connect to the server at ``url`` (``mysql://user:password@host:3306/db``,
        ``mariadb://...``) and use ``table`` there.

        ``create=True`` creates the table (the reference's layout, then ours) when it
        is missing and adds what an older table lacks (the reference's own gets our
        columns and indexes), under a named lock; ``create=False`` writes nothing: a
        missing table, or one lacking a column of ours, is a :class:`StoreError`.

        Bounds on waiting, each a :class:`~datetime.timedelta`: ``connect_timeout``
        (10 s); ``read_timeout`` (60 s: a server that stops answering mid-statement);
        ``pool_timeout`` (10 s: a free pooled connection); ``lock_timeout`` (5 s,
        whole seconds: a row lock another session holds); ``statement_timeout`` (30 s:
        one read statement). ``pool_max_size`` (10) bounds the connections in use at
        once. Every argument is checked before anything connects
        (:class:`InvalidConfiguration` naming it and the value).
        """
        check_open(table, clock, create)
        check_count("pool_max_size", pool_max_size, 1)
        timeouts = Timeouts.checked(
            connect=connect_timeout,
            read=read_timeout,
            pool=pool_timeout,
            lock=lock_timeout,
            statement=statement_timeout,
        )
        params = url_params(url)
        where = redact_conn(url)
        try:
            conn = connect(params, timeouts)
            try:
                wait = max(1, round(timeouts.lock.total_seconds()))
                version = ensure_schema(conn, table, create=create, where=where, lock_wait=wait)
            finally:
                conn.close()
        except pymysql.MySQLError as exc:
            raise store_error(
                f"cannot open table {table!r} at {where}", exc, url=url, timeouts=timeouts
            ) from exc
        return cls(
            url, table=table, clock=clock, timeouts=timeouts, pool=pool_max_size, version=version
        )

    @contextmanager
    def _transaction(self, conn: Conn[Any], atomic: bool, worker: bool) -> Iterator[None]:
        """``atomic=False`` outside the worker: the statements in autocommit."""
        if atomic or worker:
            conn.begin()
            yield
            conn.commit()
        else:
            yield

    def _lock_statement(self) -> Any:
        return self._sql.lock_row

    def _row_params(self, record: ScheduleRecord) -> dict[str, Any]:
        return record_params(record)

    def _stats_row(self) -> tuple[datetime, Sequence[Any]]:
        now = self._now()
        [row] = self._read("stats", self._sql.stats, {"now": encode_instant(now)})
        row = [int(v) if i not in (7, 9) else v for i, v in enumerate(row)]
        for index in (7, 9):
            if row[index] is not None:
                row[index] = row[index].replace(tzinfo=UTC)
        return now, row

    # -- writing -------------------------------------------------------------------

    def _check_payloads(self, messages: Sequence[ScheduledMessage]) -> None:
        """A payload nested deeper than :data:`MAX_JSON_DEPTH`: :class:`InvalidMessage`."""
        for message in messages:
            text = message.payload_json
            if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:  # at most this deep
                continue
            marks = (1 if c in "[{" else -1 for c in _STRINGS.sub("", text) if c in "[]{}")
            depth = max(itertools.accumulate(marks), default=0)
            if depth > MAX_JSON_DEPTH:
                raise InvalidMessage(
                    f"the payload of schedule {message.schedule_id} nests {depth} levels deep;"
                    f" MySQL/MariaDB JSON takes at most {MAX_JSON_DEPTH}"
                )

    def _insert_params(
        self, rows: list[dict[str, Any]], max_attempts: int, now: datetime
    ) -> list[dict[str, Any]]:
        more = {"max_attempts": max_attempts, "now": encode_instant(now)}
        return [{**row, **more} for row in rows]

    def _insert(self, messages: Sequence[ScheduledMessage], rows: list[dict[str, Any]]) -> None:
        try:
            with self._write("insert") as tx, tx.conn.cursor() as cur:
                cur.executemany(self._sql.insert, rows)
        except StoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, pymysql.IntegrityError) or cause.args[0] != DUPLICATE_KEY:
                raise
            raise self._first_duplicate(messages, "insert", NAME_HELD) from exc

    # -- worker ----------------------------------------------------------------------

    def _claim_params(self, now: datetime, batch_size: int, lease: timedelta) -> dict[str, Any]:
        until = to_utc_ms(now + lease, "now + lease")
        return {
            "now": encode_instant(now),
            "until": encode_instant(until),
            "batch_size": batch_size,
        }

    def _claim_rows(self, tx: Any, claim: dict[str, Any]) -> list[Any]:
        """Select and lock the due rows, lease the first ``batch_size``, reselect them."""
        found = tx.fetch(self._sql.claim_fresh, claim) + tx.fetch(self._sql.claim_expired, claim)
        if not found:
            return []
        found.sort(key=lambda row: (row[1], row[0]))
        ids = tuple(row[0] for row in found[: claim["batch_size"]])
        tx.execute(self._sql.lease, {"until": claim["until"], "ids": ids})
        rows: list[Any] = tx.fetch(self._sql.leased, {"ids": ids})
        return rows

    def dead_letter_exhausted(self) -> int:
        params = {"now": encode_instant(self._now()), "error": SWEEP_ERROR, "kept": SWEEP_KEPT}
        # every poll cycle runs this: a read says when there is nothing to do, without
        # taking row locks
        if not self._read("dead_letter_exhausted", self._sql.sweep_probe, params):
            return 0
        with self._write("dead_letter_exhausted", worker=True) as tx:
            if self._run_sql is not None:  # the swept rows' runs, before they leave the index
                host, pid = this_worker()
                tx.execute(self._sweep_runs, {**params, "host": host, "pid": pid})
            return tx.execute(self._sql.sweep, params)

    def next_wakeup(self) -> datetime | None:
        [row] = self._read("next_wakeup", self._sql.next_wakeup, None)
        found = [value.replace(tzinfo=UTC) for value in row if value is not None]
        return to_utc_ms(min(found), "next_wakeup") if found else None

    # -- copying rows between stores ---------------------------------------------------

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """See :meth:`ScheduleStore.import_records`: in one transaction, the ids already
        stored are locked and left alone, the others inserted with every column as
        given (an id repeated in the batch: its first record). ``attempts`` or
        ``max_attempts`` above 2**31 - 1 are refused (:class:`InvalidConfiguration`)
        before anything is written."""
        rows = check_records(records)
        if not rows:
            return 0
        for row in rows:
            check_int32_counts(row, "MySQL")
        with self._write("import_records") as tx:
            ids = tuple(row.schedule_id.bytes for row in rows)
            stored = {bytes(r[0]) for r in tx.fetch(self._sql.existing, {"ids": ids})}
            fresh = []
            for row in rows:  # an id stored, or seen earlier in the batch, is left alone
                if row.schedule_id.bytes not in stored:
                    stored.add(row.schedule_id.bytes)
                    fresh.append(record_params(row))
            if fresh:
                with tx.conn.cursor() as cur:
                    cur.executemany(self._sql.import_row, fresh)
        if fresh:
            self.changes.notify()
        return len(fresh)
