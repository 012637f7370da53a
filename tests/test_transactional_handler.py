"""What a transactional sink's handler may do with the sink's connection, on SQLite.

The handler must not end the sink's transaction (README: "The handler must not commit,
roll back or keep the connection"): ``conn.commit()``, ``conn.rollback()``, ``with conn:``
on a ``sqlite3`` connection and ``COMMIT``/``ROLLBACK``/``BEGIN`` statements are refused,
so that its writes and the acknowledgement still commit together or not at all.
Savepoints and the shape of its rows are the handler's own; the sink's connection keeps
its library's claim on the file."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
    TransactionalSink,
)
from hexeract_lite.snapshot import ScheduleStatus
from hexeract_lite.store.sqlite import SqliteScheduleStore

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CONFIG = SchedulerWorkerConfig(
    lease=timedelta(seconds=60),
    dispatch_timeout=timedelta(seconds=2),
    retry_base_delay=timedelta(seconds=1),
    retry_max_delay=timedelta(seconds=1),
    jitter=False,
)


@pytest.fixture(params=["apsw", "sqlite3"])
def driver(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(tmp_path: Path, driver: str, clock: ManualClock) -> Iterator[SqliteScheduleStore]:
    with SqliteScheduleStore.open(tmp_path / "app.db", clock=clock, driver=driver) as s:
        conn = _helper(s)
        conn.execute("CREATE TABLE effects (n INTEGER, step TEXT)")
        conn.close()
        yield s


def _helper(store: SqliteScheduleStore) -> Any:
    """An autocommit connection on the store's file, of the store's library."""
    if store.driver == "sqlite3":
        return sqlite3.connect(store.path, timeout=5, isolation_level=None)
    conn = apsw.Connection(str(store.path))
    conn.set_busy_timeout(5000)
    return conn


def _effects(store: SqliteScheduleStore) -> list[tuple[Any, ...]]:
    conn = _helper(store)
    try:
        return [tuple(row) for row in conn.execute("SELECT n, step FROM effects ORDER BY rowid")]
    finally:
        conn.close()


def _drain(store: SqliteScheduleStore, clock: ManualClock, handler: Callable[..., Any]) -> int:
    """Run the worker with ``handler`` until nothing is pending; the handler's calls."""
    calls = 0

    def counted(message: ScheduledMessage, conn: Any) -> Any:
        nonlocal calls
        calls += 1
        return handler(message, conn)

    worker = SchedulerWorker(store, TransactionalSink(counted), CONFIG)
    for _ in range(10):
        worker.run_once()
        if not store.list_pending():
            break
        clock.advance(timedelta(seconds=5))
    return calls


def _commit(conn: Any) -> None:
    if isinstance(conn, sqlite3.Connection):
        conn.commit()
    else:
        conn.execute("COMMIT")


def _rollback(conn: Any) -> None:
    if isinstance(conn, sqlite3.Connection):
        conn.rollback()
    else:
        conn.execute("ROLLBACK")


def _one(store: SqliteScheduleStore, max_attempts: int = 3) -> ScheduledMessage:
    m = ScheduledMessage.delay(Target.mediator(), T0 - timedelta(seconds=1), "remind", {"n": 1})
    store.insert(m, max_attempts)
    return m


def test_a_handler_that_rolls_back_and_writes_again_never_applies_its_effect(
    store: SqliteScheduleStore, clock: ManualClock
) -> None:
    """A handler's rollback is refused: its writes after it never commit on their own (each
    attempt rolls back whole) and the occurrence dead-letters with the reason."""
    m = _one(store)

    def handler(message: ScheduledMessage, conn: Any) -> None:
        conn.execute("INSERT INTO effects VALUES (1, 'before')")
        _rollback(conn)
        conn.execute("INSERT INTO effects VALUES (1, 'after')")

    calls = _drain(store, clock, handler)
    assert calls == 3
    assert _effects(store) == []
    snap = store.inspect(m.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DEAD_LETTERED
    assert "may not end the sink's transaction" in (snap.last_error or "")


def test_a_handler_that_commits_then_raises_leaves_neither_effect_nor_ack(
    store: SqliteScheduleStore, clock: ManualClock
) -> None:
    """A handler's commit is refused, so its writes and the acknowledgement still commit
    together or not at all: a later exception leaves neither."""
    m = _one(store, max_attempts=1)

    def handler(message: ScheduledMessage, conn: Any) -> None:
        conn.execute("INSERT INTO effects VALUES (1, 'before')")
        _commit(conn)
        conn.execute("INSERT INTO effects VALUES (1, 'after')")
        raise RuntimeError("the handler failed after its commit")

    _drain(store, clock, handler)
    assert _effects(store) == []
    snap = store.inspect(m.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DEAD_LETTERED
    assert "COMMIT" in (snap.last_error or "")


def test_with_conn_in_a_sqlite3_handler_is_refused_with_a_clear_error(
    tmp_path: Path, clock: ManualClock
) -> None:
    """``with conn:`` (commit on exit) is the usual sqlite3 idiom; in a handler it would
    commit the sink's transaction: refused, nothing applied, the error says why."""
    with SqliteScheduleStore.open(tmp_path / "a.db", clock=clock, driver="sqlite3") as store:
        conn = _helper(store)
        conn.execute("CREATE TABLE effects (n INTEGER, step TEXT)")
        conn.close()
        m = _one(store, max_attempts=1)

        def handler(message: ScheduledMessage, conn: Any) -> None:
            with conn:
                conn.execute("INSERT INTO effects VALUES (1, 'in with')")

        _drain(store, clock, handler)
        assert _effects(store) == []
        snap = store.inspect(m.schedule_id)
        assert snap is not None and snap.status is ScheduleStatus.DEAD_LETTERED
        error = snap.last_error or ""
        assert "may not end the sink's transaction" in error and "COMMIT" in error


def test_savepoints_in_a_handler_still_work(store: SqliteScheduleStore, clock: ManualClock) -> None:
    """Savepoints nest inside the sink's transaction: allowed, and the handler's rolled
    back savepoint leaves only what it kept."""
    m = _one(store)

    def handler(message: ScheduledMessage, conn: Any) -> None:
        conn.execute("INSERT INTO effects VALUES (1, 'kept')")
        conn.execute("SAVEPOINT inner")
        conn.execute("INSERT INTO effects VALUES (1, 'undone')")
        conn.execute("ROLLBACK TO inner")
        conn.execute("RELEASE inner")

    assert _drain(store, clock, handler) == 1
    assert _effects(store) == [(1, "kept")]
    snap = store.inspect(m.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DELIVERED


def test_a_commit_is_refused_on_a_connection_the_sink_committed_on_before(
    store: SqliteScheduleStore, clock: ManualClock
) -> None:
    """The sink's connection has run (and cached) its own COMMIT for the first
    occurrence; the second occurrence's handler's COMMIT is still refused."""
    first = _one(store)
    second = ScheduledMessage.delay(Target.mediator(), T0, "remind", {"n": 2})
    store.insert(second, 1)

    def handler(message: ScheduledMessage, conn: Any) -> None:
        n = message.payload["n"]
        conn.execute("INSERT INTO effects VALUES (?, 'write')", (n,))
        if n == 2:
            _commit(conn)

    _drain(store, clock, handler)
    assert _effects(store) == [(1, "write")]
    snaps = {m.schedule_id: store.inspect(m.schedule_id) for m in (first, second)}
    assert [s.status if s else None for s in snaps.values()] == [
        ScheduleStatus.DELIVERED,
        ScheduleStatus.DEAD_LETTERED,
    ]


# -- the caller's connection with its own row shape ----------------------------------


def _dict_rows(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


def _app_connection(store: SqliteScheduleStore, shape: str) -> Any:
    """The app's connection on the store's file, rows shaped as the app likes them."""
    if store.driver == "sqlite3":
        conn: Any = sqlite3.connect(store.path, timeout=5, isolation_level=None)
        if shape == "dict":
            conn.row_factory = _dict_rows
        else:
            conn.text_factory = bytes
    else:
        import apsw.ext

        conn = apsw.Connection(str(store.path))
        conn.set_busy_timeout(5000)
        conn.row_trace = apsw.ext.DataClassRowFactory()
    conn.execute("BEGIN")
    return conn


@pytest.mark.parametrize(
    ("driver", "shape"), [("apsw", "row tracer"), ("sqlite3", "dict"), ("sqlite3", "bytes")]
)
def test_ensure_through_a_connection_whose_rows_are_shaped_by_the_app(
    store: SqliteScheduleStore, shape: str
) -> None:
    """ensure and insert(connection=) work through the app's connection whatever its row shape:
    a dict row_factory or text_factory=bytes (sqlite3), a row tracer (apsw.ext's
    DataClassRowFactory)."""
    name = "app.shaped"
    first = ScheduledMessage.delay(Target.mediator(), T0 + timedelta(hours=1), "e", {}, name=name)
    changed = ScheduledMessage.delay(
        Target.mediator(), T0 + timedelta(hours=1), "e", {"v": 2}, name=name
    )
    for message, expected in ((first, "created"), (changed, "updated"), (changed, "unchanged")):
        conn = _app_connection(store, shape)
        try:
            assert store.ensure(message, 3, connection=conn).value == expected
            conn.execute("COMMIT")
        finally:
            conn.close()
    snap = store.inspect(first.schedule_id)
    assert snap is not None and snap.payload_json == '{"v":2}'


def test_a_handler_that_shapes_its_rows_does_not_break_the_sink(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A handler that sets row_factory and text_factory on the sink's sqlite3 connection (kept
    for the next occurrences) does not break the later dispatches."""
    with SqliteScheduleStore.open(tmp_path / "a.db", clock=clock, driver="sqlite3") as store:
        messages = [
            ScheduledMessage.delay(Target.mediator(), T0 - timedelta(seconds=1), "e", {"n": n})
            for n in range(3)
        ]
        store.insert_many(messages, 1)

        def handler(message: ScheduledMessage, conn: sqlite3.Connection) -> None:
            conn.row_factory = _dict_rows
            conn.text_factory = bytes
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}

        _drain(store, clock, handler)
        statuses = [store.inspect(m.schedule_id) for m in messages]
        assert [s.status if s else None for s in statuses] == [ScheduleStatus.DELIVERED] * 3


# -- one SQLite library per file per process ------------------------------------------


def test_the_sinks_connection_keeps_the_file_for_its_library(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A driver='sqlite3' store's claim on its file lasts while the transactional sink's
    sqlite3 connection (run_once's) is open on it, after the store closes: an apsw store is
    refused beside it (two copies of SQLite on one file in one process) until the sink's
    connection closes."""
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.store.sqlite.driver import shares_sqlite_with_apsw

    if shares_sqlite_with_apsw():
        pytest.skip("apsw and sqlite3 share one SQLite here: nothing to refuse")
    db = tmp_path / "a.db"
    store = SqliteScheduleStore.open(db, clock=clock, driver="sqlite3")
    _one(store)
    worker = SchedulerWorker(store, TransactionalSink(lambda m, c: None), CONFIG)
    assert worker.run_once().delivered == 1
    store.close()
    with pytest.raises(InvalidConfiguration, match="driver='sqlite3'"):
        SqliteScheduleStore.open(db, driver="apsw")
    with worker.start():  # a worker leaving its loop closes the sink's connection
        pass
    SqliteScheduleStore.open(db, driver="apsw").close()


def test_a_transactional_handler_that_cannot_take_message_and_connection_is_refused() -> None:
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.transactional import TransactionalSink

    for bad in (lambda message: None, lambda: None, lambda a, b, c: None):
        with pytest.raises(InvalidConfiguration, match="handler\\(message, connection\\)"):
            TransactionalSink(bad)  # type: ignore[arg-type]
    for good in (lambda m, c: None, lambda m, c, extra=1: None, lambda *args: None, print):
        TransactionalSink(good)


def test_a_transactional_sink_dispatched_outside_a_worker_names_the_stores_it_runs_on() -> None:
    """Called as a plain sink (no worker, so no lease to write under), it refuses with
    a DispatchError naming every store it does run on, MySQL's included."""
    from hexeract_lite import DispatchError

    sink = TransactionalSink(lambda message, connection: None)
    message = ScheduledMessage.delay(Target.outbox(), T0, "a.b", {"n": 1})
    with pytest.raises(DispatchError, match="SQLite, PostgreSQL or MySQL store"):
        sink.dispatch(message)
