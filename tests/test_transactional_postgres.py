"""The transactional API on PostgreSQL: enqueue inside the caller's psycopg transaction, and the
transactional sink whose handler's writes commit with the acknowledgement."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite import (
    DuplicateSchedule,
    InvalidArgument,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
)
from hexeract_lite.snapshot import ScheduleStatus
from hexeract_lite.transactional import TransactionalSink

from . import pg

psycopg = pytest.importorskip("psycopg")

from hexeract_lite.store.postgres import PostgresScheduleStore  # noqa: E402
from hexeract_lite.store.postgres.notify import channel_name  # noqa: E402

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = SchedulerWorkerConfig(
    lease=timedelta(seconds=60),
    dispatch_timeout=timedelta(seconds=2),
    retry_base_delay=timedelta(seconds=1),
)


def due(n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), T0 - timedelta(seconds=1), "remind", {"n": n})


@pytest.fixture
def pg_url() -> str:
    return pg.require_server()


@pytest.fixture
def table(pg_url: str) -> Iterator[str]:
    name = pg.unique_table()
    effects = f"{name}_effects"
    yield name
    pg.drop_table(pg_url, name)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {effects}")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(pg_url: str, table: str, clock: ManualClock) -> Iterator[PostgresScheduleStore]:
    with PostgresScheduleStore.open(pg_url, table=table, clock=clock) as s:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                f"CREATE TABLE {table}_effects (occurrence text PRIMARY KEY,"
                " n integer CHECK (n >= 0))"
            )
        yield s


def count(url: str, sql: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


def deliveries(store: PostgresScheduleStore) -> list[ScheduledMessage]:
    seen: list[ScheduledMessage] = []
    SchedulerWorker(store, seen.append, CONFIG).run_once()
    return seen


def listener(url: str, table: str) -> Any:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f"LISTEN {channel_name(table)}")
    return conn


SENTINEL = "test:sentinel"


def heard(conn: Any, table: str) -> list[str]:
    """Every notification committed so far on the table's channel. PostgreSQL delivers
    notifications in commit order, so a sentinel the listener sends itself now comes
    after all of them: what came before it is everything, without waiting out a window
    for what does not come."""
    conn.execute("SELECT pg_notify(%s, %s)", [channel_name(table), SENTINEL])
    payloads: list[str] = []
    for n in conn.notifies(timeout=10):
        if n.payload == SENTINEL:
            return payloads
        payloads.append(n.payload)
    raise AssertionError(f"the sentinel did not come back within 10 s; heard {payloads}")


@pytest.mark.parametrize("style", ["transaction block", "implicit", "Transaction object"])
def test_commit_delivers_once_and_wakes(
    store: PostgresScheduleStore, pg_url: str, table: str, style: str
) -> None:
    ears = listener(pg_url, table)
    message = due()
    conn = psycopg.connect(pg_url, autocommit=style != "implicit")
    if style == "implicit":
        conn.execute("SELECT 1")  # a transaction is open (not autocommit)
        store.insert(message, 3, connection=conn)
        assert store.inspect(message.schedule_id) is None
        conn.commit()
    else:
        with conn.transaction() as tx:
            store.insert(message, 3, connection=tx if style == "Transaction object" else conn)
            assert store.inspect(message.schedule_id) is None
            assert heard(ears, table) == []  # nothing before the commit
    assert [n for n in heard(ears, table) if n.startswith("tx:")]
    assert [m.schedule_id for m in deliveries(store)] == [message.schedule_id]
    assert deliveries(store) == []
    conn.close()
    ears.close()


def test_rollback_leaves_nothing_and_no_wake_up(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    ears = listener(pg_url, table)
    conn = psycopg.connect(pg_url, autocommit=True)
    with pytest.raises(RuntimeError), conn.transaction():
        store.insert_many([due(1), due(2)], 3, connection=conn)
        raise RuntimeError("the order failed")
    assert heard(ears, table) == []
    assert count(pg_url, f"SELECT count(*) FROM {table}") == 0
    assert deliveries(store) == []
    conn.close()
    ears.close()


def test_duplicate_undoes_the_batch_only(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    stored = due(0)
    store.insert(stored, 3)
    conn = psycopg.connect(pg_url, autocommit=True)
    fresh = due(1)
    with conn.transaction():
        conn.execute(f"INSERT INTO {table}_effects VALUES ('order', 1)")
        with pytest.raises(DuplicateSchedule):
            store.insert_many([fresh, stored], 3, connection=conn)
        with pytest.raises(DuplicateSchedule):
            store.insert_many([fresh, fresh], 3, connection=conn)
    assert count(pg_url, f"SELECT count(*) FROM {table}_effects") == 1
    assert count(pg_url, f"SELECT count(*) FROM {table}") == 1
    conn.close()


def test_bad_connections_are_refused(store: PostgresScheduleStore, pg_url: str, table: str) -> None:
    closed = psycopg.connect(pg_url)
    closed.close()
    auto = psycopg.connect(pg_url, autocommit=True)
    failed = psycopg.connect(pg_url)
    with pytest.raises(psycopg.Error):
        failed.execute("SELECT 1/0")
    readonly = psycopg.connect(pg_url)
    readonly.execute("SET TRANSACTION READ ONLY")
    other_db = psycopg.connect(pg_url)
    other_db.execute("CREATE TEMP TABLE IF NOT EXISTS x (a int)")
    cases = [
        (closed, "closed"),
        (auto, "autocommit mode"),
        (failed, "failed transaction"),
        (readonly, "read-only"),
        (object(), "must be a psycopg.Connection"),
    ]
    for conn, words in cases:
        with pytest.raises(InvalidArgument, match=words):
            store.insert(due(), 3, connection=conn)
    # another database (the server's postgres database): the table is not there
    other = psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres")
    other.execute("SELECT 1")
    with pytest.raises(InvalidArgument, match="another database"):
        store.insert(due(), 3, connection=other)
    assert count(pg_url, f"SELECT count(*) FROM {table}") == 0
    for c in (auto, failed, readonly, other_db, other):
        c.close()


def effect_for(table: str) -> Any:
    def effect(message: ScheduledMessage, conn: Any) -> None:
        conn.execute(
            f"INSERT INTO {table}_effects (occurrence, n) VALUES (%s, %s)",
            [str(message.occurrence_id()), message.payload["n"]],
        )

    return effect


def test_sink_commits_effect_and_ack_together(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    messages = [due(n) for n in range(3)]
    store.insert_many(messages, 3)
    report = SchedulerWorker(store, TransactionalSink(effect_for(table)), CONFIG).run_once()
    assert (report.claimed, report.delivered) == (3, 3)
    assert count(pg_url, f"SELECT count(*) FROM {table}_effects") == 3
    for m in messages:
        snap = store.inspect(m.schedule_id)
        assert snap is not None and snap.status is ScheduleStatus.DELIVERED


@pytest.mark.parametrize("how", ["raises", "violates", "sleeps", "runs SQL"])
def test_failing_or_slow_handler_rolls_back_both(
    store: PostgresScheduleStore, pg_url: str, table: str, how: str
) -> None:
    message = due(1)
    store.insert(message, 3)
    effect = effect_for(table)

    def handler(msg: ScheduledMessage, conn: Any) -> None:
        effect(msg, conn)
        if how == "raises":
            raise RuntimeError("handler broke")
        if how == "violates":
            conn.execute(f"INSERT INTO {table}_effects VALUES ('x', -1)")
        if how == "sleeps":
            time.sleep(0.6)
        if how == "runs SQL":
            conn.execute("SELECT pg_sleep(2)")

    config = SchedulerWorkerConfig(
        lease=timedelta(seconds=60), dispatch_timeout=timedelta(seconds=0.4)
    )
    report = SchedulerWorker(store, TransactionalSink(handler), config).run_once()
    assert report.retried == 1
    assert count(pg_url, f"SELECT count(*) FROM {table}_effects") == 0
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.last_error is not None
    expected = {"raises": "handler broke", "violates": "CheckViolation"}.get(how, "Timeout")
    assert expected in snap.last_error


def test_lost_lease_skips_the_handler(store: PostgresScheduleStore, clock: ManualClock) -> None:
    store.insert(due(1), 3)
    [occ] = store.claim_due(clock.now(), 1, timedelta(seconds=10))
    clock.advance(timedelta(seconds=11))
    store.claim_due(clock.now(), 1, timedelta(seconds=10))
    called: list[object] = []
    sink = TransactionalSink(lambda m, c: called.append(m))
    policy = SchedulerWorker(store, sink, CONFIG).retry_policy
    bound = sink.bind(store, clock, policy, 1.0)
    result = bound.dispatch_occurrence(occ)
    assert getattr(result, "applied", None) is False
    assert called == []
    bound.close()


@pytest.mark.parametrize("statement", ["ROLLBACK", "COMMIT", "END", "ABORT"])
def test_a_handler_that_ends_the_transaction_with_sql_fails_and_keeps_no_later_write(
    store: PostgresScheduleStore, pg_url: str, table: str, statement: str
) -> None:
    """psycopg refuses commit()/rollback() inside the sink's transaction, but not the SQL:
    the sink notices the transaction changed under the handler and fails the dispatch,
    rolling back what the handler wrote after it (no attempt autocommits its effect
    row after a ROLLBACK)."""
    message = due(1)
    store.insert(message, 3)
    effect = effect_for(table)

    def handler(msg: ScheduledMessage, conn: Any) -> None:
        conn.execute(statement)
        effect(msg, conn)

    report = SchedulerWorker(store, TransactionalSink(handler), CONFIG).run_once()
    assert report.delivered == 0
    assert count(pg_url, f"SELECT count(*) FROM {table}_effects") == 0
    snap = store.inspect(message.schedule_id)
    assert snap is not None
    if statement in ("ROLLBACK", "ABORT"):  # the acknowledgement was undone with it
        assert snap.status is ScheduleStatus.PENDING
        assert snap.last_error is not None and "ended the sink's transaction" in snap.last_error
    else:  # the handler committed the acknowledgement itself, before any effect
        assert snap.status is ScheduleStatus.DELIVERED


def test_ensure_through_a_psycopg_connection_with_dict_rows() -> None:
    """ensure(connection=) works through a psycopg connection with ``row_factory=dict_row``
    (psycopg's usual dict rows) and leaves its row factory as set."""
    psycopg = pytest.importorskip("psycopg")
    from psycopg.rows import dict_row

    from hexeract_lite.store.postgres import PostgresScheduleStore

    from . import pg

    url = pg.require_server()
    table = pg.unique_table()
    store = PostgresScheduleStore.open(url, table=table, clock=ManualClock(T0))
    try:
        at = T0 + timedelta(hours=1)
        name = "app.dict"
        for payload, expected in (({}, "created"), ({"v": 2}, "updated"), ({"v": 2}, "unchanged")):
            message = ScheduledMessage.delay(Target.mediator(), at, "e", payload, name=name)
            with psycopg.connect(url, row_factory=dict_row) as conn:
                assert store.ensure(message, 3, connection=conn).value == expected
                assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}  # left as set
        listed = [s.payload_json for s in store.list_named("app.")]
        assert listed == ['{"v":2}'] or listed == ['{"v": 2}']
    finally:
        store.close()
        pg.drop_table(url, table)


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


def test_a_postgres_handler_running_short_statements_is_ended_at_the_deadline() -> None:
    """A handler that keeps running short statements (which statement_timeout and
    idle_in_transaction_session_timeout never end) is still ended at dispatch_timeout: its
    writes roll back, the attempt is a TimeoutError, and run_once returns."""
    import psycopg

    store = pg.open_scratch_store()
    try:
        message = _message()
        store.insert(message, 3)
        effect = f"{store.table}_effect"
        url = pg.require_server()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {effect} (v int)")
        ran: list[int] = []
        failed: list[BaseException] = []

        def handler(msg: ScheduledMessage, conn: psycopg.Connection[object]) -> None:
            conn.execute(f"INSERT INTO {effect} VALUES (1)")
            for i in range(50):  # 10 s of 0.2 s statements, well past the 0.5 s timeout
                try:
                    conn.execute("SELECT pg_sleep(0.2)")
                except psycopg.Error as exc:
                    failed.append(exc)
                    raise
                ran.append(i)

        config = SchedulerWorkerConfig(dispatch_timeout=timedelta(seconds=0.5), jitter=False)
        worker = SchedulerWorker(store, TransactionalSink(handler), config)
        try:
            report = worker.run_once()
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(f"SELECT count(*) FROM {effect}").fetchone()
                conn.execute(f"DROP TABLE {effect}")
        assert failed, "the handler's transaction was not ended at the deadline"
        assert len(ran) < 50
        assert report.retried == 1
        assert rows == (0,)
        snap = store.inspect(message.schedule_id)
        assert snap is not None and snap.attempts == 1
        assert snap.last_error is not None and snap.last_error.startswith("TimeoutError")
    finally:
        store.close()


def _unix_socket_conninfo(url: str) -> str:
    """The test server reached through its unix socket (scripts/pg-test-server's layout),
    or a skip when there is none."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(url)
    folder = Path(f"/tmp/hexeract-pg-{params.get('port', 5432)}/run")
    if not (folder / f".s.PGSQL.{params.get('port', 5432)}").exists():
        pytest.skip(f"no unix socket of the test server in {folder}")
    params["host"] = str(folder)
    return psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]


@pytest.mark.parametrize("store_via", ["tcp", "unix socket"])
def test_an_app_connection_to_the_same_database_by_another_route_is_accepted(
    store_via: str,
) -> None:
    """The same database and table, reached through the unix socket by one side and over TCP by
    the other, is accepted as the store's."""
    import psycopg

    from hexeract_lite.store.postgres import PostgresScheduleStore

    url = pg.require_server()
    socket = _unix_socket_conninfo(url)
    store_url, app_url = (url, socket) if store_via == "tcp" else (socket, url)
    table = pg.unique_table("r4c")
    store = PostgresScheduleStore.open(store_url, table=table)
    try:
        message = _message()
        with psycopg.connect(app_url) as conn:
            store.insert(message, 3, connection=conn)
        assert store.inspect(message.schedule_id) is not None
    finally:
        store.close()
        pg.drop_table(url, table)


@pytest.mark.parametrize("kind", ["TABLE", "VIEW"])
def test_handler_temp_table_named_like_the_store_table_is_refused(
    store: PostgresScheduleStore, pg_url: str, table: str, clock: ManualClock, kind: str
) -> None:
    """A TEMP table of the store's name, made by a handler on the sink's session, would
    hide the store's table from every later acknowledgement: the dispatch that makes
    one fails, naming it, and the next ones deliver."""
    first, second = due(1), due(2)
    store.insert(first, 3)
    effect = effect_for(table)
    calls: list[str] = []

    def handler(message: ScheduledMessage, conn: Any) -> None:
        calls.append(str(message.schedule_id))
        if len(calls) == 1:
            body = "(x integer)" if kind == "TABLE" else "AS SELECT 1 AS x"
            conn.execute(f'CREATE TEMP {kind} "{table}" {body}')
        effect(message, conn)

    worker = SchedulerWorker(store, TransactionalSink(handler), CONFIG)
    report = worker.run_once()
    assert (report.claimed, report.retried) == (1, 1)
    snap = store.inspect(first.schedule_id)
    assert snap is not None and snap.last_error is not None
    assert "TEMP" in snap.last_error and table in snap.last_error
    store.insert(second, 3)
    clock.advance(timedelta(seconds=5))
    report = worker.run_once()
    assert (report.claimed, report.delivered) == (2, 2)
    assert count(pg_url, f"SELECT count(*) FROM {table}_effects") == 2
