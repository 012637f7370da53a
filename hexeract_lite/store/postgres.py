"""PostgresScheduleStore: the store contract on a PostgreSQL server.

For deployments that outgrow one machine: many workers, on many hosts, claim from one
table, and ``FOR UPDATE SKIP LOCKED`` keeps them from ever handing out the same
occurrence twice while its lease holds. Needs the ``postgres`` extra (psycopg 3 and
psycopg_pool): ``pip install 'hexeract_lite[postgres]'``.

The table is the reference's PostgreSQL layout (:mod:`.postgres_schema`), so a table
written by the reference's Rust store is readable here and the other way round.

Time
----
As on SQLite, "now" comes from the store's ``clock`` (the application host's clock)
and is bound as a parameter; SQL never reads the server's clock, so ``time-machine``
and :class:`~hexeract_lite.clock.ManualClock` drive the store in tests.

**Clock skew.** Workers on several hosts each stamp leases and decide what is due with
their *own* clock. Hosts whose clocks disagree by ``d`` disagree by ``d`` on when an
occurrence is due and when a lease has expired: a host running ahead may reclaim an
occurrence whose lease another host still thinks it holds (a duplicate delivery, which
at-least-once permits but which costs work), and fencing then rejects the slower
worker's acknowledgement. Keep hosts NTP-synchronised and leases much longer than the
skew, or open the store with ``use_database_clock=True``: every instant the store
stamps or compares then comes from the server (``statement_timestamp()`` truncated to
milliseconds), one clock for every host. In that mode ``claim_due`` ignores the
``now`` it is given (it is still checked), and a frozen or manual client clock does
not reach the store.

Payloads
--------
``payload`` is ``JSONB``, which keeps the JSON *value*, not its text: object keys come
back in JSONB's order (shorter keys first, then bytewise), and numbers in PostgreSQL's
``numeric`` form (``1e16`` comes back as ``10000000000000000``). The store returns
``payload_json`` as the compact text of the stored value, so it equals what was
inserted whenever the payload has no object with several keys out of that order and no
exponent-form number. Compare decoded payloads when that matters. A string holding
NUL (``\\u0000``) cannot be stored in ``JSONB`` and is rejected with
:class:`~hexeract_lite.errors.InvalidMessage`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, LiteralString
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from .._time import to_utc_ms
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (
    DuplicateSchedule,
    InvalidArgument,
    InvalidConfiguration,
    InvalidMessage,
    NotReplayable,
    ScheduleNotFound,
    StoreError,
)
from ..message import ScheduledMessage
from ..snapshot import LeasedOccurrence, ScheduleSnapshot, ScheduleStatus
from .base import (
    SWEEP_ERROR,
    ScheduleStore,
    Settlement,
    SettlementKind,
    check_claim,
    check_export,
    check_limit,
    check_max_attempts,
    check_messages,
    check_records,
    check_retry_in,
    check_schedule_id,
    check_settlements,
)
from .postgres_schema import PENDING_PREDICATE, POSTGRES_COLUMNS, postgres_ddl
from .record import ScheduleRecord
from .schema import DEFAULT_TABLE, validate_table_name

__all__ = ["PostgresScheduleStore"]

_MAX_INT4 = 2**31 - 1
_ONE_MS = timedelta(milliseconds=1)
_DEFAULT_CONNECT_TIMEOUT = 10

_Conn = psycopg.Connection[TupleRow]

# -- connection strings ---------------------------------------------------------------


def _password_of(params: Mapping[str, Any]) -> str | None:
    value = params.get("password")
    return str(value) if value else None


def _display(params: Mapping[str, Any]) -> str:
    """A password-free URL naming the server, rebuilt from parsed connection params.

    Rebuilt rather than redacted, so that no spelling of a password that a pattern
    might miss can reach a message.
    """
    user = quote(str(params.get("user") or ""), safe="")
    if user and params.get("password"):
        user += ":***"
    host = quote(str(params.get("host") or params.get("hostaddr") or ""), safe=",:[]")
    port = str(params.get("port") or "")
    if port and "," not in host:
        host += f":{port}"
    dbname = quote(str(params.get("dbname") or ""), safe="")
    return f"postgresql://{user + '@' if user else ''}{host}/{dbname}"


# -- SQL ---------------------------------------------------------------------------

_NOT_TERMINAL: LiteralString = (
    "delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL"
)
_PENDING: LiteralString = PENDING_PREDICATE
_COLUMNS: tuple[LiteralString, ...] = (
    "schedule_id",
    "event_type",
    "payload",
    "trigger_kind",
    "cron_expr",
    "scheduled_for",
    "target_kind",
    "target_routing_key",
    "attempts",
    "max_attempts",
    "leased_until",
    "paused",
    "last_error",
    "created_at",
    "delivered_at",
    "cancelled_at",
    "dead_lettered_at",
)
assert tuple(name for name, _ in POSTGRES_COLUMNS) == _COLUMNS
_TEXT_COLUMNS: tuple[str, ...] = (
    "event_type",
    "trigger_kind",
    "cron_expr",
    "target_kind",
    "target_routing_key",
    "last_error",
)
"""The text columns (the payload is JSON, checked by the server)."""


def _select_list(alias: LiteralString | None = None) -> sql.Composable:
    """The columns in :class:`ScheduleRecord` order; the payload as JSON text."""
    items: list[sql.Composable] = []
    for name in _COLUMNS:
        ident = sql.Identifier(alias, name) if alias else sql.Identifier(name)
        items.append(sql.SQL("{}::text").format(ident) if name == "payload" else ident)
    return sql.SQL(", ").join(items)


def _canonical_json(text: str) -> str:
    return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else to_utc_ms(value, "timestamp")


def _record(row: Sequence[Any]) -> ScheduleRecord:
    scheduled_for = _utc(row[5])
    created_at = _utc(row[13])
    assert scheduled_for is not None and created_at is not None
    return ScheduleRecord(
        schedule_id=row[0],
        event_type=row[1],
        payload=_canonical_json(row[2]),
        trigger_kind=row[3],
        cron_expr=row[4],
        scheduled_for=scheduled_for,
        target_kind=row[6],
        target_routing_key=row[7],
        attempts=row[8],
        max_attempts=row[9],
        leased_until=_utc(row[10]),
        paused=bool(row[11]),
        last_error=row[12],
        created_at=created_at,
        delivered_at=_utc(row[14]),
        cancelled_at=_utc(row[15]),
        dead_lettered_at=_utc(row[16]),
    )


def _whole_ms(delta: timedelta) -> int:
    """A non-negative duration in whole milliseconds (rounded down)."""
    return delta // _ONE_MS


def _lock_key(table: str) -> int:
    """A signed 64-bit advisory-lock key for creating ``table``."""
    digest = hashlib.sha256(f"hexeract_lite:create:{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _Statements:
    """Every statement of one store, composed once with the table name and the clock."""

    def __init__(self, table: str, use_database_clock: bool) -> None:
        t = sql.Identifier(table)
        if use_database_clock:
            now: sql.Composable = sql.SQL("date_trunc('milliseconds', statement_timestamp())")
            plus_ms = sql.SQL("({} + {} * INTERVAL '1 millisecond')")
            until: sql.Composable = plus_ms.format(now, sql.Placeholder("lease_ms"))
            deadline: sql.Composable = plus_ms.format(now, sql.Placeholder("retry_ms"))
        else:
            now = sql.Placeholder("now")
            until = sql.Placeholder("until")
            deadline = sql.Placeholder("deadline")
        cols = _select_list()

        def q(text: LiteralString, **extra: sql.Composable) -> sql.Composed:
            return sql.SQL(text).format(
                t=t,
                now=now,
                cols=cols,
                not_terminal=sql.SQL(_NOT_TERMINAL),
                pending=sql.SQL(_PENDING),
                **extra,
            )

        self.insert = q(
            "INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
            " scheduled_for, target_kind, target_routing_key, attempts, max_attempts,"
            " leased_until, paused, last_error, created_at)"
            " SELECT u.id, u.event_type, u.payload::jsonb, u.trigger_kind, u.cron_expr,"
            " u.scheduled_for, u.target_kind, u.routing_key, 0, %(max_attempts)s,"
            " NULL, FALSE, NULL, {now}"
            " FROM unnest(%(ids)s::uuid[], %(event_types)s::text[], %(payloads)s::text[],"
            " %(trigger_kinds)s::text[], %(cron_exprs)s::text[],"
            " %(scheduled_fors)s::timestamptz[], %(target_kinds)s::text[],"
            " %(routing_keys)s::text[])"
            " AS u(id, event_type, payload, trigger_kind, cron_expr, scheduled_for,"
            " target_kind, routing_key)"
            " ON CONFLICT (schedule_id) DO NOTHING"
            " RETURNING schedule_id"
        )
        # The claim is one statement: lock due rows (skipping rows another claim holds),
        # stamp them, return them. RETURNING order is unspecified: the caller sorts.
        self.claim = q(
            "UPDATE {t} AS t SET attempts = t.attempts + 1, leased_until = {until}"
            " FROM (SELECT schedule_id FROM {t}"
            " WHERE scheduled_for <= {now} AND {pending} AND attempts < max_attempts"
            " AND (leased_until IS NULL OR leased_until <= {now})"
            " ORDER BY scheduled_for, schedule_id LIMIT %(batch_size)s"
            " FOR UPDATE SKIP LOCKED) AS c"
            " WHERE t.schedule_id = c.schedule_id"
            " RETURNING {returning}",
            until=until,
            returning=_select_list("t"),
        )
        fence: LiteralString = (
            " WHERE schedule_id = %(id)s AND leased_until = %(lease)s AND {not_terminal}"
        )
        self.mark_delivered = q("UPDATE {t} SET delivered_at = {now}, leased_until = NULL" + fence)
        self.reschedule = q(
            "UPDATE {t} SET scheduled_for = %(next)s, attempts = 0, leased_until = NULL,"
            " last_error = NULL" + fence
        )
        self.mark_failed = q(
            "UPDATE {t} SET leased_until = {deadline}, last_error = %(error)s" + fence,
            deadline=deadline,
        )
        self.mark_dead_lettered = q(
            "UPDATE {t} SET dead_lettered_at = {now}, last_error = %(error)s,"
            " leased_until = NULL" + fence
        )
        self.release = q(
            "UPDATE {t} SET attempts = GREATEST(attempts - 1, 0), leased_until = NULL" + fence
        )
        self.sweep = q(
            "UPDATE {t} SET dead_lettered_at = {now}, last_error = %(error)s,"
            " leased_until = NULL"
            " WHERE {pending} AND attempts >= max_attempts"
            " AND (leased_until IS NULL OR leased_until <= {now})"
        )
        # min over non-terminal, non-paused rows of max(scheduled_for, leased_until),
        # split so that each half reads a partial index instead of every pending row
        self.next_wakeup = q(
            "SELECT LEAST("
            "(SELECT scheduled_for FROM {t} WHERE {pending} AND leased_until IS NULL"
            " ORDER BY scheduled_for LIMIT 1),"
            "(SELECT min(GREATEST(scheduled_for, leased_until)) FROM {t}"
            " WHERE {pending} AND leased_until IS NOT NULL))"
        )
        self.exists = q("SELECT 1 FROM {t} WHERE schedule_id = %(id)s")
        self.existing = q("SELECT schedule_id FROM {t} WHERE schedule_id = ANY(%(ids)s::uuid[])")
        self.cancel = q(
            "UPDATE {t} SET cancelled_at = {now}, leased_until = NULL"
            " WHERE schedule_id = %(id)s AND {not_terminal}"
        )
        self.set_paused = q(
            "UPDATE {t} SET paused = %(paused)s"
            " WHERE schedule_id = %(id)s AND {not_terminal} AND paused <> %(paused)s"
        )
        self.lock_row = q("SELECT {cols}, {now} FROM {t} WHERE schedule_id = %(id)s FOR UPDATE")
        self.realign = q(
            "UPDATE {t} SET scheduled_for = %(next)s, attempts = 0, last_error = NULL,"
            " leased_until = NULL, paused = FALSE WHERE schedule_id = %(id)s"
        )
        self.unpause = q("UPDATE {t} SET paused = FALSE WHERE schedule_id = %(id)s")
        self.replay = q(
            "UPDATE {t} SET scheduled_for = %(now_value)s, attempts = 0, leased_until = NULL,"
            " last_error = NULL, paused = FALSE, dead_lettered_at = NULL"
            " WHERE schedule_id = %(id)s"
        )
        self.inspect = q("SELECT {cols} FROM {t} WHERE schedule_id = %(id)s")
        self.list_pending = q(
            "SELECT {cols} FROM {t} WHERE {not_terminal}"
            " ORDER BY scheduled_for, schedule_id LIMIT %(limit)s"
        )
        self.list_dead_letter = q(
            "SELECT {cols} FROM {t} WHERE dead_lettered_at IS NOT NULL"
            " ORDER BY dead_lettered_at DESC, schedule_id LIMIT %(limit)s"
        )
        # export pages walk the primary key; import inserts every column as given, the
        # arrays sent in binary (quoting their text form cost more than the INSERT)
        self.export_first = q("SELECT {cols} FROM {t} ORDER BY schedule_id LIMIT %(limit)s")
        self.export_after = q(
            "SELECT {cols} FROM {t} WHERE schedule_id > %(after)s"
            " ORDER BY schedule_id LIMIT %(limit)s"
        )
        self.import_rows = q(
            "INSERT INTO {t} ({names})"
            " SELECT u.schedule_id, u.event_type, u.payload::jsonb, u.trigger_kind,"
            " u.cron_expr, u.scheduled_for, u.target_kind, u.target_routing_key,"
            " u.attempts, u.max_attempts, u.leased_until, u.paused, u.last_error,"
            " u.created_at, u.delivered_at, u.cancelled_at, u.dead_lettered_at"
            " FROM unnest(%(schedule_id)b::uuid[], %(event_type)b::text[],"
            " %(payload)b::text[], %(trigger_kind)b::text[], %(cron_expr)b::text[],"
            " %(scheduled_for)b::timestamptz[], %(target_kind)b::text[],"
            " %(target_routing_key)b::text[], %(attempts)b::int4[], %(max_attempts)b::int4[],"
            " %(leased_until)b::timestamptz[], %(paused)b::bool[], %(last_error)b::text[],"
            " %(created_at)b::timestamptz[], %(delivered_at)b::timestamptz[],"
            " %(cancelled_at)b::timestamptz[], %(dead_lettered_at)b::timestamptz[])"
            " AS u({names})"
            " ON CONFLICT (schedule_id) DO NOTHING",
            names=sql.SQL(", ").join(sql.Identifier(name) for name in _COLUMNS),
        )


# -- the store -------------------------------------------------------------------


class PostgresScheduleStore(ScheduleStore):
    """Schedules in a PostgreSQL table, shared by every worker that can reach it.

    Open it with :meth:`open`; close it (or use it as a context manager) to release its
    connection pool. Safe to share between threads: each operation borrows a
    connection from the pool and runs as one statement or one short transaction.

    Errors from the driver or the server are raised as
    :class:`~hexeract_lite.errors.StoreError`, chained to the original; no message
    ever shows the connection's password.
    """

    def __init__(
        self,
        pool: ConnectionPool[_Conn],
        *,
        table: str,
        clock: Clock,
        use_database_clock: bool,
        where: str,
        password: str | None,
    ) -> None:
        """Use :meth:`open`: it checks the arguments and the table first."""
        super().__init__()
        self._pool = pool
        self._table = table
        self._clock = clock
        self._use_database_clock = use_database_clock
        self._where = where
        self._password = password
        self._sql = _Statements(table, use_database_clock)

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
    ) -> PostgresScheduleStore:
        """Connect to the server at ``conninfo`` and use ``table`` there.

        ``conninfo`` is a libpq URL (``postgresql://user:password@host:5432/db``,
        ``postgres://...``) or ``key=value`` string. Unless it sets
        ``connect_timeout``, connecting gives up after 10 seconds.

        ``create=True`` creates the table and its indexes when the table is missing
        (the DDL of :func:`~hexeract_lite.store.postgres_schema.postgres_ddl`, under an
        advisory lock so that workers starting together do not race); an existing
        table is used as it is. With ``create=False`` a missing table is a
        :class:`StoreError`. Either way a table lacking a column of the layout is a
        :class:`StoreError`.

        ``pool_min_size``/``pool_max_size`` bound the connection pool the store's
        threads share (``0 <= min <= max``, ``max >= 1``). ``use_database_clock``: see
        the module's notes on clock skew. ``table`` is validated before any SQL
        (:class:`InvalidConfiguration`).
        """
        validate_table_name(table)
        if not isinstance(clock, Clock):
            raise InvalidConfiguration(f"clock must have a now() method, got {clock!r}")
        for name, value in (("pool_min_size", pool_min_size), ("pool_max_size", pool_max_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidConfiguration(f"{name} must be an integer >= 0, got {value!r}")
        if pool_max_size < max(pool_min_size, 1):
            raise InvalidConfiguration(
                f"pool_max_size must be >= max(pool_min_size, 1), got {pool_max_size!r}"
                f" with pool_min_size={pool_min_size!r}"
            )
        if not isinstance(conninfo, str):
            raise InvalidConfiguration(f"conninfo must be a str, got {type(conninfo).__name__}")
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.Error:
            # libpq's message may quote the string, password included: neither it nor
            # the string is shown, and the driver's error is not chained
            raise StoreError(
                "invalid PostgreSQL connection string (not shown: it may hold a password);"
                " expected postgresql://user:password@host:port/dbname or key=value pairs"
            ) from None
        where = _display(params)
        password = _password_of(params)
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = _DEFAULT_CONNECT_TIMEOUT

        def fail(action: str, exc: psycopg.Error) -> StoreError:
            return StoreError(f"{action} {where}: {_scrub(str(exc), password)}")

        try:
            with psycopg.connect(conninfo, **kwargs) as conn:
                _prepare_table(conn, table, create=create, where=where)
        except psycopg.Error as exc:
            raise fail(f"cannot open table {table!r} at", exc) from exc

        pool: ConnectionPool[_Conn] = ConnectionPool(
            conninfo,
            kwargs=kwargs,
            min_size=pool_min_size,
            max_size=pool_max_size,
            open=False,
            name=f"hexeract_lite:{table}",
        )
        pool.open(wait=False)
        return cls(
            pool,
            table=table,
            clock=clock,
            use_database_clock=bool(use_database_clock),
            where=where,
            password=password,
        )

    # -- plumbing ----------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock the store reads "now" from (unused with ``use_database_clock``)."""
        return self._clock

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table

    @property
    def uses_database_clock(self) -> bool:
        """True when instants come from the server's clock, not :attr:`clock`."""
        return self._use_database_clock

    def __repr__(self) -> str:
        return f"PostgresScheduleStore({self._where!r}, table={self._table!r})"

    def _now(self) -> datetime:
        return to_utc_ms(self._clock.now(), "clock.now()")

    @contextmanager
    def _connection(self, action: str) -> Iterator[_Conn]:
        """A pooled connection; driver errors become :class:`StoreError`."""
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise StoreError(
                f"{action} failed on table {self._table!r} at {self._where}:"
                f" {_scrub(str(exc), self._password)}"
            ) from exc

    def _params(self, **values: Any) -> dict[str, Any]:
        """Statement parameters, with ``now`` from the store's clock when it is used."""
        if not self._use_database_clock:
            values.setdefault("now", self._now())
        return values

    def _fenced(self, statement: sql.Composed, action: str, params: dict[str, Any]) -> bool:
        lease = params["lease"]
        if not isinstance(lease, datetime) or lease.utcoffset() is None:
            return False  # no lease this store ever handed out
        with self._connection(action) as conn:
            return conn.execute(statement, params).rowcount == 1

    def _lock(self, conn: _Conn, schedule_id: uuid.UUID) -> tuple[ScheduleRecord, datetime]:
        """Lock a row for this transaction; its record and the statement's now."""
        row = conn.execute(self._sql.lock_row, self._params(id=schedule_id)).fetchone()
        if row is None:
            raise ScheduleNotFound(schedule_id)
        now = _utc(row[-1])
        assert now is not None
        return _record(row), now

    def _missing(self, conn: _Conn, schedule_id: uuid.UUID) -> bool:
        return conn.execute(self._sql.exists, {"id": schedule_id}).fetchone() is None

    # -- writing ---------------------------------------------------------------------

    def insert(self, message: ScheduledMessage, max_attempts: int) -> None:
        self.insert_many([message], max_attempts)

    def insert_many(self, messages: Sequence[ScheduledMessage], max_attempts: int) -> None:
        check_max_attempts(max_attempts)
        messages = check_messages(messages)
        if not messages:
            return
        if len({m.schedule_id for m in messages}) != len(messages):
            self._raise_first_duplicate(messages)
        params = self._params(
            max_attempts=max_attempts,
            ids=[m.schedule_id for m in messages],
            event_types=[m.event_type for m in messages],
            payloads=[m.payload_json for m in messages],
            trigger_kinds=[m.trigger.kind for m in messages],
            cron_exprs=[m.trigger.expression for m in messages],
            scheduled_fors=[m.scheduled_for for m in messages],
            target_kinds=[m.target.kind for m in messages],
            routing_keys=[m.target.routing_key for m in messages],
        )
        try:
            with self._connection("insert") as conn, conn.transaction():
                inserted = {row[0] for row in conn.execute(self._sql.insert, params)}
                if len(inserted) != len(messages):
                    for message in messages:
                        if message.schedule_id not in inserted:
                            raise DuplicateSchedule(message.schedule_id)
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.UntranslatableCharacter):
                raise InvalidMessage(
                    "payload cannot be stored in PostgreSQL's JSONB: it holds a string with"
                    f" a NUL character (\\u0000) or another character it rejects ({cause})"
                ) from cause
            raise
        self.changes.notify()

    def _raise_first_duplicate(self, messages: Sequence[ScheduledMessage]) -> None:
        """Raise for the first message, in order, whose id is stored or seen earlier in
        the batch (the in-memory store's rule). Only runs when the batch repeats an id."""
        ids = [m.schedule_id for m in messages]
        with self._connection("insert") as conn:
            stored = {row[0] for row in conn.execute(self._sql.existing, {"ids": ids})}
        seen: set[uuid.UUID] = set()
        for sid in ids:
            if sid in stored or sid in seen:
                raise DuplicateSchedule(sid)
            seen.add(sid)

    # -- worker ------------------------------------------------------------------------

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        """See :meth:`ScheduleStore.claim_due`. With ``use_database_clock`` the server's
        now is used and ``now`` is only checked."""
        now = check_claim(now, batch_size, lease)
        params = {
            "now": now,
            "until": to_utc_ms(now + lease, "now + lease"),
            "lease_ms": _whole_ms(lease),
            "batch_size": batch_size,
        }
        with self._connection("claim_due") as conn:
            rows = conn.execute(self._sql.claim, params).fetchall()
        records = sorted(
            (_record(row) for row in rows),
            key=lambda r: (r.scheduled_for, r.schedule_id.bytes),
        )
        return [record.leased() for record in records]

    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        check_schedule_id(schedule_id)
        params = self._params(id=schedule_id, lease=lease)
        return self._fenced(self._sql.mark_delivered, "mark_delivered", params)

    def reschedule(self, schedule_id: uuid.UUID, next: datetime, lease: datetime) -> bool:
        check_schedule_id(schedule_id)
        next = to_utc_ms(next, "next", InvalidArgument)
        params = self._params(id=schedule_id, lease=lease, next=next)
        done = self._fenced(self._sql.reschedule, "reschedule", params)
        if done:
            self.changes.notify()
        return done

    def mark_failed(
        self, schedule_id: uuid.UUID, retry_in: timedelta, error: str, lease: datetime
    ) -> bool:
        check_schedule_id(schedule_id)
        check_retry_in(retry_in)
        params = self._params(id=schedule_id, lease=lease, error=str(error))
        params["retry_ms"] = _whole_ms(retry_in)
        if not self._use_database_clock:
            params["deadline"] = to_utc_ms(params["now"] + retry_in, "retry deadline")
        done = self._fenced(self._sql.mark_failed, "mark_failed", params)
        if done:
            self.changes.notify()
        return done

    def mark_dead_lettered(self, schedule_id: uuid.UUID, error: str, lease: datetime) -> bool:
        check_schedule_id(schedule_id)
        params = self._params(id=schedule_id, lease=lease, error=str(error))
        return self._fenced(self._sql.mark_dead_lettered, "mark_dead_lettered", params)

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        """See :meth:`ScheduleStore.settle`: one transaction on one pooled connection,
        the single methods' fenced statements run in order inside it. An item whose
        lease is no aware datetime is answered False without SQL."""
        checked = check_settlements(outcomes)
        if not checked:
            return []
        base = self._params()  # one reading of the store's clock for the batch
        now = base.get("now")
        plan: list[tuple[int, sql.Composed, dict[str, Any]]] = []
        for index, item in enumerate(checked):
            lease = item.lease
            if not isinstance(lease, datetime) or lease.utcoffset() is None:
                continue  # no lease this store ever handed out
            params = {**base, "id": item.schedule_id, "lease": lease}
            kind = item.kind
            if kind is SettlementKind.DELIVERED:
                statement = self._sql.mark_delivered
            elif kind is SettlementKind.RESCHEDULE:
                params["next"] = item.next
                statement = self._sql.reschedule
            elif kind is SettlementKind.FAILED:
                assert item.retry_in is not None
                params["error"] = item.error
                params["retry_ms"] = _whole_ms(item.retry_in)
                if now is not None:
                    params["deadline"] = to_utc_ms(now + item.retry_in, "retry deadline")
                statement = self._sql.mark_failed
            elif kind is SettlementKind.RELEASED:
                statement = self._sql.release
            else:
                params["error"] = item.error
                statement = self._sql.mark_dead_lettered
            plan.append((index, statement, params))
        results = [False] * len(checked)
        if plan:
            with self._connection("settle") as conn, conn.transaction():
                for index, statement, params in plan:
                    results[index] = conn.execute(statement, params).rowcount == 1
        if any(ok and item.wakes for ok, item in zip(results, checked, strict=True)):
            self.changes.notify()
        return results

    def dead_letter_exhausted(self) -> int:
        with self._connection("dead_letter_exhausted") as conn:
            return conn.execute(self._sql.sweep, self._params(error=SWEEP_ERROR)).rowcount

    def next_wakeup(self) -> datetime | None:
        with self._connection("next_wakeup") as conn:
            row = conn.execute(self._sql.next_wakeup).fetchone()
        return None if row is None else _utc(row[0])

    # -- control -----------------------------------------------------------------------

    def cancel(self, schedule_id: uuid.UUID) -> bool:
        check_schedule_id(schedule_id)
        with self._connection("cancel") as conn:
            if conn.execute(self._sql.cancel, self._params(id=schedule_id)).rowcount == 1:
                return True
            if self._missing(conn, schedule_id):
                raise ScheduleNotFound(schedule_id)
            return False

    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        check_schedule_id(schedule_id)
        params = {"id": schedule_id, "paused": bool(paused)}
        with self._connection("set_paused") as conn:
            changed = conn.execute(self._sql.set_paused, params).rowcount == 1
            if not changed and self._missing(conn, schedule_id):
                raise ScheduleNotFound(schedule_id)
        if changed:
            self.changes.notify()
        return changed

    def resume(self, schedule_id: uuid.UUID, next: datetime | None = None) -> bool:
        check_schedule_id(schedule_id)
        if next is not None:
            next = to_utc_ms(next, "next", InvalidArgument)
        with self._connection("resume") as conn, conn.transaction():
            row, now = self._lock(conn, schedule_id)
            resumes, next = row.resume_plan(next, now)
            if not resumes:
                return False
            if next is not None:
                conn.execute(self._sql.realign, {"id": schedule_id, "next": next})
            else:
                conn.execute(self._sql.unpause, {"id": schedule_id})
        self.changes.notify()
        return True

    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        check_schedule_id(schedule_id)
        with self._connection("inspect") as conn:
            row = conn.execute(self._sql.inspect, {"id": schedule_id}).fetchone()
        return None if row is None else _record(row).snapshot()

    # -- admin -------------------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot]:
        check_limit(limit)
        with self._connection("list_pending") as conn:
            rows = conn.execute(self._sql.list_pending, {"limit": limit}).fetchall()
        return [_record(row).snapshot() for row in rows]

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot]:
        check_limit(limit)
        with self._connection("list_dead_letter") as conn:
            rows = conn.execute(self._sql.list_dead_letter, {"limit": limit}).fetchall()
        return [_record(row).snapshot() for row in rows]

    def replay(self, schedule_id: uuid.UUID) -> None:
        check_schedule_id(schedule_id)
        with self._connection("replay") as conn, conn.transaction():
            row, now = self._lock(conn, schedule_id)
            status = row.status()
            if status is not ScheduleStatus.DEAD_LETTERED:
                raise NotReplayable(schedule_id, status)
            conn.execute(self._sql.replay, {"id": schedule_id, "now_value": now})
        self.changes.notify()

    # -- copying rows between stores ---------------------------------------------------

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """See :meth:`ScheduleStore.export_records`. The payload comes back as the
        compact text of the stored JSONB value (see the module's notes on payloads)."""
        after = check_export(after, limit)
        with self._connection("export_records") as conn:
            if after is None:
                rows = conn.execute(self._sql.export_first, {"limit": limit}).fetchall()
            else:
                rows = conn.execute(
                    self._sql.export_after, {"after": after, "limit": limit}
                ).fetchall()
        return [_record(row) for row in rows]

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        """See :meth:`ScheduleStore.import_records`: one ``INSERT ... ON CONFLICT
        (schedule_id) DO NOTHING`` statement.

        What PostgreSQL cannot hold is refused and nothing of the batch is written:
        ``attempts``/``max_attempts`` above 2**31 - 1 (:class:`InvalidConfiguration`)
        and a NUL character in a text column (:class:`InvalidMessage`) before the
        statement is sent, naming the schedule; a NUL in a payload string (``\\u0000``,
        which ``JSONB`` rejects) by the server, as :class:`InvalidMessage` naming the
        likely schedules.
        """
        rows = check_records(records)
        if not rows:
            return 0
        for row in rows:
            for name in ("attempts", "max_attempts"):
                if getattr(row, name) > _MAX_INT4:
                    raise InvalidConfiguration(
                        f"record {row.schedule_id}: {name} must be at most {_MAX_INT4} on"
                        f" PostgreSQL, got {getattr(row, name)}"
                    )
            for name in _TEXT_COLUMNS:
                value = getattr(row, name)
                if value is not None and "\x00" in value:
                    raise InvalidMessage(
                        f"record {row.schedule_id}: {name} holds a NUL character, which"
                        " PostgreSQL text cannot store"
                    )
        params = {name: [getattr(row, name) for row in rows] for name in _COLUMNS}
        try:
            with self._connection("import_records") as conn:
                inserted = conn.execute(self._sql.import_rows, params).rowcount
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, psycopg.errors.UntranslatableCharacter):
                suspects = [str(row.schedule_id) for row in rows if "\\u0000" in row.payload]
                detail = " ".join(str(cause).split())  # the server's lines, on one
                raise InvalidMessage(
                    "a payload cannot be stored in PostgreSQL's JSONB: it holds a string with"
                    f" a NUL character (\\u0000) or another character it rejects ({detail});"
                    f" suspects: {', '.join(suspects) or 'none found'}; none of these"
                    f" {len(rows)} records was imported"
                ) from cause
            raise
        if inserted:
            self.changes.notify()
        return inserted

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool; later calls raise :class:`StoreError`. Idempotent."""
        self._pool.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._pool.closed

    def __enter__(self) -> PostgresScheduleStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- helpers ---------------------------------------------------------------------------


def _scrub(message: str, password: str | None) -> str:
    """Remove the password from a driver message (libpq does not put it there, but a
    message is no place to find out)."""
    if password:
        message = message.replace(password, "***")
    return message.strip()


def _prepare_table(conn: _Conn, table: str, *, create: bool, where: str) -> None:
    """Check that ``table`` exists with every column of the layout; create it if asked."""
    ident = sql.Identifier(table).as_string(conn)
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [ident]).fetchone()
    if not (exists and exists[0]):
        if not create:
            raise StoreError(
                f"no table {table!r} at {where}: create it with"
                " `hexeract scheduler schema --dialect postgres` or open with create=True"
            )
        with conn.transaction():
            # workers starting together must not race on CREATE TABLE IF NOT EXISTS
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(table)])
            conn.execute(postgres_ddl(table).encode())
    found = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attnum > 0 AND NOT attisdropped",
        [ident],
    ).fetchall()
    missing = [name for name in _COLUMNS if name not in {row[0] for row in found}]
    if missing:
        raise StoreError(
            f"table {table!r} at {where} is not a hexeract scheduler table:"
            f" it lacks the column(s) {', '.join(missing)}"
        )
