"""PostgresScheduleStore: the store contract on a PostgreSQL table, shared with hexeract;
commits that may make work claimable send a ``NOTIFY`` (:mod:`.notify`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Any

import psycopg

from ..._time import to_utc_ms
from ...clock import SYSTEM_CLOCK, Clock
from ...errors import InvalidConfiguration, InvalidMessage, ScheduleNotFound, StoreError
from ...message import ScheduledMessage
from ...redact import redact_conn
from ...runlog import this_worker
from ...settlement import Settlement
from ..base import SWEEP_ERROR, SWEEP_KEPT
from ..checks import check_flag, check_int32_counts, check_records, duplicate
from ..columns import COLUMN_NAMES
from ..record import ScheduleRecord
from ..schema import DEFAULT_TABLE
from ..settle_plan import HELD_KINDS, PlannedSettlement, settle_plan
from ..sql.server import NAME_HELD, ServerStore, check_open
from ..sql.statements import INSERT_COLUMNS
from . import codec
from .codec import TEXT_COLUMNS, jsonb_text, same, whole_ms
from .connections import (
    Conn,
    Connections,
    check_pool_sizes,
    connect,
    conninfo_connect_timeout,
    conninfo_params,
)
from .schema import SCHEMA_VERSION, ensure_schema
from .session import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_POOL_TIMEOUT,
    DEFAULT_STATEMENT_TIMEOUT,
    PostgresSession,
    Timeouts,
    store_error,
)
from .statements import RUNS_VERSION, Statements, run_statements


def _is_json(text: str) -> bool:
    """Whether ``text`` parses as strict JSON (no NaN or Infinity, which JSONB refuses)."""

    def refuse(constant: str) -> object:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


class PostgresScheduleStore(ServerStore):
    """Schedules in a PostgreSQL table, shared by every worker that can reach it.

    Open it with :meth:`open`; close it (or use it as a context manager) to release its
    connection pool. Safe to share between threads: each operation borrows a
    connection from the pool and runs as one statement or one short transaction.

    Errors from the driver or the server are raised as
    :class:`~hexeract_lite.errors.StoreError`, chained to the original; no message
    ever shows the connection's password. A payload string holding NUL is refused with
    :class:`~hexeract_lite.errors.InvalidMessage` (``JSONB`` cannot hold it). In a
    child made by ``os.fork()`` the store connects afresh.

    .. versionadded:: 0.1.0
    """

    _name = "PostgresScheduleStore"
    _codec = codec
    _session = PostgresSession
    _transaction_module = f"{__package__}.transaction"
    _db: Connections
    _sql: Statements

    def __init__(
        self,
        conninfo: str,
        *,
        table: str,
        clock: Clock,
        use_database_clock: bool,
        timeouts: Timeouts,
        pool_min_size: int,
        pool_max_size: int,
        listen: bool = True,
        version: int = SCHEMA_VERSION,
    ) -> None:
        """Use :meth:`open`."""
        super().__init__()
        self._table = table
        self._clock = clock
        self._use_database_clock = use_database_clock
        self._sql = Statements(table, use_database_clock)
        if version >= RUNS_VERSION:
            self._run_sql = run_statements(table)
            self._sweep_runs = self._sql.sweep_with_runs
        self._db = Connections(
            conninfo,
            table=table,
            timeouts=timeouts,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            listen=listen,
            signal=self.changes.notify,
        )

    @classmethod
    def open(
        cls,
        conninfo: str,
        *,
        table: str = DEFAULT_TABLE,
        clock: Clock = SYSTEM_CLOCK,
        create: bool = True,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        use_database_clock: bool = False,
        connect_timeout: timedelta | None = None,
        pool_timeout: timedelta = DEFAULT_POOL_TIMEOUT,
        lock_timeout: timedelta = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: timedelta = DEFAULT_STATEMENT_TIMEOUT,
        listen: bool = True,
    ) -> PostgresScheduleStore:
        """Connect to the server at ``conninfo`` and use ``table`` there.

        ``conninfo`` is a libpq URL (``postgresql://user:password@host:5432/db``,
        ``postgres://...``) or ``key=value`` string.

        ``create=True`` creates the table when it is missing and upgrades an older one
        (the reference's included). With ``create=False`` nothing is written: a missing
        table, or an older one lacking a column, is a :class:`StoreError`. Either way a
        table lacking a column of the reference's layout, or of a newer schema version,
        is a :class:`StoreError`.

        Bounds on waiting, each a :class:`~datetime.timedelta`:

        - ``connect_timeout``: connecting to the server (whole seconds, at least 2 s,
          libpq's least; default: the ``connect_timeout`` of ``conninfo``, else 10 s);
        - ``pool_timeout``: waiting for a free pooled connection (10 s), which is also
          how long a call waits while the server cannot be reached;
        - ``lock_timeout``: waiting for a lock another session holds (5 s);
        - ``statement_timeout``: one statement, lock waits included (30 s).

        ``pool_min_size``/``pool_max_size`` bound the connection pool the store's
        threads share (``0 <= min <= max``, ``max >= 1``). ``use_database_clock``: every
        instant the store stamps or compares comes from the server (``claim_due`` only
        checks the ``now`` it is given). ``listen``: from its first claim on, one more
        connection ``LISTEN`` s for other processes' changes; ``False`` (for a pooler in
        transaction mode) leaves the worker to its polling. Every argument is checked
        before anything connects (:class:`InvalidConfiguration` naming it and the value).
        """
        check_open(table, clock, create)
        check_flag("use_database_clock", use_database_clock)
        check_flag("listen", listen)
        check_pool_sizes(pool_min_size, pool_max_size)
        params = conninfo_params(conninfo)
        if connect_timeout is None:
            connect_timeout = conninfo_connect_timeout(params)
        timeouts = Timeouts.checked(
            connect=connect_timeout,
            pool=pool_timeout,
            lock=lock_timeout,
            statement=statement_timeout,
        )
        where = redact_conn(conninfo)
        try:
            with connect(conninfo, timeouts) as conn:
                version = ensure_schema(conn, table, create=create, where=where)
        except psycopg.Error as exc:
            raise store_error(
                f"cannot open table {table!r} at {where}",
                exc,
                conninfo=conninfo,
                timeouts=timeouts,
            ) from exc
        return cls(
            conninfo,
            table=table,
            clock=clock,
            use_database_clock=use_database_clock,
            timeouts=timeouts,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            listen=listen,
            version=version,
        )

    @property
    def uses_database_clock(self) -> bool:
        """True when instants come from the server's clock, not :attr:`clock` (unused then)."""
        return self._use_database_clock

    # -- the SQL base's hooks ------------------------------------------------------

    def _transaction(self, conn: Conn, atomic: bool, worker: bool) -> AbstractContextManager[Any]:
        return conn.transaction() if atomic else nullcontext()

    def _announce(self, conn: Conn) -> None:
        self._db.announce(conn)

    def _with_now(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self._use_database_clock:
            params.setdefault("now", self._now())
        return params

    def _locked_row(self, tx: Any, sid: uuid.UUID) -> tuple[ScheduleRecord, datetime]:
        """The row locked ``FOR UPDATE`` and the statement's now."""
        rows = tx.fetch(self._sql.lock_row, self._with_now({"id": sid}))
        if not rows:
            raise ScheduleNotFound(sid)
        row = rows[0]
        return self._record(row), to_utc_ms(row[-1], "now")

    def _row_params(self, new: ScheduleRecord) -> dict[str, Any]:
        params = {name: getattr(new, name) for name in COLUMN_NAMES}
        params["payload"] = jsonb_text(new.payload)
        return params

    def _claim_rows(self, tx: Any, claim: dict[str, Any]) -> list[Any]:
        return list(tx.fetch(self._sql.claim, claim))

    def _stats_row(self) -> tuple[datetime, Sequence[Any]]:
        [row] = self._read("stats", self._sql.stats, self._with_now({}))
        return to_utc_ms(row[0], "now"), row[1:]

    # -- writing ---------------------------------------------------------------------

    def _insert_params(
        self, rows: list[dict[str, Any]], max_attempts: int, now: datetime
    ) -> dict[str, Any]:
        params: dict[str, Any] = {n: [row[n] for row in rows] for n in INSERT_COLUMNS}
        params["max_attempts"] = max_attempts
        if not self._use_database_clock:
            params["now"] = now
        return params

    def _insert(self, messages: Sequence[ScheduledMessage], params: dict[str, Any]) -> None:
        try:
            with self._db.connection("insert") as conn:
                # one message, one statement: nothing to undo on a duplicate
                with conn.transaction() if len(messages) > 1 else nullcontext():
                    inserted = {row[0] for row in conn.execute(self._sql.insert, params)}
                    for message in messages:
                        if message.schedule_id not in inserted:
                            raise duplicate(message)
                self._db.announce(conn)
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.UniqueViolation):
                # ON CONFLICT stands down only on the id: a racing insert of the same
                # named message can meet the name index first, then its id is stored
                raise self._first_duplicate(messages, "insert", NAME_HELD) from exc
            if isinstance(cause, psycopg.errors.UntranslatableCharacter):
                raise InvalidMessage(
                    "payload cannot be stored in PostgreSQL's JSONB: it holds a string with"
                    f" a NUL character (\\u0000) or another character it rejects ({cause})"
                ) from cause
            raise

    # -- worker ------------------------------------------------------------------------

    def _claim_params(self, now: datetime, batch_size: int, lease: timedelta) -> dict[str, Any]:
        """The claim's parameters; listening starts first, so no later change goes unheard."""
        self._db.start_listening()
        return {
            "now": now,
            "until": to_utc_ms(now + lease, "now + lease"),
            "lease_ms": whole_ms(lease),
            "batch_size": batch_size,
        }

    def _settle_plan(self, checked: list[Settlement]) -> list[PlannedSettlement]:
        """With ``use_database_clock`` the server sets the deadlines, but a ``retry_in``
        past the year 9999 is still refused before anything is written."""
        now = None if self._use_database_clock else self._now()
        if now is None:
            start = self._now()
            for item in checked:
                if item.kind in HELD_KINDS and item.retry_in is not None:
                    try:
                        to_utc_ms(start + item.retry_in, "retry deadline")
                    except OverflowError:
                        raise InvalidConfiguration(
                            f"retry_in {item.retry_in!r} puts the retry deadline past the"
                            f" year 9999 (now={start.isoformat()})"
                        ) from None
        return settle_plan(
            checked,
            now,
            encode_id=same,
            encode_lease=codec.encode_lease,
            encode_instant=same,
            encode_retry_in=whole_ms,
        )

    def dead_letter_exhausted(self) -> int:
        params = self._with_now({"error": SWEEP_ERROR, "kept": SWEEP_KEPT})
        statement: Any = self._sql.sweep
        if self._run_sql is not None:
            statement = self._sweep_runs
            params["host"], params["pid"] = this_worker()
        with self._write("dead_letter_exhausted", worker=True, atomic=False) as tx:
            return tx.execute(statement, params)

    def _insert_runs(self, tx: Any, rows: list[tuple[Any, ...]]) -> None:
        assert self._run_sql is not None
        with tx.conn.cursor() as cur:
            cur.executemany(self._run_sql.insert, rows)

    def next_wakeup(self) -> datetime | None:
        with self._db.connection("next_wakeup") as conn:
            row = conn.execute(self._sql.next_wakeup).fetchone()
        return None if row is None or row[0] is None else to_utc_ms(row[0], "next_wakeup")

    # -- copying rows between stores ---------------------------------------------------

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        r"""What PostgreSQL cannot hold is refused and nothing of the batch is written:
        ``attempts``/``max_attempts`` above 2**31 - 1 (:class:`InvalidConfiguration`), a
        NUL in a text column or a payload string (``\u0000``) or a payload that is not
        JSON (:class:`InvalidMessage` naming the schedules)."""
        rows = check_records(records)
        if not rows:
            return 0
        for row in rows:
            check_int32_counts(row, "PostgreSQL")
            for name in TEXT_COLUMNS:
                value = getattr(row, name)
                if value is not None and "\x00" in value:
                    raise InvalidMessage(
                        f"record {row.schedule_id}: {name} holds a NUL character, which"
                        " PostgreSQL text cannot store"
                    )
        params = {name: [getattr(row, name) for row in rows] for name in COLUMN_NAMES}
        params["payload"] = [jsonb_text(row.payload) for row in rows]
        try:
            with self._db.connection("import_records") as conn:
                inserted: int = conn.execute(self._sql.import_rows, params).rowcount
                if inserted:
                    self._db.announce(conn)
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.UntranslatableCharacter):
                suspects = [str(row.schedule_id) for row in rows if "\\u0000" in row.payload]
                what = "a string in it holds a NUL character (\\u0000) or another it rejects"
            elif isinstance(cause, psycopg.errors.InvalidTextRepresentation):
                suspects = [str(row.schedule_id) for row in rows if not _is_json(row.payload)]
                what = "it is not JSON (a row written by another tool?)"
            else:
                raise
            detail = " ".join(str(cause).split())  # the server's lines, on one
            raise InvalidMessage(
                f"a payload cannot be stored in PostgreSQL's JSONB: {what}"
                f" ({detail}); suspects: {', '.join(suspects) or 'none found'}; none of these"
                f" {len(rows)} records was imported"
            ) from cause
        if inserted:
            self.changes.notify()
        return inserted
