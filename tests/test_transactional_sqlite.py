"""The transactional API on SQLite: enqueue inside the caller's transaction (apsw and sqlite3), and
the transactional sink whose handler's writes commit with the acknowledgement.

A sqlite3 caller uses a store opened with ``driver="sqlite3"`` (unless apsw and sqlite3
share one SQLite here), and every helper connection of a test uses its store's library:
two copies of SQLite in one process must not share a file."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    DuplicateSchedule,
    InMemoryScheduleStore,
    InvalidArgument,
    InvalidConfiguration,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
    TransactionalSink,
)
from hexeract_lite.snapshot import ScheduleStatus
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.store.sqlite.transaction import shares_sqlite_with_apsw

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = SchedulerWorkerConfig(
    lease=timedelta(seconds=60),
    dispatch_timeout=timedelta(seconds=2),
    retry_base_delay=timedelta(seconds=1),
)


def due(n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), T0 - timedelta(seconds=1), "remind", {"n": n})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "app.db"


_LIB: dict[Path, str] = {}
"""The SQLite library (the store's driver) each test's file is used with."""


def helper(db: Path) -> Any:
    """An autocommit connection on ``db`` of the library its store uses."""
    if _LIB.get(db, "apsw") == "sqlite3":
        return sqlite3.connect(db, timeout=5, isolation_level=None)
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(5000)
    return conn


@pytest.fixture(params=["apsw", "sqlite3"])
def lib(request: pytest.FixtureRequest) -> str:
    """The store's driver, for the tests that run on both."""
    name: str = request.param
    return name


@pytest.fixture
def store(
    db: Path, clock: ManualClock, request: pytest.FixtureRequest
) -> Iterator[SqliteScheduleStore]:
    """A store with the driver of the test's caller connection (``driver``) or ``lib``."""
    chosen = "apsw"
    if "driver" in request.fixturenames:
        chosen = "apsw" if request.getfixturevalue("driver") == "apsw" else "sqlite3"
    elif "lib" in request.fixturenames:
        chosen = request.getfixturevalue("lib")
    _LIB[db] = chosen
    with SqliteScheduleStore.open(db, clock=clock, driver=chosen) as s:
        conn = helper(db)
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
        conn.execute("CREATE TABLE effects (occurrence TEXT PRIMARY KEY, n INTEGER CHECK (n >= 0))")
        conn.close()
        yield s
    _LIB.pop(db, None)


def rows(db: Path, sql: str = "SELECT count(*) FROM scheduled_messages") -> int:
    conn = helper(db)
    try:
        [(n,)] = conn.execute(sql).fetchall()
        assert isinstance(n, int)
        return n
    finally:
        conn.close()


def deliveries(store: SqliteScheduleStore) -> list[ScheduledMessage]:
    seen: list[ScheduledMessage] = []
    SchedulerWorker(store, seen.append, CONFIG).run_once()
    return seen


# -- enqueue in the caller's transaction --------------------------------------------


def apsw_conn(db: Path) -> apsw.Connection:
    conn = apsw.Connection(str(db))
    conn.set_busy_timeout(5000)
    return conn


def sqlite3_conn(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, timeout=5)  # the default: implicit transactions


def sqlite3_manual(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, timeout=5, isolation_level=None)


def begin(conn: Any) -> None:
    if not (isinstance(conn, sqlite3.Connection) and conn.isolation_level is not None):
        conn.execute("BEGIN IMMEDIATE")


def finish(conn: Any, commit: bool) -> None:
    if isinstance(conn, sqlite3.Connection) and conn.isolation_level is not None:
        conn.commit() if commit else conn.rollback()
    else:
        conn.execute("COMMIT" if commit else "ROLLBACK")


OPENERS: dict[str, Callable[[Path], Any]] = {
    "apsw": apsw_conn,
    "sqlite3": sqlite3_conn,
    "sqlite3-manual": sqlite3_manual,
}
ONE_SQLITE = shares_sqlite_with_apsw()


@pytest.fixture(params=sorted(OPENERS))
def driver(request: pytest.FixtureRequest) -> str:
    """The caller's connection; a sqlite3 one goes with a ``driver="sqlite3"`` store."""
    name: str = request.param
    return name


@pytest.mark.parametrize("order_first", [True, False])
def test_commit_delivers_once(
    store: SqliteScheduleStore, db: Path, driver: str, order_first: bool
) -> None:
    conn = OPENERS[driver](db)
    message = due()
    begin(conn)
    if order_first:
        conn.execute("INSERT INTO orders (item) VALUES ('book')")
    # (a transaction's first write may restart the WAL, which moves data_version)
    seen_version = store.data_version()
    store.insert(message, 3, connection=conn)
    if not order_first:
        conn.execute("INSERT INTO orders (item) VALUES ('book')")
    # inside the transaction: invisible to the store, nothing committed, no wake-up
    assert store.inspect(message.schedule_id) is None
    if order_first:
        assert store.data_version() == seen_version
    seen_version = store.data_version()
    assert (
        conn.in_transaction if isinstance(conn, sqlite3.Connection) else not conn.get_autocommit()
    )
    finish(conn, commit=True)
    assert store.data_version() != seen_version  # an idle worker notices the commit
    assert rows(db, "SELECT count(*) FROM orders") == 1
    assert [m.schedule_id for m in deliveries(store)] == [message.schedule_id]
    assert deliveries(store) == []
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DELIVERED
    conn.close()


def test_rollback_leaves_nothing(store: SqliteScheduleStore, db: Path, driver: str) -> None:
    conn = OPENERS[driver](db)
    begin(conn)
    conn.execute("INSERT INTO orders (item) VALUES ('book')")
    seen_version = store.data_version()
    store.insert_many([due(1), due(2)], 3, connection=conn)
    finish(conn, commit=False)
    assert rows(db) == 0
    assert rows(db, "SELECT count(*) FROM orders") == 0
    assert store.data_version() == seen_version  # no wake-up
    assert deliveries(store) == []
    conn.close()


def test_duplicate_in_a_batch_undoes_the_batch_only(
    store: SqliteScheduleStore, db: Path, driver: str
) -> None:
    stored = due(0)
    store.insert(stored, 3)
    conn = OPENERS[driver](db)
    begin(conn)
    conn.execute("INSERT INTO orders (item) VALUES ('book')")
    fresh = due(1)
    with pytest.raises(DuplicateSchedule) as info:
        store.insert_many([fresh, stored], 3, connection=conn)
    assert info.value.schedule_id == stored.schedule_id
    with pytest.raises(DuplicateSchedule):
        store.insert(stored, 3, connection=conn)
    # the caller's transaction is still open, with its own write and none of ours
    finish(conn, commit=True)
    assert rows(db, "SELECT count(*) FROM orders") == 1
    assert rows(db) == 1
    assert store.inspect(fresh.schedule_id) is None
    conn.close()


@pytest.mark.skipif(ONE_SQLITE, reason="sqlite3 and apsw share one SQLite here")
@pytest.mark.parametrize("opener", [sqlite3_conn, sqlite3_manual])
def test_sqlite3_on_a_second_copy_of_sqlite_is_refused(
    store: SqliteScheduleStore, db: Path, opener: Callable[[Path], sqlite3.Connection]
) -> None:
    conn = opener(db)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO orders (item) VALUES ('book')")
    with pytest.raises(InvalidArgument, match="second copy of SQLite") as info:
        store.insert(due(), 3, connection=conn)
    assert "driver='sqlite3'" in str(info.value)  # says what to do instead
    conn.rollback()
    conn.close()
    assert rows(db) == 0


def _bad_connections(
    db: Path, tmp_path: Path, lib: str
) -> dict[str, tuple[Callable[[], Any], str]]:
    def closed_apsw() -> Any:
        conn = apsw_conn(db)
        conn.close()
        return conn

    def closed_sqlite3() -> Any:
        conn = sqlite3_conn(db)
        conn.close()
        return conn

    def other_file() -> Any:
        other = tmp_path / "other.db"
        conn = apsw_conn(other)
        conn.execute("BEGIN")
        return conn

    def in_memory() -> Any:
        conn = sqlite3.connect(":memory:")
        conn.execute("BEGIN")
        return conn

    def readonly_apsw() -> Any:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        conn.execute("BEGIN")
        return conn

    def readonly_sqlite3() -> Any:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        conn.execute("BEGIN")
        return conn

    def query_only() -> Any:
        conn = sqlite3_manual(db)
        conn.execute("PRAGMA query_only = 1")
        conn.execute("BEGIN")
        return conn

    def autocommit_sqlite3() -> Any:
        return sqlite3_manual(db)

    def autocommit_apsw() -> Any:
        return apsw_conn(db)

    def other_thread() -> Any:
        made: list[sqlite3.Connection] = []
        thread = threading.Thread(target=lambda: made.append(sqlite3_conn(db)))
        thread.start()
        thread.join()
        return made[0]

    return {
        "closed apsw": (closed_apsw, "closed"),
        "closed sqlite3": (closed_sqlite3, "closed"),
        "another file": (other_file, "another database"),
        "in memory": (in_memory, "another database"),
        "read-only apsw": (readonly_apsw, "read-only"),
        # (mode=ro shows only when writing: a second copy of SQLite is refused first)
        "read-only sqlite3": (
            readonly_sqlite3,
            "read-only" if ONE_SQLITE or lib == "sqlite3" else "second copy of SQLite",
        ),
        "query_only": (query_only, "read-only"),
        "sqlite3 autocommit": (autocommit_sqlite3, "autocommit mode"),
        "apsw autocommit": (autocommit_apsw, "no open transaction"),
        "another thread": (other_thread, "another thread"),
        "not a connection": (lambda: object(), "must be an apsw.Connection"),
    }


BAD = [
    "closed apsw",
    "closed sqlite3",
    "another file",
    "in memory",
    "read-only apsw",
    "read-only sqlite3",
    "query_only",
    "sqlite3 autocommit",
    "apsw autocommit",
    "another thread",
    "not a connection",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_connection_is_refused_and_writes_nothing(
    store: SqliteScheduleStore, db: Path, tmp_path: Path, case: str, lib: str
) -> None:
    make, words = _bad_connections(db, tmp_path, lib)[case]
    conn = make()
    calls: list[Callable[[], None]] = [
        lambda: store.insert(due(), 3, connection=conn),
        lambda: store.insert_many([due(1), due(2)], 3, connection=conn),
    ]
    for call in calls:
        with pytest.raises(InvalidArgument, match=words):
            call()
    assert rows(db) == 0
    other = tmp_path / "other.db"
    if other.exists():
        assert rows(other, "SELECT count(*) FROM sqlite_master") == 0


# -- the transactional sink ------------------------------------------------------------


def effect(message: ScheduledMessage, conn: Any) -> None:
    conn.execute(
        "INSERT INTO effects (occurrence, n) VALUES (?, ?)",
        (str(message.occurrence_id()), message.payload["n"]),
    )


def status(store: SqliteScheduleStore, message: ScheduledMessage) -> tuple[ScheduleStatus, int]:
    snap = store.inspect(message.schedule_id)
    assert snap is not None
    return snap.status, snap.attempts


def test_sink_commits_effect_and_ack_together(
    store: SqliteScheduleStore, db: Path, lib: str
) -> None:
    messages = [due(n) for n in range(3)]
    store.insert_many(messages, 3)
    kinds: set[str] = set()

    def handler(message: ScheduledMessage, conn: Any) -> None:
        kinds.add("sqlite3" if isinstance(conn, sqlite3.Connection) else type(conn).__module__)
        effect(message, conn)

    worker = SchedulerWorker(store, TransactionalSink(handler), CONFIG)
    report = worker.run_once()
    assert (report.claimed, report.delivered) == (3, 3)
    assert rows(db, "SELECT count(*) FROM effects") == 3
    assert all(status(store, m)[0] is ScheduleStatus.DELIVERED for m in messages)
    assert worker.run_once().claimed == 0
    assert kinds == {"sqlite3" if lib == "sqlite3" else "apsw"}


def test_sink_reschedules_a_cron_schedule_in_the_transaction(
    store: SqliteScheduleStore, db: Path
) -> None:
    cron = ScheduledMessage.cron(
        Target.mediator(), "0 * * * *", T0 - timedelta(hours=1), "tick", {"n": 7}
    )
    store.insert(cron, 3)
    version = store.changes.version()
    report = SchedulerWorker(store, TransactionalSink(effect), CONFIG).run_once()
    assert report.rescheduled == 1
    assert store.changes.version() != version, "a waiting worker is told of the new firing"
    snap = store.inspect(cron.schedule_id)
    assert snap is not None and snap.scheduled_for > T0
    assert rows(db, "SELECT count(*) FROM effects") == 1


def _violates(message: ScheduledMessage, conn: Any) -> None:
    effect(message, conn)
    conn.execute("INSERT INTO effects (occurrence, n) VALUES ('x', -1)")  # CHECK fails


def _raises(message: ScheduledMessage, conn: Any) -> None:
    effect(message, conn)
    raise RuntimeError("handler broke")


def _returns(message: ScheduledMessage, conn: Any) -> object:
    effect(message, conn)
    return True


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (_raises, "RuntimeError: handler broke"),
        (_violates, "ConstraintError"),
        (_returns, "returned True"),
    ],
)
def test_failing_handler_rolls_back_writes_and_ack(
    store: SqliteScheduleStore,
    db: Path,
    clock: ManualClock,
    handler: Any,
    error: str,
    lib: str,
) -> None:
    if lib == "sqlite3" and error == "ConstraintError":
        error = "IntegrityError: CHECK constraint failed"  # the handler's own sqlite3 error
    message = due(1)
    store.insert(message, 2)
    worker = SchedulerWorker(store, TransactionalSink(handler), CONFIG)
    report = worker.run_once()
    assert (report.claimed, report.retried) == (1, 1)
    assert rows(db, "SELECT count(*) FROM effects") == 0
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.last_error is not None and error in snap.last_error
    # the retry, with a handler that works now, applies the effect once
    clock.advance(timedelta(seconds=5))
    good = SchedulerWorker(store, TransactionalSink(effect), CONFIG).run_once()
    assert good.delivered == 1
    assert rows(db, "SELECT count(*) FROM effects") == 1


@pytest.mark.parametrize("how", ["sleeps", "runs SQL", "sleeps with a cursor open"])
def test_slow_handler_is_stopped_at_the_timeout(
    store: SqliteScheduleStore, db: Path, how: str, lib: str
) -> None:
    message = due(1)
    store.insert(message, 3)
    done = threading.Event()

    def slow(msg: ScheduledMessage, conn: Any) -> None:
        effect(msg, conn)
        try:
            if how == "sleeps":
                time.sleep(0.6)  # twice dispatch_timeout
            elif how == "sleeps with a cursor open":  # its statement is still running
                cursor = conn.execute(
                    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r"
                    " WHERE i < 1000000) SELECT i FROM r"
                )
                cursor.fetchone()
                time.sleep(0.6)  # twice dispatch_timeout
            else:
                conn.execute(
                    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r"
                    " WHERE i < 1000000000) SELECT count(*) FROM r"
                ).fetchall()
            conn.execute("INSERT INTO effects (occurrence, n) VALUES ('late', 1)")
        finally:
            done.set()

    config = SchedulerWorkerConfig(
        lease=timedelta(seconds=60), dispatch_timeout=timedelta(seconds=0.3)
    )
    started = time.monotonic()
    report = SchedulerWorker(store, TransactionalSink(slow), config).run_once()
    assert report.retried == 1
    assert done.wait(10)
    assert time.monotonic() - started < 10
    # nothing of the handler stayed, and the file's write lock is free
    assert rows(db, "SELECT count(*) FROM effects") == 0
    snap = store.inspect(message.schedule_id)
    assert snap is not None and snap.last_error is not None
    assert "TimeoutError" in snap.last_error
    writer = helper(db)
    writer.execute("PRAGMA busy_timeout = 0")  # the write lock is free: no wait needed
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO orders (item) VALUES ('x')")
    writer.execute("COMMIT")
    writer.close()


def test_lost_lease_rolls_back_and_skips_the_handler(
    store: SqliteScheduleStore, db: Path, clock: ManualClock, lib: str
) -> None:
    message = due(1)
    store.insert(message, 3)
    [occ] = store.claim_due(clock.now(), 1, timedelta(seconds=10))
    clock.advance(timedelta(seconds=11))
    store.claim_due(clock.now(), 1, timedelta(seconds=10))  # another worker owns it now
    called: list[ScheduledMessage] = []
    sink = TransactionalSink(lambda m, c: called.append(m))
    bound = sink.bind(store, clock, SchedulerWorker(store, sink, CONFIG).retry_policy, 1.0)
    result = bound.dispatch_occurrence(occ)
    assert getattr(result, "applied", None) is False
    assert called == []
    bound.close()


def test_sink_refuses_other_stores_and_async_handlers() -> None:

    with pytest.raises(InvalidConfiguration, match="SQLite, PostgreSQL or MySQL"):
        SchedulerWorker(InMemoryScheduleStore(), TransactionalSink(effect), CONFIG)

    async def handler(message: ScheduledMessage, conn: Any) -> None:
        return None

    with pytest.raises(InvalidConfiguration, match="plain function"):
        TransactionalSink(handler)


def test_async_worker_runs_the_transactional_sink(
    store: SqliteScheduleStore, db: Path, lib: str
) -> None:
    import asyncio

    store.insert_many([due(1), due(2)], 3)
    worker = SchedulerWorker(store, TransactionalSink(effect), CONFIG)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run_async(stop))
        for _ in range(200):
            if rows(db, "SELECT count(*) FROM effects") == 2:
                break
            await asyncio.sleep(0.02)
        stop.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    assert rows(db, "SELECT count(*) FROM effects") == 2


def test_hooks_see_transactional_deliveries(store: SqliteScheduleStore) -> None:
    from hexeract_lite.hooks import Delivered, WorkerEvent

    got: list[WorkerEvent] = []
    store.insert_many([due(1), due(2)], 3)
    worker = SchedulerWorker(store, TransactionalSink(effect), CONFIG, hooks=[got.append])
    assert worker.run_once().delivered == 2
    delivered = [e for e in got if isinstance(e, Delivered)]
    assert len(delivered) == 2
    assert all(e.duration > timedelta(0) for e in delivered)


def _open_fds_on(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path`` (Linux). Each
    connection opens the ``-wal`` file itself; the database file's descriptor of a closed
    connection may stay open while others hold locks on it (SQLite defers that close)."""
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        pytest.skip("no /proc/self/fd here")
    count = 0
    for fd in fd_dir.iterdir():
        try:
            if Path(fd.readlink()) == path:
                count += 1
        except OSError:
            continue
    return count


def test_close_releases_a_run_once_workers_thread_and_sink_connection(
    store: SqliteScheduleStore, db: Path, lib: str
) -> None:
    def effect(message: ScheduledMessage, conn: Any) -> None:
        conn.execute("INSERT INTO orders (item) VALUES (?)", (message.event_type,))

    store.insert(due(0), 3)
    wal = Path(f"{db.resolve()}-wal")
    held = _open_fds_on(wal)  # the store's own connection
    with SchedulerWorker(store, TransactionalSink(effect), CONFIG) as worker:
        assert worker.run_once().delivered == 1
        assert _open_fds_on(wal) > held  # the sink's connection, kept for the next
        assert any(t.name.startswith("hexeract-sink-") for t in threading.enumerate())
        worker.close()
        worker.close()  # idempotent
        assert _open_fds_on(wal) == held
        deadline = time.monotonic() + 5
        while any(t.name.startswith("hexeract-sink-") for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the dispatch thread did not end"
            time.sleep(0.01)
        store.insert(due(1), 3)
        assert worker.run_once().delivered == 1  # usable again: both reopened
    assert _open_fds_on(wal) == held  # the with block closed them again
    assert rows(db, "SELECT count(*) FROM orders") == 2


def test_close_is_refused_while_the_loop_runs(store: SqliteScheduleStore) -> None:
    worker = SchedulerWorker(store, TransactionalSink(lambda message, conn: None), CONFIG)
    handle = worker.start()
    try:
        with pytest.raises(RuntimeError, match="running"):
            worker.close()
    finally:
        assert handle.stop(10)
    worker.close()


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_an_app_connection_whose_temp_table_hides_the_stores_is_refused(
    tmp_path: Path, driver: str
) -> None:
    """A TEMP table of the store's name on the caller's connection would take the insert in the
    store's place: refused, as the PostgreSQL store refuses a connection that sees another
    table of that name."""
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


def test_store_write_without_connection_inside_the_handler_is_refused_at_once(
    store: SqliteScheduleStore, db: Path, lib: str
) -> None:
    """The sink's transaction holds the write lock: the store's own connection would wait
    out the busy timeout; the write is refused at once, naming ``connection=``."""
    store.insert(due(1), 3)
    errors: list[BaseException] = []

    def handler(message: ScheduledMessage, conn: Any) -> None:
        started = time.monotonic()
        try:
            store.insert(due(2), 3)
        except InvalidArgument as exc:
            errors.append(exc)
            assert time.monotonic() - started < 1
            raise
        store.insert(due(3), 3, connection=conn)  # not reached

    worker = SchedulerWorker(store, TransactionalSink(handler), CONFIG)
    report = worker.run_once()
    assert (report.claimed, report.retried) == (1, 1)
    [error] = errors
    assert "connection=" in str(error) and "transactional handler" in str(error)
    assert rows(db) == 1
    # outside a handler the store writes as ever
    store.insert(due(4), 3)
    assert rows(db) == 2


@pytest.mark.parametrize("kind", ["TABLE", "VIEW"])
def test_handler_temp_table_named_like_the_store_table_is_refused(
    store: SqliteScheduleStore, db: Path, clock: ManualClock, kind: str, lib: str
) -> None:
    """A TEMP table of the store's name, made by a handler on the sink's connection,
    would hide the store's table from every later acknowledgement: the dispatch that
    makes one fails, naming it, and the next ones deliver."""
    first, second = due(1), due(2)
    store.insert(first, 3)
    calls: list[str] = []

    def handler(message: ScheduledMessage, conn: Any) -> None:
        calls.append(str(message.schedule_id))
        if len(calls) == 1:
            body = "(x INTEGER)" if kind == "TABLE" else "AS SELECT 1 AS x"
            conn.execute(f"CREATE TEMP {kind} scheduled_messages {body}")
        effect(message, conn)

    worker = SchedulerWorker(store, TransactionalSink(handler), CONFIG)
    report = worker.run_once()
    assert (report.claimed, report.retried) == (1, 1)
    snap = store.inspect(first.schedule_id)
    assert snap is not None and snap.last_error is not None
    assert "TEMP" in snap.last_error and "scheduled_messages" in snap.last_error
    store.insert(second, 3)
    clock.advance(timedelta(seconds=5))
    report = worker.run_once()
    assert (report.claimed, report.delivered) == (2, 2)
    assert rows(db, "SELECT count(*) FROM effects") == 2
