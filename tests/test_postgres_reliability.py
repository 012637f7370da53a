"""PostgreSQL store under adversity, on a real server.

- a malformed row among healthy ones: dead-lettered with the column named, the
  others delivered; listings show it in its place, ``inspect`` names it;
- every wait is bounded: row locks, table locks, a slow statement, a server that does
  not answer or goes away;
- a store used in a forked child neither shares nor closes the parent's connections;
- pause then resume while a dispatch is in flight keeps the dispatch's outcome;
- ``mark_failed`` with a deadline past the year 9999 is the store's own error.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import (
    InvalidConfiguration,
    InvalidTrigger,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    ScheduleStatus,
    Settlement,
    StoreError,
    Target,
)
from hexeract_lite.snapshot import MalformedSchedule

from . import pg
from .conftest import T0
from .test_sqlite_store import _race_ensure_against_prune

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from hexeract_lite.store.postgres import PostgresScheduleStore  # noqa: E402

LEASE = timedelta(seconds=30)
BOUND = 15.0
"""Seconds within which every bounded wait below must end (each is set far lower)."""

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_url() -> str:
    return pg.require_server()


@pytest.fixture
def table(pg_url: str) -> Iterator[str]:
    name = pg.unique_table("rel")
    yield name
    pg.drop_table(pg_url, name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(pg_url: str, table: str, clock: ManualClock) -> Iterator[PostgresScheduleStore]:
    with PostgresScheduleStore.open(pg_url, table=table, clock=clock) as s:
        yield s


def one_shot(at: datetime, n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), at, "ev", {"n": n})


def _sql(url: str, statement: str, table: str, *params: object) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement.replace("{t}", f'"{table}"').encode(), list(params))
        return cur.fetchall() if cur.description else []


def _break_cron(url: str, table: str, sid: uuid.UUID, kind: str = "cron") -> None:
    _sql(
        url,
        "UPDATE {t} SET trigger_kind = %s, cron_expr = 'not a cron' WHERE schedule_id = %s",
        table,
        kind,
        sid,
    )


# -- 12.1: one malformed row among healthy ones ---------------------------------------


@pytest.mark.parametrize(
    ("kind", "why"), [("cron", "cron_expr: "), ("weekly", "trigger_kind must be 'delay'")]
)
def test_a_malformed_row_is_dead_lettered_and_its_batch_mates_are_returned(
    store: PostgresScheduleStore, pg_url: str, table: str, kind: str, why: str
) -> None:
    messages = [one_shot(T0 - timedelta(seconds=10 - i), i) for i in range(10)]
    store.insert_many(messages, 3)
    bad = messages[4].schedule_id
    _break_cron(pg_url, table, bad, kind)

    claimed = store.claim_due(T0, 10, LEASE)

    assert [c.message.schedule_id for c in claimed] == [
        m.schedule_id for m in messages if m.schedule_id != bad
    ]
    [(dead_at, error, leased)] = _sql(
        pg_url,
        "SELECT dead_lettered_at, last_error, leased_until FROM {t} WHERE schedule_id = %s",
        table,
        bad,
    )
    assert dead_at is not None and leased is None
    assert error.startswith(f"malformed row, dead-lettered without dispatch: {why}")
    assert ("not a cron" if kind == "cron" else "'weekly'") in error
    for occurrence in claimed:  # the healthy ones are acknowledged as usual
        assert store.mark_delivered(occurrence.message.schedule_id, occurrence.leased_until)


@pytest.mark.parametrize("number", ["1" + "0" * 400 + ".5", "-" + "9" * 320 + ".25"])
def test_a_payload_number_beyond_a_float_is_malformed(
    store: PostgresScheduleStore, pg_url: str, table: str, number: str
) -> None:
    """JSONB keeps any number (NaN it refuses; ``1e999`` it keeps as the integer it is,
    which Python reads exactly); Python would read these as infinity, which the API
    never writes: the row is malformed, never delivered as inf."""
    bad, good = one_shot(T0 - timedelta(seconds=2)), one_shot(T0 - timedelta(seconds=1))
    store.insert_many([bad, good], 3)
    payload = f'{{"a": {number}}}'
    _sql(
        pg_url,
        "UPDATE {t} SET payload = %s::jsonb WHERE schedule_id = %s",
        table,
        payload,
        bad.schedule_id,
    )
    listed = store.list_pending()
    [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
    assert odd.schedule_id == bad.schedule_id and "beyond the range of a float" in odd.reason
    claimed = store.claim_due(T0, 10, LEASE)
    assert [c.message.schedule_id for c in claimed] == [good.schedule_id]
    [(error,)] = _sql(
        pg_url, "SELECT last_error FROM {t} WHERE schedule_id = %s", table, bad.schedule_id
    )
    assert error.startswith("malformed row, dead-lettered without dispatch: payload is not JSON")


def test_a_worker_delivers_the_healthy_rows_of_a_batch_with_a_malformed_one(
    store: PostgresScheduleStore, pg_url: str, table: str, clock: ManualClock
) -> None:
    messages = [one_shot(T0 - timedelta(seconds=1), i) for i in range(10)]
    store.insert_many(messages, 1)
    bad = messages[7].schedule_id
    _break_cron(pg_url, table, bad)
    delivered: list[uuid.UUID] = []
    worker = SchedulerWorker(store, lambda m: delivered.append(m.schedule_id), clock=clock)

    report = worker.run_once()

    assert sorted(delivered) == sorted(m.schedule_id for m in messages if m.schedule_id != bad)
    assert report.delivered == 9
    rows = _sql(pg_url, "SELECT count(*) FROM {t} WHERE delivered_at IS NOT NULL", table)
    assert rows == [(9,)]
    [(error,)] = _sql(
        pg_url,
        "SELECT last_error FROM {t} WHERE schedule_id = %s AND dead_lettered_at IS NOT NULL",
        table,
        bad,
    )
    assert "cron_expr" in error


def test_an_instant_python_cannot_hold_is_dead_lettered_naming_the_column(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    messages = [one_shot(T0 - timedelta(seconds=1), i) for i in range(3)]
    store.insert_many(messages, 3)
    bad = messages[1].schedule_id
    _sql(pg_url, "UPDATE {t} SET scheduled_for = '-infinity' WHERE schedule_id = %s", table, bad)

    claimed = store.claim_due(T0, 10, LEASE)

    assert {c.message.schedule_id for c in claimed} == {
        messages[0].schedule_id,
        messages[2].schedule_id,
    }
    [(error,)] = _sql(pg_url, "SELECT last_error FROM {t} WHERE schedule_id = %s", table, bad)
    assert "scheduled_for is not a timestamp" in error and "infinity" in error


# -- 12.8: listings and inspect --------------------------------------------------------


def test_listings_show_a_malformed_row_in_its_place(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    messages = [one_shot(T0 + timedelta(hours=i), i) for i in range(3)]
    store.insert_many(messages, 3)
    bad = messages[1].schedule_id
    _break_cron(pg_url, table, bad)
    other = messages[2].schedule_id
    _sql(pg_url, "UPDATE {t} SET created_at = 'infinity' WHERE schedule_id = %s", table, other)
    store.set_paused(bad, True)

    listed = store.list_pending()

    assert len(listed) == 3
    assert not isinstance(listed[0], MalformedSchedule)
    assert listed[0].schedule_id == messages[0].schedule_id
    assert isinstance(listed[1], MalformedSchedule) and isinstance(listed[2], MalformedSchedule)
    assert listed[1].schedule_id == bad and listed[1].raw_id == str(bad)
    assert listed[1].reason.startswith("cron_expr: ") and listed[1].status is ScheduleStatus.PAUSED
    assert listed[2].reason.startswith("created_at is not a timestamp")
    assert listed[1].to_json_dict()["status"] == "malformed"

    with pytest.raises(StoreError, match=rf"schedule {bad} .* malformed: cron_expr: ") as info:
        store.inspect(bad)
    assert not isinstance(info.value, InvalidTrigger)
    with pytest.raises(StoreError, match=rf"schedule {other} .* malformed: created_at"):
        store.inspect(other)

    _sql(pg_url, "UPDATE {t} SET dead_lettered_at = now() WHERE schedule_id = %s", table, bad)
    [dead] = store.list_dead_letter()
    assert isinstance(dead, MalformedSchedule) and dead.status is ScheduleStatus.DEAD_LETTERED


def test_a_change_needing_the_whole_row_refuses_a_malformed_one_and_cancel_applies(
    store: PostgresScheduleStore, pg_url: str, table: str
) -> None:
    from hexeract_lite import SchedulerControl, StoreError

    control = SchedulerControl(store)
    control.ensure("app.job", cron="0 9 * * *", event_type="e")
    sid = control.id_of("app.job")
    _break_cron(pg_url, table, sid)
    before = _sql(pg_url, "SELECT * FROM {t}", table)
    changes: list[Callable[[], object]] = [
        lambda: control.update("app.job", payload={"n": 2}),
        lambda: control.reschedule("app.job", T0 + timedelta(hours=1)),
        lambda: control.run_now("app.job"),
    ]
    for change in changes:
        with pytest.raises(StoreError, match="is malformed: cron_expr"):
            change()
    assert _sql(pg_url, "SELECT * FROM {t}", table) == before, "nothing written"
    assert control.cancel("app.job") is True


def test_the_cli_lists_a_malformed_row_and_inspect_names_it(
    store: PostgresScheduleStore, pg_url: str, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from hexeract_lite.cli import main

    messages = [one_shot(T0 + timedelta(hours=i), i) for i in range(2)]
    store.insert_many(messages, 3)
    bad = messages[1].schedule_id
    _break_cron(pg_url, table, bad)
    capsys.readouterr()

    assert main(["scheduler", "list", "--conn", pg_url, "--table", table]) == 0
    out = capsys.readouterr().out
    assert str(messages[0].schedule_id) in out
    assert str(bad) in out and "malformed" in out and "cron_expr" in out

    assert main(["scheduler", "inspect", str(bad), "--conn", pg_url, "--table", table]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "cron_expr" in err
    password = psycopg.conninfo.conninfo_to_dict(pg_url).get("password")
    assert not password or str(password) not in out + err


# -- 12.5: every wait is bounded ------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("lock_timeout", timedelta(0)),
        ("lock_timeout", 5),
        ("statement_timeout", timedelta(days=30)),
        ("pool_timeout", timedelta(seconds=-1)),
        ("connect_timeout", timedelta(seconds=1)),
        ("connect_timeout", "10"),
    ],
)
def test_timeouts_are_checked_before_connecting(option: str, value: object) -> None:
    with pytest.raises(InvalidConfiguration, match=option) as info:
        PostgresScheduleStore.open("postgresql://u:x@127.0.0.1:1/db", **{option: value})  # type: ignore[arg-type]
    assert repr(value) in str(info.value)


def _holding(url: str, statement: str, table: str, *params: object) -> Iterator[None]:
    """Run ``statement`` in a transaction on another session and keep it open."""
    with psycopg.connect(url) as conn:
        conn.execute(statement.replace("{t}", f'"{table}"').encode(), list(params))
        yield
        conn.rollback()


def test_cancel_behind_a_row_lock_gives_up_after_the_lock_timeout(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(
        pg_url, table=table, lock_timeout=timedelta(milliseconds=300)
    ) as store:
        message = one_shot(T0)
        store.insert(message, 3)
        sid = message.schedule_id
        holder = _holding(pg_url, "SELECT 1 FROM {t} WHERE schedule_id = %s FOR UPDATE", table, sid)
        next(holder)
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            store.cancel(sid)
        assert time.monotonic() - started < BOUND
        assert "cancel failed" in str(info.value)
        assert "waited longer than the lock timeout (0.3 s) for a lock held by another session" in (
            str(info.value)
        )
        assert isinstance(info.value.__cause__, psycopg.errors.LockNotAvailable)
        snapshot = store.inspect(sid)
        assert snapshot is not None and snapshot.status is ScheduleStatus.PENDING
        next(holder, None)
        assert store.cancel(sid), "once the lock is gone, cancel works"


def test_a_settle_behind_a_row_lock_writes_none_of_its_batch(pg_url: str, table: str) -> None:
    """The batch's fenced statements go to the server together: one held row lock
    ends the settle at the lock timeout with the bound named, and none of the batch
    (not the rows before it) is written."""
    with PostgresScheduleStore.open(
        pg_url, table=table, lock_timeout=timedelta(milliseconds=300)
    ) as store:
        messages = [one_shot(T0, i) for i in range(3)]
        store.insert_many(messages, 3)
        claimed = {c.message.schedule_id: c for c in store.claim_due(T0, 3, LEASE)}
        held = messages[1].schedule_id
        holder = _holding(
            pg_url, "SELECT 1 FROM {t} WHERE schedule_id = %s FOR UPDATE", table, held
        )
        next(holder)
        batch = [
            Settlement.delivered(m.schedule_id, claimed[m.schedule_id].leased_until)
            for m in messages
        ]
        with pytest.raises(StoreError) as info:
            store.settle(batch)
        assert "waited longer than the lock timeout (0.3 s)" in str(info.value)
        assert isinstance(info.value.__cause__, psycopg.errors.LockNotAvailable)
        for m in messages:
            snapshot = store.inspect(m.schedule_id)
            assert snapshot is not None and snapshot.status is ScheduleStatus.PENDING
        next(holder, None)
        assert store.settle(batch) == [True, True, True], "once the lock is gone, it settles"


def test_list_behind_an_access_exclusive_lock_gives_up(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(
        pg_url,
        table=table,
        lock_timeout=timedelta(milliseconds=300),
        statement_timeout=timedelta(seconds=10),
    ) as store:
        holder = _holding(pg_url, "LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE", table)
        next(holder)
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"list_pending failed.*lock timeout \(0.3 s\)"):
            store.list_pending()
        with pytest.raises(StoreError, match=r"claim_due failed.*lock timeout"):
            store.claim_due(T0, 10, LEASE)
        assert time.monotonic() - started < BOUND
        next(holder, None)
        assert store.list_pending() == []


def test_a_statement_that_runs_too_long_is_cancelled(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(
        pg_url,
        table=table,
        lock_timeout=timedelta(seconds=10),
        statement_timeout=timedelta(milliseconds=300),
    ) as store:
        holder = _holding(pg_url, "LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE", table)
        next(holder)
        started = time.monotonic()
        with pytest.raises(
            StoreError, match=r"next_wakeup failed.*longer than the statement timeout \(0.3 s\)"
        ):
            store.next_wakeup()
        assert time.monotonic() - started < BOUND
        next(holder, None)


def test_open_on_a_closed_port_fails_at_once() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(
        StoreError, match=f"cannot open table .* at postgresql://u:\\*\\*\\*@127.0.0.1:{port}"
    ):
        PostgresScheduleStore.open(f"postgresql://u:pw@127.0.0.1:{port}/db")
    assert time.monotonic() - started < BOUND


def test_open_on_a_server_that_never_answers_gives_up_after_the_connect_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts TCP, says nothing
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(
            StoreError, match=r"gave up connecting after the connect timeout \(2 s\)"
        ):
            PostgresScheduleStore.open(
                f"postgresql://u:pw@127.0.0.1:{port}/db", connect_timeout=timedelta(seconds=2)
            )
        assert time.monotonic() - started < BOUND


def test_calls_give_up_when_the_server_goes_away(pg_url: str, table: str) -> None:
    proxy = pg.TcpProxy(pg_url)
    with PostgresScheduleStore.open(
        proxy.url, table=table, pool_timeout=timedelta(milliseconds=500)
    ) as store:
        store.insert(one_shot(T0), 3)
        assert len(store.list_pending()) == 1
        proxy.cut()
        for _ in range(3):  # the pooled connection fails, then no new one comes
            started = time.monotonic()
            with pytest.raises(StoreError, match="list_pending failed"):
                store.list_pending()
            assert time.monotonic() - started < BOUND
        with pytest.raises(StoreError, match=r"pool timeout \(0.5 s\)"):
            store.list_pending()


# -- 12.4: fork ------------------------------------------------------------------------


def _child(store: PostgresScheduleStore, message: ScheduledMessage) -> None:
    store.insert(message, 3)
    assert any(s.schedule_id == message.schedule_id for s in store.list_pending(limit=1000))
    store.close()


def test_a_forked_child_uses_its_own_connections(pg_url: str, table: str) -> None:
    ctx = multiprocessing.get_context("fork")
    with PostgresScheduleStore.open(pg_url, table=table, pool_max_size=2) as store:
        store.insert(one_shot(T0), 3)
        busy = threading.Event()
        stop = threading.Event()

        def hammer() -> None:  # keeps the pool's locks and connections in use at fork time
            while not stop.is_set():
                store.list_pending()
                busy.set()

        thread = threading.Thread(target=hammer, daemon=True)
        thread.start()
        busy.wait(5)
        children = []
        messages = [one_shot(T0, i) for i in range(8)]
        try:
            for message in messages:
                child = ctx.Process(target=_child, args=(store, message))
                child.start()
                children.append(child)
            for child in children:
                child.join(timeout=30)
            hung = [c for c in children if c.is_alive()]
            for c in hung:
                c.kill()
            assert not hung, f"{len(hung)} of {len(children)} children hung"
            assert [c.exitcode for c in children] == [0] * len(children)
        finally:
            stop.set()
            thread.join(10)
        # the parent's connections are intact: the children neither used nor closed them
        listed = {s.schedule_id for s in store.list_pending(limit=1000)}
        assert {m.schedule_id for m in messages} <= listed
        assert store.claim_due(T0, 100, LEASE)


# -- 12.3: pause then resume while a dispatch is in flight -----------------------------


@pytest.mark.parametrize("how", ["flag", "realign to next", "cron realign"])
def test_resume_keeps_the_live_lease_of_a_dispatch_in_flight(
    store: PostgresScheduleStore, clock: ManualClock, how: str
) -> None:
    if how == "cron realign":
        message = ScheduledMessage.cron(
            Target.outbox(), "*/5 * * * *", T0 - timedelta(hours=1), "ev", {}
        )
    else:
        message = one_shot(T0)
    store.insert(message, 3)
    sid = message.schedule_id
    [occurrence] = store.claim_due(T0, 1, LEASE)
    clock.advance(timedelta(seconds=1))

    assert store.set_paused(sid, True)
    if how == "realign to next":
        assert store.resume(sid, next=T0 + timedelta(hours=1))
    else:
        assert store.resume(sid)

    snapshot = store.inspect(sid)
    assert snapshot is not None and snapshot.leased_until == occurrence.leased_until
    # the dispatch in flight failed: its failure is recorded, not fenced out
    assert store.mark_failed(sid, timedelta(seconds=5), "boom", occurrence.leased_until)
    snapshot = store.inspect(sid)
    assert snapshot is not None and snapshot.last_error == "boom"


def test_resume_clears_an_expired_lease(store: PostgresScheduleStore, clock: ManualClock) -> None:
    message = one_shot(T0)
    store.insert(message, 3)
    sid = message.schedule_id
    store.claim_due(T0, 1, LEASE)
    store.set_paused(sid, True)
    clock.advance(LEASE + timedelta(seconds=1))
    assert store.resume(sid, next=T0 + timedelta(hours=1))
    snapshot = store.inspect(sid)
    assert snapshot is not None and snapshot.leased_until is None


# -- 11: mark_failed past the year 9999 ------------------------------------------------


@pytest.mark.parametrize("database_clock", [False, True])
def test_a_retry_deadline_past_the_year_9999_is_refused_and_nothing_is_written(
    pg_url: str, table: str, database_clock: bool
) -> None:
    with PostgresScheduleStore.open(
        pg_url, table=table, use_database_clock=database_clock
    ) as store:
        now = datetime.now(UTC)
        a, b = one_shot(now - timedelta(seconds=1), 1), one_shot(now - timedelta(seconds=1), 2)
        store.insert_many([a, b], 3)
        claimed = {c.message.schedule_id: c for c in store.claim_due(now, 2, LEASE)}
        lease_b = claimed[b.schedule_id].leased_until
        with pytest.raises(InvalidConfiguration, match=r"retry_in .*past the year 9999"):
            store.mark_failed(b.schedule_id, timedelta.max, "boom", lease_b)
        with pytest.raises(InvalidConfiguration, match="retry_in"):
            store.settle(
                [
                    Settlement.delivered(a.schedule_id, claimed[a.schedule_id].leased_until),
                    Settlement.failed(b.schedule_id, timedelta.max, "boom", lease_b),
                ]
            )
        for sid in (a.schedule_id, b.schedule_id):
            snapshot = store.inspect(sid)
            assert snapshot is not None and snapshot.status is ScheduleStatus.PENDING
            assert snapshot.last_error is None
            assert snapshot.leased_until == claimed[sid].leased_until
        assert store.mark_failed(b.schedule_id, timedelta(seconds=1), "boom", lease_b)


# -- 17: another process's insert wakes an idle worker (LISTEN/NOTIFY) -----------------

INSERT_ELSEWHERE = """
import sys
from datetime import UTC, datetime
from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.postgres import PostgresScheduleStore
with PostgresScheduleStore.open(sys.argv[1], table=sys.argv[2], create=False) as store:
    store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "ev", {}), 3)
"""


def _insert_from_another_process(url: str, table: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-c", INSERT_ELSEWHERE, url, table], cwd=root, check=True, timeout=60
    )


def test_another_process_s_insert_signals_a_claiming_store(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        store.claim_due(datetime.now(UTC), 10, LEASE)  # a worker's store: it listens
        version = store.changes.version()
        _insert_from_another_process(pg_url, table)
        assert store.changes.wait(version, BOUND), "no wake-up for another process's insert"


def test_with_listen_off_nothing_listens(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(pg_url, table=table, listen=False) as store:
        store.claim_due(datetime.now(UTC), 10, LEASE)
        version = store.changes.version()
        _insert_from_another_process(pg_url, table)
        assert not store.changes.wait(version, 0.5)
        assert len(store.claim_due(datetime.now(UTC), 10, LEASE)) == 1, "polling still finds it"


def test_an_idle_worker_dispatches_another_process_s_insert_before_its_next_poll(
    pg_url: str, table: str
) -> None:
    from hexeract_lite import SchedulerWorkerConfig

    delivered = threading.Event()
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        config = SchedulerWorkerConfig(poll_interval=timedelta(seconds=60))
        worker = SchedulerWorker(store, lambda m: delivered.set(), config)
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            time.sleep(0.5)  # it claimed nothing and sleeps: its next poll is a minute away
            _insert_from_another_process(pg_url, table)
            assert delivered.wait(BOUND), "the idle worker did not wake for the insert"
        finally:
            stop.set()
            thread.join(BOUND)


def test_a_listener_that_loses_its_connection_signals(pg_url: str, table: str) -> None:
    PostgresScheduleStore.open(pg_url, table=table).close()
    proxy = pg.TcpProxy(pg_url)
    with PostgresScheduleStore.open(proxy.url, table=table, create=False) as store:
        store.claim_due(datetime.now(UTC), 10, LEASE)
        version = store.changes.version()
        proxy.cut()
        assert store.changes.wait(version, BOUND), "a lost listener must wake its waiters"


def test_connections_notice_a_vanished_host_in_bounded_time(pg_url: str, table: str) -> None:
    """TCP keepalives and a user timeout on every connection, unless the connection
    string sets its own (a vanished host cannot be staged on one machine: this checks
    the settings reach libpq)."""
    with (
        PostgresScheduleStore.open(pg_url, table=table) as store,
        store._db.connection("probe") as conn,
    ):
        params = conn.info.get_parameters()
    assert params["keepalives"] == "1" and params["keepalives_idle"] == "15"
    assert params["tcp_user_timeout"] == "30000"
    own = pg_url + ("&" if "?" in pg_url else "?") + "keepalives_idle=7"
    with (
        PostgresScheduleStore.open(own, table=table) as store,
        store._db.connection("probe") as conn,
    ):
        assert conn.info.get_parameters()["keepalives_idle"] == "7"


def test_ensure_racing_a_pruning_worker_never_fails(pg_url: str, table: str) -> None:
    """A pruning DELETE that picked the cancelled row must not delete it once ensure
    declared it again (READ COMMITTED re-checks the delete's own condition)."""
    with (
        PostgresScheduleStore.open(pg_url, table=table) as declare,
        PostgresScheduleStore.open(pg_url, table=table) as pruner,
    ):
        assert _race_ensure_against_prune(declare, pruner, 1.5) > 50


def _ensure_at_once(
    stores: list[PostgresScheduleStore], message: ScheduledMessage, conns: list[Any] | None
) -> list[str]:
    """Every store's ``ensure(message)``, started together (with ``conns``: each inside a
    transaction of its own connection); what each said (or raised)."""
    barrier = threading.Barrier(len(stores), timeout=30)
    said: list[str] = []

    def ensure(i: int) -> None:
        barrier.wait()
        try:
            if conns is None:
                said.append(str(stores[i].ensure(message, 5)))
            else:
                with conns[i].transaction():
                    said.append(str(stores[i].ensure(message, 5, connection=conns[i])))
        except Exception as exc:  # the assertion shows it
            said.append(repr(exc))

    threads = [threading.Thread(target=ensure, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return sorted(said)


@pytest.mark.slow
@pytest.mark.parametrize("own_transaction", [False, True], ids=["store", "connection"])
def test_ensures_racing_on_one_name_all_succeed_and_store_one_row(
    pg_url: str, table: str, own_transaction: bool
) -> None:
    """Six connections ensure the same new name at once, 400 times (each in its own
    transaction: ``connection=``): each round stores one row, one ensure says created and
    the others unchanged. An insert can meet the name index before the id's ON CONFLICT;
    it is then the duplicate it is, not an error (without that, about one round in sixty
    failed here)."""
    at = datetime.now(UTC) + timedelta(days=1)
    with contextlib.ExitStack() as stack:
        stores = [
            stack.enter_context(PostgresScheduleStore.open(pg_url, table=table)) for _ in range(6)
        ]
        conns = None
        if own_transaction:
            conns = [stack.enter_context(psycopg.connect(pg_url)) for _ in stores]
        for n in range(400):
            message = ScheduledMessage.delay(Target.outbox(), at, "ev", {}, name=f"app.n{n}")
            said = _ensure_at_once(stores, message, conns)
            assert said == ["created"] + ["unchanged"] * 5, n
        assert len(stores[0].list_named("app.")) == 400


@pytest.mark.parametrize("own_transaction", [False, True], ids=["store", "connection"])
def test_a_name_held_under_another_id_is_a_store_error_saying_so(
    store: PostgresScheduleStore, pg_url: str, table: str, own_transaction: bool
) -> None:
    """A row another tool wrote holds the name under another id: ensure of that name is
    refused naming the cause, and nothing is written (inside the application's
    transaction, that transaction stays usable)."""
    at = datetime.now(UTC) + timedelta(days=1)
    other = ScheduledMessage.delay(Target.outbox(), at, "ev", {})
    store.insert(other, 5)
    _sql(
        pg_url, "UPDATE {t} SET name = 'app.held' WHERE schedule_id = %s", table, other.schedule_id
    )
    named = ScheduledMessage.delay(Target.outbox(), at, "ev", {}, name="app.held")
    held = "a unique name is held by another schedule"
    if own_transaction:
        with psycopg.connect(pg_url) as conn, conn.transaction():
            with pytest.raises(StoreError, match=held):
                store.ensure(named, 5, connection=conn)
            assert conn.execute("SELECT 1").fetchall() == [(1,)]
    else:
        with pytest.raises(StoreError, match=held):
            store.ensure(named, 5)
    assert [s.schedule_id for s in store.list_named("app.")] == [other.schedule_id]
