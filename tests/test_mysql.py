"""The MySQL/MariaDB store on a real server: its schema and ladder, its URLs, bounded
waits, malformed rows, transactions shared with the application, and the state machine
against the in-memory reference. (The contract suite runs it through conftest.)"""

from __future__ import annotations

import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from hexeract_lite import (
    DuplicateSchedule,
    InvalidArgument,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    ScheduleStore,
    StoreError,
    Target,
    open_store,
)
from hexeract_lite.connect import parse_conn
from hexeract_lite.snapshot import MalformedSchedule
from hexeract_lite.transactional import TransactionalSink

from . import mysql
from .conftest import examples
from .test_state_machine import StoresAgree

pymysql = pytest.importorskip("pymysql", reason="the mysql extra is not installed")

from hexeract_lite.store.columns import POLICY_COLUMNS  # noqa: E402
from hexeract_lite.store.mysql import MysqlScheduleStore  # noqa: E402
from hexeract_lite.store.mysql.schema import SCHEMA_VERSION, mysql_ddl, reference_ddl  # noqa: E402

pytestmark = pytest.mark.mysql

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
CONFIG = SchedulerWorkerConfig(
    lease=timedelta(seconds=60),
    dispatch_timeout=timedelta(seconds=2),
    retry_base_delay=timedelta(seconds=1),
)


@pytest.fixture
def url() -> str:
    return mysql.require_server()


@pytest.fixture
def table(url: str) -> Iterator[str]:
    name = mysql.unique_table("my")
    yield name
    mysql.drop_table(url, name)
    conn = mysql.raw_connect(url)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {name}_effects")
    conn.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(url: str, table: str, clock: ManualClock) -> Iterator[MysqlScheduleStore]:
    with MysqlScheduleStore.open(url, table=table, clock=clock) as s:
        yield s


def due(n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), T0 - timedelta(seconds=1), "remind", {"n": n})


def sql(url: str, statement: str, args: Any = None) -> list[Any]:
    conn = mysql.raw_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, args)
            return list(cur.fetchall())
    finally:
        conn.close()


# -- URLs, passwords, the extra -------------------------------------------------------


def test_mysql_and_mariadb_urls_open_the_mysql_store(url: str, table: str) -> None:
    assert parse_conn("mysql://u:p@h/db").kind == "mysql"
    assert parse_conn("mariadb://u:p@h/db").kind == "mysql"
    with open_store(url, table=table) as store:
        assert isinstance(store, MysqlScheduleStore)
        assert "hexeract-test-only" not in repr(store)


def test_a_wrong_password_is_never_shown(url: str) -> None:
    bad = url.replace("hexeract-test-only", "s3cret-pw")
    with pytest.raises(StoreError) as info:
        open_store(bad, connect_timeout=timedelta(seconds=3))
    assert "s3cret-pw" not in str(info.value) and info.value.__cause__ is None


def test_without_pymysql_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for name in [n for n in sys.modules if n.startswith(("pymysql", "hexeract_lite.store.mysql."))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pymysql", None)
    with pytest.raises(StoreError, match=r"'mysql' extra"):
        open_store("mysql://u:secret@127.0.0.1:1/db")


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("mysql://u:pw@h", "names no database"),
        ("mysql://u:pw@h/db?sslmode=on", "unknown parameter 'sslmode'"),
        ("mysql://u:pw@h/db?ssl-mode=on", "unknown ssl-mode 'on'"),
        ("mysql://u:pw@h/db?ssl-mode=verify-identity", "verify-identity needs ssl-ca"),
        ("mysql://u:pw@h/db?ssl-mode=required&ssl-ca=/etc/hosts", "ssl-ca goes with"),
        ("mysql://u:pw@h/db?ssl-ca=/etc/hosts", "not 'preferred'"),
        ("mysql://u:pw@h/db?ssl-mode=verify-ca&ssl-ca=/no/such/ca.pem", "is not a file"),
    ],
)
def test_bad_urls_are_refused_naming_the_fault(bad: str, needle: str) -> None:
    with pytest.raises(Exception, match=needle) as info:
        MysqlScheduleStore.open(bad)
    assert "pw" not in str(info.value).replace("pw@", "")


def test_ssl_mode_maps_onto_pymysql_s_tls_arguments(tmp_path: Path) -> None:
    import ssl

    from hexeract_lite.store.mysql.connections import url_params

    ca = tmp_path / "ca.pem"
    ca.write_text("")
    base = "mysql://u:pw@h/db"
    tls_keys = ("ssl", "ssl_disabled", "ssl_ca", "ssl_verify_cert", "ssl_verify_identity")

    def tls(query: str) -> dict[str, Any]:
        return {k: v for k, v in url_params(base + query).items() if k in tls_keys}

    assert tls("") == tls("?ssl-mode=preferred") == {}
    assert tls("?ssl-mode=DISABLED") == {"ssl_disabled": True}
    assert tls(f"?ssl-mode=verify-ca&ssl-ca={ca}") == {"ssl_ca": str(ca), "ssl_verify_cert": True}
    assert tls(f"?ssl-mode=verify-identity&ssl-ca={ca}") == {
        "ssl_ca": str(ca),
        "ssl_verify_cert": True,
        "ssl_verify_identity": True,
    }
    context = tls("?ssl-mode=required")["ssl"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_NONE and not context.check_hostname


def _with_ssl_mode(url: str, mode: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "ssl-mode"]
    return parts._replace(query=urllib.parse.urlencode([*query, ("ssl-mode", mode)])).geturl()


def test_ssl_mode_disabled_connects_without_building_a_tls_context(
    url: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    def no_tls(*args: object, **kwargs: object) -> ssl.SSLContext:
        raise AssertionError("a TLS context was built")

    monkeypatch.setattr(ssl, "create_default_context", no_tls)
    with MysqlScheduleStore.open(_with_ssl_mode(url, "disabled"), table=table) as store:
        assert store.inspect(uuid.uuid4()) is None
    with pytest.raises(AssertionError, match="a TLS context was built"):
        MysqlScheduleStore.open(_with_ssl_mode(url, "preferred"), table=table)


def test_ssl_mode_required_on_a_server_without_tls_fails_saying_so(url: str, table: str) -> None:
    [(_, have_ssl)] = sql(url, "SHOW VARIABLES LIKE 'have_ssl'")
    if have_ssl == "YES":
        pytest.skip("the test server offers TLS")
    with pytest.raises(
        StoreError, match="SSL is required but the server doesn't support it"
    ) as info:
        MysqlScheduleStore.open(_with_ssl_mode(url, "required"), table=table)
    assert "hexeract-test-only" not in str(info.value)


# -- the schema -------------------------------------------------------------------------


def test_the_reference_table_is_upgraded_and_stays_writable_by_reference_sql(
    url: str, table: str
) -> None:
    sql(url, reference_ddl(table))
    sid = uuid.uuid4()
    columns = (
        "schedule_id, event_type, payload, trigger_kind, scheduled_for, target_kind, max_attempts"
    )
    with pytest.raises(StoreError, match="lacks the column"):
        MysqlScheduleStore.open(url, table=table, create=False)
    with MysqlScheduleStore.open(url, table=table) as store:
        # the reference's own insert, naming its columns, still works after the upgrade
        sql(
            url,
            f"INSERT INTO {table} ({columns}) VALUES (%s, 'ev', '{{}}', 'delay',"
            " '2026-03-01 11:00:00', 'mediator', 3)",
            [sid.bytes],
        )
        snap = store.inspect(sid)
        assert snap is not None and snap.status is ScheduleStatus.PENDING
        [occ] = store.claim_due(T0, 10, LEASE)
        assert occ.message.schedule_id == sid and occ.attempts == 1
    [(version,)] = sql(
        url, "SELECT version FROM hexeract_lite_schema WHERE table_name = %s", [table]
    )
    assert version == SCHEMA_VERSION


def test_a_version_2_table_is_upgraded_to_the_policy_columns(url: str, table: str) -> None:
    """2 → 3: a table without the policy and long-handler columns is refused with
    create=False, naming them, and left as it was; opened with create=True its rows stay
    and the columns are added."""
    MysqlScheduleStore.open(url, table=table).close()
    sql(url, f"ALTER TABLE {table} " + ", ".join(f"DROP COLUMN {c}" for c in POLICY_COLUMNS))
    sql(url, "UPDATE hexeract_lite_schema SET version = 2 WHERE table_name = %s", [table])
    with MysqlScheduleStore.open(url, table=table) as store:
        store.insert(due(), 3)
    sql(url, f"ALTER TABLE {table} " + ", ".join(f"DROP COLUMN {c}" for c in POLICY_COLUMNS))
    sql(url, "UPDATE hexeract_lite_schema SET version = 2 WHERE table_name = %s", [table])
    with pytest.raises(StoreError, match=r"end_at.*abort_requested"):
        MysqlScheduleStore.open(url, table=table, create=False)
    [(version,)] = sql(
        url, "SELECT version FROM hexeract_lite_schema WHERE table_name = %s", [table]
    )
    assert version == 2, "left as it was"
    with MysqlScheduleStore.open(url, table=table) as store:
        [record] = store.export_records(None, 10)
        assert record.end_at is None and record.abort_requested is None
        assert len(store.claim_due(T0, 10, LEASE)) == 1
    [(version,)] = sql(
        url, "SELECT version FROM hexeract_lite_schema WHERE table_name = %s", [table]
    )
    assert version == SCHEMA_VERSION == 3
    found = sql(
        url,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = %s",
        [table],
    )
    assert set(POLICY_COLUMNS) <= {str(row[0]) for row in found}


def test_the_printed_ddl_makes_a_table_the_store_opens(url: str, table: str) -> None:
    ddl = mysql_ddl(table)
    for statement in filter(None, (part.strip() for part in ddl.split(";\n"))):
        sql(url, statement)
    with MysqlScheduleStore.open(url, table=table, create=False) as store:
        store.insert(due(), 3)
        assert len(store.claim_due(T0, 10, LEASE)) == 1


def test_create_false_writes_nothing_and_a_newer_version_is_refused(url: str, table: str) -> None:
    with pytest.raises(StoreError, match=r"no table.*schema --dialect mysql"):
        MysqlScheduleStore.open(url, table=table, create=False)
    assert not sql(url, "SHOW TABLES LIKE %s", [table])
    MysqlScheduleStore.open(url, table=table).close()
    MysqlScheduleStore.open(url, table=table, create=False).close()
    sql(url, "UPDATE hexeract_lite_schema SET version = 99 WHERE table_name = %s", [table])
    with pytest.raises(StoreError, match="schema version 99, newer"):
        MysqlScheduleStore.open(url, table=table)


# -- bounded waits, malformed rows ----------------------------------------------------


def test_a_held_row_lock_is_a_bounded_wait_naming_the_bound(
    url: str, table: str, clock: ManualClock
) -> None:
    with MysqlScheduleStore.open(
        url, table=table, clock=clock, lock_timeout=timedelta(seconds=1)
    ) as s:
        message = due()
        s.insert(message, 3)
        holder = mysql.raw_connect(url, autocommit=False)
        with holder.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {table} FOR UPDATE")
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"lock timeout \(1 s\)"):
            s.cancel(message.schedule_id)
        assert time.monotonic() - started < 5
        # the claim skips the locked row instead of waiting
        assert s.claim_due(T0, 10, LEASE) == []
        holder.rollback()
        holder.close()
        assert s.cancel(message.schedule_id)


def test_a_pool_that_is_all_busy_is_a_bounded_wait(url: str, table: str) -> None:
    with MysqlScheduleStore.open(
        url, table=table, pool_max_size=1, pool_timeout=timedelta(milliseconds=200)
    ) as s:
        with s._db.connection("hold"):
            errors: list[Exception] = []
            t = threading.Thread(target=lambda: errors.append(_raises(s.stats)))
            t.start()
            t.join(5)
        assert "pool timeout (0.2 s)" in str(errors[0])


def _raises(call: Any) -> Exception:
    try:
        call()
    except Exception as exc:
        return exc
    raise AssertionError("no error")


def test_a_malformed_row_is_dead_lettered_alone(
    store: MysqlScheduleStore, url: str, table: str
) -> None:
    good = [due(n) for n in range(3)]
    bad = due(9)
    store.insert_many([*good, bad], 3)
    sql(
        url,
        f"UPDATE {table} SET cron_expr = 'not a rule', trigger_kind = 'cron'"
        " WHERE schedule_id = %s",
        [bad.schedule_id.bytes],
    )
    listed = store.list_pending()
    assert sum(isinstance(item, MalformedSchedule) for item in listed) == 1
    with pytest.raises(StoreError, match=str(bad.schedule_id)):
        store.inspect(bad.schedule_id)
    seen: list[ScheduledMessage] = []
    report = SchedulerWorker(store, seen.append, CONFIG).run_once()
    assert sorted(m.schedule_id for m in seen) == sorted(m.schedule_id for m in good)
    assert report.delivered == 3
    [dead] = store.list_dead_letter()
    assert isinstance(dead, MalformedSchedule) and dead.schedule_id == bad.schedule_id
    assert dead.status is ScheduleStatus.DEAD_LETTERED


# -- transactions shared with the application ------------------------------------------


def test_insert_within_the_callers_transaction_commits_or_rolls_back_with_it(
    store: MysqlScheduleStore, url: str
) -> None:
    kept, dropped = due(1), due(2)
    conn = mysql.raw_connect(url, autocommit=False)
    store.insert(kept, 3, connection=conn)
    assert store.inspect(kept.schedule_id) is None  # not before the commit
    conn.commit()
    assert store.inspect(kept.schedule_id) is not None
    store.insert_many([dropped], 3, connection=conn)
    with pytest.raises(DuplicateSchedule):
        store.insert(kept, 3, connection=conn)  # undoes only itself
    conn.rollback()
    assert store.inspect(dropped.schedule_id) is None
    conn.close()


@pytest.mark.parametrize("own_transaction", [False, True], ids=["store", "connection"])
def test_a_name_held_under_another_id_is_a_store_error_saying_so(
    store: MysqlScheduleStore, url: str, table: str, own_transaction: bool
) -> None:
    """A row another tool wrote holds the name under another id: an insert of that name
    is refused naming the cause, as on PostgreSQL, and nothing is written (inside the
    application's transaction, that transaction stays usable)."""
    other = due(1)
    store.insert(other, 5)
    sql(url, f"UPDATE {table} SET name = 'app.held' WHERE schedule_id = %s",
        [other.schedule_id.bytes])  # fmt: skip
    named = ScheduledMessage.delay(Target.mediator(), T0, "remind", {}, name="app.held")
    held = "a unique name is held by another schedule"
    if own_transaction:
        conn = mysql.raw_connect(url, autocommit=False)
        try:
            with pytest.raises(StoreError, match=held):
                store.insert(named, 5, connection=conn)
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
                assert cur.fetchall() == ((1,),)
            conn.commit()
        finally:
            conn.close()
    else:
        with pytest.raises(StoreError, match=held):
            store.insert(named, 5)
    assert store.inspect(named.schedule_id) is None
    assert [s.schedule_id for s in store.list_named("app.")] == [other.schedule_id]


def test_bad_connections_are_refused(store: MysqlScheduleStore, url: str) -> None:
    auto = mysql.raw_connect(url)
    with pytest.raises(InvalidArgument, match="autocommit"):
        store.insert(due(), 3, connection=auto)
    auto.close()
    with pytest.raises(InvalidArgument, match="is closed"):
        store.insert(due(), 3, connection=auto)
    with pytest.raises(InvalidArgument, match=r"pymysql\.Connection"):
        store.insert(due(), 3, connection=object())


def test_modify_within_changes_a_schedule_in_the_callers_transaction(
    store: MysqlScheduleStore, url: str
) -> None:
    message = due()
    store.insert(message, 3)
    conn = mysql.raw_connect(url, autocommit=False)

    def plan(record: Any, now: datetime) -> tuple[str, Any]:
        record.event_type = "changed"
        return "ok", record

    assert store.modify_within(conn, message.schedule_id, plan) == "ok"
    conn.commit()
    conn.close()
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.event_type == "changed"


def _effects(url: str, table: str) -> None:
    sql(url, f"CREATE TABLE {table}_effects (occurrence VARCHAR(64) PRIMARY KEY, n INT)")


def test_the_sink_commits_effect_and_ack_together_or_neither(
    store: MysqlScheduleStore, url: str, table: str
) -> None:
    _effects(url, table)

    def handler(msg: ScheduledMessage, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table}_effects VALUES (%s, %s)", [str(msg.schedule_id), 1])
        if msg.payload == {"n": 9}:
            raise RuntimeError("handler broke")

    store.insert_many([due(1), due(2), due(9)], 3)
    report = SchedulerWorker(store, TransactionalSink(handler), CONFIG).run_once()
    assert (report.claimed, report.delivered, report.retried) == (3, 2, 1)
    assert sql(url, f"SELECT count(*) FROM {table}_effects") == [(2,)]
    statuses = sorted(str(s.status) for s in store.list_schedules(status=None))
    assert statuses.count(str(ScheduleStatus.DELIVERED)) == 2


@pytest.mark.parametrize(
    "end", ["ROLLBACK", "COMMIT", "rollback()", "commit()", "begin()", "CREATE TABLE"]
)
def test_a_handler_that_ends_the_transaction_fails_and_keeps_no_later_write(
    store: MysqlScheduleStore, url: str, table: str, end: str
) -> None:
    """A handler that ends the sink's transaction (SQL, pymysql's own methods, or DDL,
    which commits implicitly) fails the dispatch; what it wrote after that is rolled
    back, and after a rollback the acknowledgement is undone with it."""
    _effects(url, table)
    message = due(1)
    store.insert(message, 3)

    def handler(msg: ScheduledMessage, conn: Any) -> None:
        if end.endswith("()"):
            getattr(conn, end[:-2])()
        else:
            statement = f"CREATE TABLE {table}_ddl (n INT)" if end == "CREATE TABLE" else end
            conn.query(statement)
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table}_effects VALUES (%s, %s)", [str(msg.schedule_id), 1])

    try:
        report = SchedulerWorker(store, TransactionalSink(handler), CONFIG).run_once()
    finally:
        sql(url, f"DROP TABLE IF EXISTS {table}_ddl")
    assert report.delivered == 0
    assert sql(url, f"SELECT count(*) FROM {table}_effects") == [(0,)]
    snap = store.inspect(message.schedule_id)
    assert snap is not None
    if "ROLLBACK" in end.upper():  # the acknowledgement was undone with it
        assert snap.status is ScheduleStatus.PENDING
        assert snap.last_error is not None and "ended the sink's transaction" in snap.last_error
    else:  # the acknowledgement committed with it, before any effect
        assert snap.status is ScheduleStatus.DELIVERED


# -- the state machine, MySQL against the in-memory reference -----------------------------


class MysqlAgrees(StoresAgree):
    """The SQLite machine's rules and invariants, with MySQL as the store under test."""

    def open_store(self) -> ScheduleStore:
        return mysql.open_scratch_store(clock=self.clock)


@pytest.mark.slow
def test_mysql_store_agrees_with_the_memory_store(url: str) -> None:
    run_state_machine_as_test(
        MysqlAgrees,
        settings=settings(
            max_examples=examples(20),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_a_slow_statement_is_cut_at_the_statement_timeout(url: str, table: str) -> None:
    with MysqlScheduleStore.open(
        url, table=table, statement_timeout=timedelta(milliseconds=300)
    ) as s:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"statement timeout \(0\.3 s\)"):
            s._read("stats", f"SELECT SLEEP(5) FROM {table} UNION SELECT SLEEP(5)", None)
        assert time.monotonic() - started < 3
        assert s.stats().pending == 0  # the connection is usable again


def test_a_server_that_stops_answering_is_a_bounded_wait(url: str, table: str) -> None:
    import socket

    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    port = listener.getsockname()[1]
    silent = url.replace(f":{urllib_port(url)}/", f":{port}/")
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        MysqlScheduleStore.open(silent, table=table, connect_timeout=timedelta(seconds=1))
    assert time.monotonic() - started < 5
    assert "hexeract-test-only" not in str(info.value)
    listener.close()


def urllib_port(url: str) -> int:
    import urllib.parse

    port = urllib.parse.urlsplit(url).port
    assert port is not None
    return port


@pytest.mark.parametrize("how", ["sleeps", "runs SQL"])
def test_a_slow_transactional_handler_is_rolled_back_at_the_deadline(
    store: MysqlScheduleStore, url: str, table: str, how: str
) -> None:
    _effects(url, table)

    def handler(msg: ScheduledMessage, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {table}_effects VALUES (%s, 1)", [str(msg.schedule_id)])
            if how == "runs SQL":
                cur.execute("SELECT SLEEP(3)")
        if how == "sleeps":
            time.sleep(0.8)

    message = due()
    store.insert(message, 3)
    config = SchedulerWorkerConfig(
        lease=timedelta(seconds=60), dispatch_timeout=timedelta(seconds=0.4)
    )
    started = time.monotonic()
    report = SchedulerWorker(store, TransactionalSink(handler), config).run_once()
    assert report.retried == 1 and time.monotonic() - started < 2.5
    assert sql(url, f"SELECT count(*) FROM {table}_effects") == [(0,)]
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.last_error is not None and "Timeout" in snap.last_error


def test_vacuum_is_refused_naming_sqlite_and_what_the_server_does(
    store: MysqlScheduleStore,
) -> None:
    with pytest.raises(InvalidArgument, match=r"for SQLite files \(MysqlScheduleStore") as info:
        store.vacuum()
    assert "InnoDB's purge" in str(info.value)
