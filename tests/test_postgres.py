"""PostgresScheduleStore beyond the contract suite: layout, clocks, errors, contention.

The contract suite (tests/test_store_contract.py) runs on PostgreSQL through
conftest's "postgres" factory. Tests here that need a server use the ``pg_url``
fixture: without a server they skip (and fail in CI, see tests/pg.py). The first
section needs no server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from hexeract_lite import (
    InvalidConfiguration,
    InvalidMessage,
    ManualClock,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.settlement import Settlement
from hexeract_lite.store.postgres.schema import (
    INDEXES,
    POSTGRES_COLUMNS,
    UNIQUE_INDEXES,
    postgres_ddl,
    postgres_index_name,
)

from . import pg
from .conftest import T0, examples
from .test_state_machine import StoresAgree

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


from hexeract_lite.store.postgres import PostgresScheduleStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LEASE = timedelta(seconds=30)
SECRET = "s3cr3t-pw"


def one_shot(at: datetime, payload: object = None) -> ScheduledMessage:
    return ScheduledMessage.delay(
        Target.outbox(), at, "ev", {"n": 1} if payload is None else payload
    )


# -- no server needed -------------------------------------------------------------


def test_ddl_quotes_and_validates_the_table_name() -> None:
    ddl = postgres_ddl("Select")
    assert 'CREATE TABLE IF NOT EXISTS "Select" (' in ddl
    assert '"idx_Select_pending"' in ddl and '"idx_Select_dead_letter"' in ddl
    for name, decl in POSTGRES_COLUMNS:
        assert f"{name} " in ddl and decl in ddl
    with pytest.raises(InvalidConfiguration, match="invalid table name"):
        postgres_ddl('x"; DROP TABLE y; --')
    with pytest.raises(InvalidConfiguration):
        postgres_ddl("a" * 64)


def test_index_names_stay_distinct_within_63_bytes() -> None:
    assert postgres_index_name("scheduled_messages", "pending") == "idx_scheduled_messages_pending"
    longest = "t" * 63
    names = {postgres_index_name(longest, suffix) for suffix, _, _ in INDEXES}
    assert len(names) == len(INDEXES)
    assert all(len(n.encode()) <= 63 for n in names)
    other = {postgres_index_name("t" * 62 + "u", suffix) for suffix, _, _ in INDEXES}
    assert not names & other


def test_the_package_imports_without_psycopg() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import hexeract_lite, hexeract_lite.store\n"
        "from hexeract_lite.store.postgres.schema import postgres_ddl; postgres_ddl()\n"
        "try:\n"
        "    from hexeract_lite.store import PostgresScheduleStore\n"
        "except ImportError:\n"
        "    print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_a_bad_table_name_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidConfiguration, match="invalid table name"):
        PostgresScheduleStore.open("postgresql://u:x@127.0.0.1:1/db", table="a-b")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pool_min_size": -1}, "pool_min_size"),
        ({"pool_max_size": 0}, "pool_max_size"),
        ({"pool_min_size": 5, "pool_max_size": 2}, "pool_max_size"),
        ({"clock": object()}, "clock"),
    ],
)
def test_open_checks_its_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidConfiguration, match=match):
        PostgresScheduleStore.open("postgresql://u:x@127.0.0.1:1/db", **kwargs)  # type: ignore[arg-type]


def _no_secret_anywhere(exc: BaseException) -> None:
    text = "".join(traceback.format_exception(exc))
    assert SECRET not in text


def test_an_unparsable_conninfo_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="invalid PostgreSQL connection string") as info:
        PostgresScheduleStore.open(f"host=h password {SECRET}")
    _no_secret_anywhere(info.value)


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    url = f"postgresql://app:{SECRET}@127.0.0.1:1/db?connect_timeout=2"
    with pytest.raises(StoreError, match=r"postgresql://app:\*\*\*@127.0.0.1:1/db") as info:
        PostgresScheduleStore.open(url)
    assert isinstance(info.value.__cause__, psycopg.Error)
    _no_secret_anywhere(info.value)


def test_a_key_value_conninfo_is_shown_without_its_password() -> None:
    conninfo = f"host=127.0.0.1 port=1 user=app password={SECRET} dbname=db connect_timeout=2"
    with pytest.raises(StoreError, match=r"host=127.0.0.1 port=1 user=app password=\*\*\*") as info:
        PostgresScheduleStore.open(conninfo)
    _no_secret_anywhere(info.value)


@pytest.mark.parametrize(
    "conninfo",
    [
        f"host=h user=app password={SECRET} dbname=db",
        f"host=h password='{SECRET}' dbname=db",
        f"postgresql://app:{SECRET}@h/db",
        f"postgresql://h/db?user=app&password={SECRET}",
    ],
)
def test_one_scrub_removes_the_password_of_every_spelling(conninfo: str) -> None:
    """The store and the CLI share connect.scrub: a driver message quoting the bare
    password loses it, whatever the connection string's spelling."""
    from hexeract_lite.connect import scrub

    message = f'FATAL: password "{SECRET}" rejected for user "app"'
    assert SECRET not in scrub(message, conninfo)
    assert "rejected for user" in scrub(message, conninfo)


def test_ci_without_a_server_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "server", lambda: (None, "no server here"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but PostgreSQL tests cannot run"):
        pg.require_server()
    assert pg.postgres_store_factory() is not None, "CI registers the store so its tests fail"
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="no server here"):
        pg.require_server()
    assert pg.postgres_store_factory() is None


# -- on a real server ---------------------------------------------------------------


@pytest.fixture
def pg_url() -> str:
    return pg.require_server()


@pytest.fixture
def table(pg_url: str) -> Iterator[str]:
    name = pg.unique_table()
    yield name
    pg.drop_table(pg_url, name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(pg_url: str, table: str, clock: ManualClock) -> Iterator[PostgresScheduleStore]:
    with PostgresScheduleStore.open(pg_url, table=table, clock=clock) as s:
        yield s


def _with_password(url: str, password: str) -> str:
    parts = psycopg.conninfo.conninfo_to_dict(url)
    parts["password"] = password
    return str(psycopg.conninfo.make_conninfo(**parts))


@pytest.mark.postgres
def test_the_table_has_the_reference_layout(store: PostgresScheduleStore, pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        cols = conn.execute(
            "SELECT column_name, data_type, character_maximum_length, is_nullable"
            " FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
            [store.table],
        ).fetchall()
        indexes = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [store.table]
            ).fetchall()
        )
    assert [c[0] for c in cols] == [name for name, _ in POSTGRES_COLUMNS]
    types = {c[0]: (c[1], c[2], c[3]) for c in cols}
    assert types["schedule_id"] == ("uuid", None, "NO")
    assert types["event_type"] == ("character varying", 64, "NO")
    assert types["payload"] == ("jsonb", None, "NO")
    assert types["trigger_kind"] == types["target_kind"] == ("character varying", 16, "NO")
    assert types["scheduled_for"] == ("timestamp with time zone", None, "NO")
    assert types["leased_until"] == ("timestamp with time zone", None, "YES")
    assert types["attempts"] == ("integer", None, "NO")
    assert types["paused"] == ("boolean", None, "NO")
    # the reference's two indexes, exactly: names, keys and predicates
    live = (
        "WHERE ((delivered_at IS NULL) AND (dead_lettered_at IS NULL)"
        " AND (cancelled_at IS NULL) AND (paused = false))"
    )
    t = store.table
    assert indexes[f"idx_{t}_pending"] == (
        f"CREATE INDEX idx_{t}_pending ON public.{t} USING btree (scheduled_for) {live}"
    )
    assert indexes[f"idx_{t}_dead_letter"] == (
        f"CREATE INDEX idx_{t}_dead_letter ON public.{t} USING btree (dead_lettered_at)"
        " WHERE (dead_lettered_at IS NOT NULL)"
    )
    # hexeract_lite's own, under its own names: the claim (fresh rows and expired leases),
    # the sweep, the wake-up
    unleased = live.replace("WHERE (", "WHERE ((leased_until IS NULL) AND ")
    assert indexes[f"idx_{t}_due"] == (
        f"CREATE INDEX idx_{t}_due ON public.{t} USING btree (scheduled_for, schedule_id)"
        f" {unleased}"
    )
    assert "GREATEST(scheduled_for, leased_until)" in indexes[f"idx_{t}_reclaim"]
    assert f"idx_{t}_exhausted" in indexes


@pytest.mark.postgres
@pytest.mark.parametrize("use_database_clock", [False, True])
def test_the_claim_reads_fresh_rows_and_expired_leases_from_their_indexes(
    pg_url: str, table: str, use_database_clock: bool
) -> None:
    """Rows in flight or in backoff, scheduled before the fresh ones, are in neither
    index range the claim reads (it would otherwise walk them all, every claim)."""
    now = datetime.now(UTC)
    with PostgresScheduleStore.open(
        pg_url, table=table, use_database_clock=use_database_clock
    ) as store:
        held = [one_shot(now - timedelta(hours=2) + timedelta(seconds=i)) for i in range(400)]
        fresh = [one_shot(now - timedelta(hours=1) + timedelta(seconds=i)) for i in range(50)]
        store.insert_many(held, 3)
        assert len(store.claim_due(now, 400, timedelta(hours=1))) == 400
        store.insert_many(fresh, 3)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{table}"'.encode())
            conn.execute("SET enable_seqscan = off")  # a small table: ask which index
            claim = store._sql.claim
            assert isinstance(claim, bytes)  # rendered once when the store opened
            params = {"now": now, "until": now + LEASE, "lease_ms": 30_000, "batch_size": 10}
            plan = conn.execute(b"EXPLAIN " + claim, params).fetchall()
        text = "\n".join(row[0] for row in plan)
        assert f"Index Scan using idx_{table}_due" in text, text
        assert f"Index Scan using idx_{table}_reclaim" in text, text
        assert [o.message.schedule_id for o in store.claim_due(now, 10, LEASE)] == [
            m.schedule_id for m in fresh[:10]
        ]


@pytest.mark.postgres
def test_the_ddl_text_makes_a_table_the_store_opens(pg_url: str, table: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(postgres_ddl(table).encode())
        conn.execute(postgres_ddl(table).encode())  # idempotent
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as s:
        s.insert(one_shot(T0), 3)
        assert len(s.list_pending()) == 1


@pytest.mark.postgres
def test_create_false_on_a_missing_table_is_a_store_error(pg_url: str, table: str) -> None:
    with pytest.raises(StoreError, match=f"no table '{table}' at ") as info:
        PostgresScheduleStore.open(pg_url, table=table, create=False)
    password = psycopg.conninfo.conninfo_to_dict(pg_url).get("password")
    if password:
        assert str(password) not in "".join(traceback.format_exception(info.value))
    with psycopg.connect(pg_url) as conn:
        found = conn.execute("SELECT to_regclass(%s)", [table]).fetchone()
    assert found == (None,), "create=False created nothing"


@pytest.mark.postgres
def test_a_table_of_another_shape_is_refused(pg_url: str, table: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{table}" (schedule_id UUID PRIMARY KEY, payload JSONB)')
    with pytest.raises(StoreError, match=r"not a hexeract scheduler table.*event_type"):
        PostgresScheduleStore.open(pg_url, table=table)


@pytest.mark.postgres
def test_a_wrong_password_is_a_store_error_without_it(pg_url: str) -> None:
    with pytest.raises(StoreError) as info:
        PostgresScheduleStore.open(_with_password(pg_url, SECRET))
    assert "***" in str(info.value)
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
    _no_secret_anywhere(info.value)


@pytest.mark.postgres
@pytest.mark.parametrize("name", ["Select", "MixedCase", "t" * 63])
def test_awkward_but_valid_table_names(pg_url: str, name: str) -> None:
    pg.drop_table(pg_url, name)
    try:
        with PostgresScheduleStore.open(pg_url, table=name) as s:
            s.insert(one_shot(T0), 3)
            [occ] = s.claim_due(T0, 5, LEASE)
            assert s.mark_delivered(occ.message.schedule_id, occ.leased_until)
        with psycopg.connect(pg_url) as conn:
            count = conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE tablename = %s", [name]
            ).fetchone()
        assert count == (len(INDEXES) + len(UNIQUE_INDEXES) + 1,), (
            "every index plus the primary key"
        )
    finally:
        pg.drop_table(pg_url, name)


@pytest.mark.postgres
def test_jsonb_keeps_the_payload_value(store: PostgresScheduleStore) -> None:
    payload = {"zeta": 1, "a": [1.5, "é", None, {"y": True, "x": False}], "mid": 2}
    msg = one_shot(T0, payload)
    store.insert(msg, 3)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert json.loads(snap.payload_json) == json.loads(msg.payload_json) == payload
    # JSONB orders keys shorter-first: the text differs, the value does not
    assert snap.payload_json == '{"a":[1.5,"é",null,{"x":false,"y":true}],"mid":2,"zeta":1}'
    [occ] = store.claim_due(T0, 1, LEASE)
    assert occ.message.payload == payload


@pytest.mark.postgres
def test_a_nul_in_the_payload_is_refused_and_nothing_is_written(
    store: PostgresScheduleStore,
) -> None:
    good = one_shot(T0)
    bad = one_shot(T0, {"s": "a\x00b"})
    with pytest.raises(InvalidMessage, match="NUL"):
        store.insert_many([good, bad], 3)
    assert store.list_pending() == []


@pytest.mark.postgres
def test_max_attempts_must_fit_an_integer_column(store: PostgresScheduleStore) -> None:
    with pytest.raises(InvalidConfiguration, match="from 1 to 2147483647"):
        store.insert(one_shot(T0), 2**31)
    store.insert(one_shot(T0), 2**31 - 1)


@pytest.mark.postgres
def test_sub_millisecond_leases_are_stored_at_millisecond_precision(
    store: PostgresScheduleStore,
) -> None:
    msg = one_shot(T0)
    store.insert(msg, 3)
    [occ] = store.claim_due(T0, 1, timedelta(seconds=1, microseconds=1500))
    assert occ.leased_until == T0 + timedelta(milliseconds=1001)
    assert store.mark_failed(msg.schedule_id, timedelta(microseconds=2500), "x", occ.leased_until)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == T0 + timedelta(milliseconds=2)


@pytest.mark.postgres
def test_the_database_clock_replaces_the_client_clock(pg_url: str, table: str) -> None:
    ancient = ManualClock(datetime(2000, 1, 1, tzinfo=UTC))
    with PostgresScheduleStore.open(
        pg_url, table=table, clock=ancient, use_database_clock=True
    ) as s:
        assert s.uses_database_clock
        real_now = datetime.now(UTC)
        msg = one_shot(real_now - timedelta(seconds=1))
        s.insert(msg, 1)
        snap = s.inspect(msg.schedule_id)
        assert snap is not None
        assert abs(snap.created_at - real_now) < timedelta(minutes=1)
        # the now handed in is ignored: the row is due by the server's clock
        [occ] = s.claim_due(ancient.now(), 10, LEASE)
        assert abs(occ.leased_until - (real_now + LEASE)) < timedelta(minutes=1)
        assert occ.leased_until.microsecond % 1000 == 0
        assert s.mark_dead_lettered(msg.schedule_id, "boom", occ.leased_until)
        s.replay(msg.schedule_id)
        snap = s.inspect(msg.schedule_id)
        assert snap is not None and abs(snap.scheduled_for - real_now) < timedelta(minutes=1)
        [occ] = s.claim_due(ancient.now(), 10, LEASE)
        assert s.mark_failed(msg.schedule_id, timedelta(hours=1), "later", occ.leased_until)
        wake = s.next_wakeup()
        assert wake is not None and abs(wake - (real_now + timedelta(hours=1))) < timedelta(
            minutes=1
        )


@pytest.mark.postgres
def test_driver_errors_are_store_errors(store: PostgresScheduleStore, pg_url: str) -> None:
    pg.drop_table(pg_url, store.table)
    with pytest.raises(StoreError, match="claim_due failed on table") as info:
        store.claim_due(T0, 1, LEASE)
    assert isinstance(info.value.__cause__, psycopg.errors.UndefinedTable)
    password = psycopg.conninfo.conninfo_to_dict(pg_url).get("password")
    if password:
        assert str(password) not in str(info.value)


@pytest.mark.postgres
def test_a_closed_store_raises_store_error(pg_url: str, table: str) -> None:
    s = PostgresScheduleStore.open(pg_url, table=table)
    s.close()
    s.close()
    assert s.closed
    with pytest.raises(StoreError, match="closed"):
        s.list_pending()


@pytest.mark.postgres
def test_changes_are_signalled_after_each_commit(
    store: PostgresScheduleStore, clock: ManualClock
) -> None:
    msg = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0, "tick", 1)
    version = store.changes.version()
    store.insert(msg, 3)
    assert store.changes.version() != version
    [occ] = store.claim_due(T0, 1, LEASE)
    calls: list[Callable[[], bool]] = [
        lambda: store.mark_failed(msg.schedule_id, timedelta(0), "x", occ.leased_until),
        lambda: store.set_paused(msg.schedule_id, True),
        lambda: store.resume(msg.schedule_id),
    ]
    for call in calls:
        version = store.changes.version()
        assert call()
        assert store.changes.version() != version
    [occ] = store.claim_due(T0, 1, LEASE)
    version = store.changes.version()
    assert store.reschedule(msg.schedule_id, T0 + timedelta(minutes=1), occ.leased_until)
    assert store.changes.version() != version
    clock.advance(timedelta(minutes=1))
    [occ] = store.claim_due(clock.now(), 1, LEASE)
    store.mark_dead_lettered(msg.schedule_id, "x", occ.leased_until)
    version = store.changes.version()
    store.replay(msg.schedule_id)
    assert store.changes.version() != version


@pytest.mark.postgres
def test_threads_sharing_one_store_never_get_the_same_occurrence(pg_url: str, table: str) -> None:
    with PostgresScheduleStore.open(pg_url, table=table, pool_max_size=8) as s:
        msgs = [one_shot(T0 - timedelta(seconds=i % 7)) for i in range(600)]
        s.insert_many(msgs, 3)
        got: list[uuid.UUID] = []
        lock = threading.Lock()

        def drain() -> None:
            while batch := s.claim_due(T0, 7, LEASE):
                with lock:
                    got.extend(o.message.schedule_id for o in batch)

        threads = [threading.Thread(target=drain) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(got) == len(set(got)) == len(msgs)


@pytest.mark.postgres
def test_stores_opening_a_new_table_together_do_not_race(pg_url: str, table: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresScheduleStore.open(pg_url, table=table, pool_min_size=0).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# -- the state machine, PostgreSQL against the in-memory reference ---------------------


class PostgresAgrees(StoresAgree):
    """The SQLite machine's rules and invariants, with PostgreSQL as the store under test."""

    def open_store(self) -> ScheduleStore:
        return pg.open_scratch_store(clock=self.clock, pool_min_size=0)


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_store_agrees_with_the_memory_store(pg_url: str) -> None:
    run_state_machine_as_test(
        PostgresAgrees,
        settings=settings(
            max_examples=examples(30),
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# -- separate processes on separate connections -------------------------------------------


def _spawn(url: str, table: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pg_worker_proc", url, table, str(out), *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _claims(path: Path) -> list[tuple[uuid.UUID, int]]:
    if not path.exists():
        return []
    return [
        (uuid.UUID(sid), int(attempts))
        for sid, attempts in (line.split() for line in path.read_text().splitlines())
    ]


def _wait_for(paths: list[Path], timeout: float) -> None:
    stop = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < stop, f"workers not ready: {paths}"
        time.sleep(0.01)


@pytest.mark.postgres
@pytest.mark.slow
def test_four_worker_processes_drain_one_table_without_double_hand_out(
    pg_url: str, table: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    msgs = [one_shot(now - timedelta(seconds=1 + i % 50)) for i in range(4000)]
    with PostgresScheduleStore.open(pg_url, table=table) as s:
        s.insert_many(msgs, 3)
    go = tmp_path / "go"
    outs = [tmp_path / f"w{i}.txt" for i in range(4)]
    ready = [tmp_path / f"w{i}.ready" for i in range(4)]
    procs = [
        _spawn(pg_url, table, out, "--go", str(go), "--ready", str(r), "--batch", "10")
        for out, r in zip(outs, ready, strict=True)
    ]
    try:
        _wait_for(ready, 60)
        started = time.monotonic()
        go.touch()
        codes = [p.wait(timeout=180) for p in procs]
        elapsed = time.monotonic() - started
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0, 0, 0]
    per_worker = [_claims(out) for out in outs]
    handed = [sid for claims in per_worker for sid, _ in claims]
    duplicates = [sid for sid, n in Counter(handed).items() if n > 1]
    assert duplicates == [], "an occurrence was handed to two workers"
    assert set(handed) == {m.schedule_id for m in msgs}, "an occurrence was lost"
    assert all(attempts == 1 for claims in per_worker for _, attempts in claims)
    assert sum(1 for claims in per_worker if claims) >= 2, "no contention happened"
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as s:
        assert s.list_pending() == []
        assert s.next_wakeup() is None
    print(
        f"\n4 processes drained {len(msgs)} occurrences in {elapsed:.2f}s"
        f" ({len(msgs) / elapsed:.0f}/s); per worker {[len(c) for c in per_worker]}"
    )


@pytest.mark.postgres
@pytest.mark.slow
def test_a_killed_worker_s_occurrences_are_reclaimed_after_its_lease(
    pg_url: str, table: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    msgs = [one_shot(now - timedelta(seconds=1), {"i": i}) for i in range(300)]
    with PostgresScheduleStore.open(pg_url, table=table) as s:
        s.insert_many(msgs, 3)
    victim_out = tmp_path / "victim.txt"
    victim = _spawn(pg_url, table, victim_out, "--hold", "--batch", "40", "--lease", "1")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        _wait_for([Path(f"{victim_out}.held")], 60)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        held = {sid for sid, _ in _claims(victim_out)}
        assert len(held) == 40
        go = tmp_path / "go"
        outs = [tmp_path / f"w{i}.txt" for i in range(3)]
        procs += [_spawn(pg_url, table, out, "--go", str(go), "--lease", "30") for out in outs]
        go.touch()
        codes = [p.wait(timeout=180) for p in procs]
    finally:
        for p in [victim, *procs]:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0, 0]
    live = [claim for out in outs for claim in _claims(out)]
    live_ids = [sid for sid, _ in live]
    assert len(live_ids) == len(set(live_ids)), "live workers never share an occurrence"
    assert set(live_ids) == {m.schedule_id for m in msgs}, "nothing is lost"
    assert {sid for sid, attempts in live if attempts == 2} == held, (
        "exactly the killed worker's occurrences were redelivered, on their second attempt"
    )
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as s:
        for m in msgs[:20]:
            snap = s.inspect(m.schedule_id)
            assert snap is not None and snap.status is ScheduleStatus.DELIVERED


NOT_BOOLS = ["no", "false", 0, 1, None]


@pytest.mark.parametrize("flag", ["create", "use_database_clock", "listen"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_postgres_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    flag: str, value: object
) -> None:
    """A flag that is not a bool is refused, never read as truthy (``create="no"`` would create
    the table, ``use_database_clock="no"`` turn the server's clock on): nothing is created."""
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


@pytest.mark.parametrize("kind", ["failed", "snoozed"])
def test_a_hold_past_the_year_9999_is_refused_on_the_database_clock(
    pg_url: str, table: str, kind: str
) -> None:
    """The server computes the deadline, but one past 9999 is refused before any write
    (a snooze once wrote a year-11020 lease, leaving the row undecodable)."""
    with PostgresScheduleStore.open(pg_url, table=table, use_database_clock=True) as store:
        now = datetime.now(UTC)
        msg = ScheduledMessage.delay(Target.outbox(), now - timedelta(seconds=1), "ev", 1)
        store.insert(msg, 3)
        [occ] = store.claim_due(now, 1, timedelta(seconds=30))
        far = timedelta(days=365 * 9000)
        item = (
            Settlement.failed(msg.schedule_id, far, "x", occ.leased_until)
            if kind == "failed"
            else Settlement.snoozed(msg.schedule_id, far, occ.leased_until)
        )
        with pytest.raises(InvalidConfiguration, match="past the year 9999"):
            store.settle([item])
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.leased_until == occ.leased_until
