"""ensure(..., connection=): a named schedule created or changed inside the caller's
transaction, on SQLite (apsw and sqlite3 stores, each with its own library's
connection) and PostgreSQL (psycopg): commit -> there, rollback -> nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidArgument,
    ManualClock,
    SchedulerControl,
    ScheduleStore,
)
from hexeract_lite.store.changes import EnsureResult
from hexeract_lite.store.sqlite import SqliteScheduleStore

from . import pg

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
AT = T0 + timedelta(hours=1)


@dataclass
class Backend:
    store: ScheduleStore
    open_tx: Callable[[], Any]
    """A new connection of the application's with a transaction open."""


def _sqlite(tmp_path: Path, driver: str) -> Iterator[Backend]:
    db = tmp_path / "app.db"
    store = SqliteScheduleStore.open(db, clock=ManualClock(T0), driver=driver)

    def open_tx() -> Any:
        conn: Any
        if driver == "sqlite3":
            conn = sqlite3.connect(db, timeout=5, isolation_level=None)
        else:
            conn = apsw.Connection(str(db))
            conn.set_busy_timeout(5000)
        conn.execute("BEGIN IMMEDIATE")
        return conn

    try:
        yield Backend(store, open_tx)
    finally:
        store.close()


def _postgres() -> Iterator[Backend]:
    psycopg = pytest.importorskip("psycopg")
    from hexeract_lite.store.postgres import PostgresScheduleStore

    url = pg.require_server()
    table = pg.unique_table()
    store = PostgresScheduleStore.open(url, table=table, clock=ManualClock(T0))

    def open_tx() -> Any:
        conn = psycopg.connect(url)  # not autocommit: the first statement begins
        conn.execute("SELECT 1")
        return conn

    try:
        yield Backend(store, open_tx)
    finally:
        store.close()
        pg.drop_table(url, table)


@pytest.fixture(params=["sqlite-apsw", "sqlite-sqlite3", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgres":
        yield from _postgres()
    else:
        yield from _sqlite(tmp_path, request.param.removeprefix("sqlite-"))


def finish(conn: Any, commit: bool) -> None:
    if isinstance(conn, apsw.Connection):
        conn.execute("COMMIT" if commit else "ROLLBACK")
    else:
        conn.commit() if commit else conn.rollback()
    conn.close()


def declare(control: SchedulerControl, conn: Any, payload: object) -> EnsureResult:
    return control.ensure(
        "reports/daily", event_type="report", payload=payload, at=AT, connection=conn
    )


@pytest.mark.parametrize("commit", [True, False])
def test_create_inside_the_callers_transaction(backend: Backend, commit: bool) -> None:
    control = SchedulerControl(backend.store)
    conn = backend.open_tx()
    assert declare(control, conn, {"v": 1}) is EnsureResult.CREATED
    assert control.store.list_named("reports/") == [], "nothing committed yet"
    finish(conn, commit)
    named = control.store.list_named("reports/")
    if commit:
        assert [(s.name, json.loads(s.payload_json)) for s in named] == [
            ("reports/daily", {"v": 1})
        ]
    else:
        assert named == []
        assert backend.store.list_pending() == []


@pytest.mark.parametrize("commit", [True, False])
def test_update_inside_the_callers_transaction(backend: Backend, commit: bool) -> None:
    control = SchedulerControl(backend.store)
    assert declare(control, None, {"v": 1}) is EnsureResult.CREATED
    conn = backend.open_tx()
    assert declare(control, conn, {"v": 1}) is EnsureResult.UNCHANGED
    assert declare(control, conn, {"v": 2}) is EnsureResult.UPDATED
    [before] = control.store.list_named("reports/")
    assert json.loads(before.payload_json) == {"v": 1}, (
        "the change is the caller's until it commits"
    )
    finish(conn, commit)
    [after] = control.store.list_named("reports/")
    assert json.loads(after.payload_json) == ({"v": 2} if commit else {"v": 1})
    assert len(backend.store.list_pending()) == 1


def test_a_closed_connection_is_refused_and_writes_nothing(backend: Backend) -> None:
    conn = backend.open_tx()
    conn.close()
    with pytest.raises(InvalidArgument, match="closed"):
        declare(SchedulerControl(backend.store), conn, {"v": 1})
    assert backend.store.list_pending() == []


def test_the_memory_store_refuses_a_connection() -> None:
    control = SchedulerControl(InMemoryScheduleStore(clock=ManualClock(T0)))
    with pytest.raises(InvalidArgument, match="cannot write inside an application's"):
        declare(control, object(), {"v": 1})
    assert control.store.list_pending() == []
