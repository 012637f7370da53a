"""Review round 4c: defects found by exercising the README's quick start, storage,
delivery contract and transactional sections from outside, on every store."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
    TransactionalSink,
)
from hexeract_lite.errors import InvalidArgument, InvalidConfiguration
from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests import pg
from tests.conftest import STORE_FACTORIES

NOT_BOOLS = ["no", "false", 0, 1, None]


@pytest.mark.parametrize("flag", ["create", "readonly"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_sqlite_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    tmp_path: Path, flag: str, value: object
) -> None:
    # create="no" (a string read from a setting) was truthy: it created the file.
    db = tmp_path / "s.db"
    with pytest.raises(InvalidConfiguration, match=rf"{flag} must be True or False, got {value!r}"):
        SqliteScheduleStore.open(db, **{flag: value})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["create", "use_database_clock", "listen"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_postgres_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    flag: str, value: object
) -> None:
    # create="no" created the table; use_database_clock="no" turned the server's clock on.
    import psycopg

    from hexeract_lite.store.postgres import PostgresScheduleStore

    url = pg.require_server()
    table = pg.unique_table("r4c")
    try:
        with pytest.raises(
            InvalidConfiguration, match=rf"{flag} must be True or False, got {value!r}"
        ):
            PostgresScheduleStore.open(url, table=table, **{flag: value})  # type: ignore[arg-type]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass(%s)", [table]).fetchone() == (None,)
    finally:
        pg.drop_table(url, table)


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


@pytest.mark.parametrize("method", ["insert", "insert_many"])
def test_the_memory_store_refuses_a_connection_on_insert_as_on_ensure(method: str) -> None:
    # Code written against the SQLite store, run on the memory store in tests, got a bare
    # TypeError (unexpected keyword argument) from insert, and InvalidArgument from ensure.
    store = InMemoryScheduleStore()
    message = _message()
    arg: object = message if method == "insert" else [message]
    with pytest.raises(InvalidArgument, match="cannot write inside an application's transaction"):
        getattr(store, method)(arg, 3, connection=object())
    assert store.inspect(message.schedule_id) is None
    getattr(store, method)(arg, 3, connection=None)  # None: the usual insert
    assert store.inspect(message.schedule_id) is not None


def test_a_postgres_handler_running_short_statements_is_ended_at_the_deadline() -> None:
    # statement_timeout and idle_in_transaction_session_timeout never fire for a handler
    # that keeps running short statements: its transaction (and the scheduler row's lock)
    # outlived dispatch_timeout, and the worker's own failure record then waited out the
    # lock timeout and raised StoreError from run_once.
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
            for i in range(50):  # 10 s of 0.2 s statements, well past the 1 s timeout
                try:
                    conn.execute("SELECT pg_sleep(0.2)")
                except psycopg.Error as exc:
                    failed.append(exc)
                    raise
                ran.append(i)

        config = SchedulerWorkerConfig(dispatch_timeout=timedelta(seconds=1), jitter=False)
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


def test_the_transactional_example_runs_twice_on_one_database(tmp_path: Path) -> None:
    # Its docstring offers --db PATH; a second run on the same file reported
    # "FAILED: orders [...] do not match the committed ones" (it checked every order and
    # every pending schedule in the file, not the ones it made).
    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "orders.db"
    for run in (1, 2):
        result = subprocess.run(
            [sys.executable, str(root / "examples" / "07_transactional.py"), "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=root,
            check=False,
        )
        assert result.returncode == 0, f"run {run}: {result.stdout}{result.stderr}"
        assert "3 orders committed, 3 reminders scheduled" in result.stdout
        for item in ("book", "lamp", "chair"):
            assert f"{item}: 1 reminder(s) sent" in result.stdout


def test_the_reminder_demo_leaves_the_applications_schedules_alone(tmp_path: Path) -> None:
    # scripts/demo runs it on the default database, where the README's quick start keeps
    # its schedules: its worker claimed them too, and its bus sink, refusing their
    # targets, spent their attempts (two demo runs dead-lettered the quick start's
    # heartbeat). It now keeps to a table of its own.
    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "scheduler.db"
    app = _message()
    with SqliteScheduleStore.open(db) as store:
        store.insert(app, 5)
    example = str(root / "examples" / "06_scheduled_reminder.py")
    result = subprocess.run(
        [sys.executable, example, "--db", str(db), "--timeout", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        check=False,
    )
    assert "BusSink only publishes bus targets" not in result.stderr
    with SqliteScheduleStore.open(db, readonly=True) as store:
        snap = store.inspect(app.schedule_id)
    assert snap is not None
    assert (snap.attempts, snap.last_error, snap.status.value) == (0, None, "pending")


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_an_app_connection_whose_temp_table_hides_the_stores_is_refused(
    tmp_path: Path, driver: str
) -> None:
    # A TEMP table of the store's name on the caller's connection took the insert: it
    # "succeeded", and the schedule never existed in the store (the PostgreSQL store
    # already refuses a connection that sees another table of that name).
    db = tmp_path / "app.db"
    with SqliteScheduleStore.open(db, driver=driver) as store:
        conn: Any = sqlite3.connect(db) if driver == "sqlite3" else apsw.Connection(str(db))
        conn.execute(
            "CREATE TEMP TABLE scheduled_messages AS SELECT * FROM main.scheduled_messages WHERE 0"
        )
        if driver == "apsw":
            conn.execute("BEGIN")
        message = _message()
        with pytest.raises(InvalidArgument, match="TEMP table"):
            store.insert(message, 3, connection=conn)
        named = ScheduledMessage.delay(
            Target.outbox(), datetime.now(UTC), "a.b", None, name="app.x"
        )
        with pytest.raises(InvalidArgument, match="TEMP table"):
            store.ensure(named, 3, connection=conn)
        if driver == "apsw":
            conn.execute("COMMIT")
        else:
            conn.commit()
        assert conn.execute("SELECT count(*) FROM temp.scheduled_messages").fetchall() == [(0,)]
        conn.close()
        assert store.inspect(message.schedule_id) is None


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
    # The same database and table, reached through the unix socket by one side and TCP by
    # the other, was refused as "on another database" (the identity compared the
    # server's address, NULL over a socket).
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


@pytest.mark.parametrize("store_name", sorted(STORE_FACTORIES))
@pytest.mark.parametrize("lease", [timedelta(microseconds=1), timedelta(microseconds=999)])
def test_a_lease_shorter_than_the_stored_millisecond_is_refused(
    store_name: str, lease: timedelta, tmp_path: Path
) -> None:
    # now + lease truncated to the millisecond was now itself: the lease had run out at the
    # instant of the claim, so a second claim at that instant handed the same occurrence
    # out again, with the same fencing token.
    store = STORE_FACTORIES[store_name](tmp_path)
    try:
        now = datetime(2026, 3, 1, 12, tzinfo=UTC)
        message = ScheduledMessage.delay(Target.outbox(), now, "a.b", None)
        store.insert(message, 5)
        with pytest.raises(InvalidConfiguration, match="lease must be at least 1 ms"):
            store.claim_due(now, 1, lease)
        snap = store.inspect(message.schedule_id)
        assert snap is not None and (snap.attempts, snap.leased_until) == (0, None)
        [claimed] = store.claim_due(now, 1, timedelta(milliseconds=1))
        assert claimed.leased_until == now + timedelta(milliseconds=1)
        assert store.claim_due(now, 1, timedelta(milliseconds=1)) == []
    finally:
        store.close()


@pytest.mark.parametrize("name", ["order", "group", "select", "index", "table"])
def test_a_table_name_sql_reads_as_a_keyword_is_refused_before_any_sql(
    tmp_path: Path, name: str
) -> None:
    # It passed the name check, then SQLite failed with "cannot open the database ...:
    # SQLError: near 'order': syntax error" (the file was fine, the name was not). The
    # SQLite statements name the table unquoted, as the reference's do (PostgreSQL's quote
    # it and take such a name).
    with pytest.raises(InvalidConfiguration, match=rf"invalid table name '{name}' .*keyword"):
        SqliteScheduleStore.open(tmp_path / "s.db", table=name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["others", "key", "plan", "action", "user"])
def test_a_keyword_sqlite_takes_as_a_name_stays_a_valid_table_name(
    tmp_path: Path, name: str
) -> None:
    with SqliteScheduleStore.open(tmp_path / "s.db", table=name) as store:
        message = _message()
        store.insert(message, 3)
        later = datetime.now(UTC) + timedelta(seconds=1)
        assert len(store.claim_due(later, 5, timedelta(seconds=5))) == 1


def test_a_worker_config_refuses_a_lease_under_a_millisecond() -> None:
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.worker import SchedulerWorkerConfig

    with pytest.raises(InvalidConfiguration, match="lease must be at least 1 ms"):
        SchedulerWorkerConfig(
            batch_size=1,
            dispatch_timeout=timedelta(microseconds=100),
            lease=timedelta(microseconds=500),
        )
    assert SchedulerWorkerConfig(
        batch_size=1, dispatch_timeout=timedelta(microseconds=100), lease=timedelta(milliseconds=1)
    ).lease == timedelta(milliseconds=1)


def test_a_transactional_handler_that_cannot_take_message_and_connection_is_refused() -> None:
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.transactional import TransactionalSink

    for bad in (lambda message: None, lambda: None, lambda a, b, c: None):
        with pytest.raises(InvalidConfiguration, match="handler\\(message, connection\\)"):
            TransactionalSink(bad)  # type: ignore[arg-type]
    for good in (lambda m, c: None, lambda m, c, extra=1: None, lambda *args: None, print):
        TransactionalSink(good)
