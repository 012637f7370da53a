"""hexeract_lite.open_store: a store from the same URLs, paths and DATABASE_URL as --conn."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hexeract_lite import (
    InvalidConfiguration,
    SqliteScheduleStore,
    StoreError,
    UnsupportedConnection,
    open_store,
)
from tests import pg


@pytest.mark.parametrize("spelling", ["url", "path", "relative", "env"])
def test_a_sqlite_url_a_path_or_database_url_opens_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    db = tmp_path / "app.db"
    monkeypatch.chdir(tmp_path)
    url = {"url": f"sqlite:///{db}", "path": str(db), "relative": "app.db", "env": None}[spelling]
    if spelling == "env":
        monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    with open_store(url) as store:
        assert isinstance(store, SqliteScheduleStore)
        assert store.table == "scheduled_messages"
        assert store.stats().total == 0
    assert db.is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("app.db")) == []


def test_options_go_to_the_store_and_the_table_is_validated_first(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with open_store(str(db), table="jobs", durability="normal") as store:
        assert isinstance(store, SqliteScheduleStore)
        assert (store.table, store.durability) == ("jobs", "normal")
    other = tmp_path / "other.db"
    with pytest.raises(InvalidConfiguration, match="drop table"):
        open_store(str(other), table="drop table;")
    with pytest.raises(TypeError, match="pool_max_size"):
        open_store(str(other), pool_max_size=4)
    with pytest.raises(UnsupportedConnection, match="'mongodb'"):
        open_store("mongodb://host/db")
    assert not other.exists()


@pytest.mark.parametrize(
    ("conn", "says"),
    [
        ("sqlite:///:memory:", "kept on disk"),
        ("sqlite://:memory:", "kept on disk"),
        ("sqlite://app.db?mode=ro", "has a query ('?mode=ro')"),
        ("sqlite:///tmp/app.db?cache=shared", "has a query ('?cache=shared')"),
    ],
)
def test_a_sqlite_url_that_names_no_plain_file_is_refused_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conn: str, says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedConnection, match=re.escape(says)):
        open_store(conn)
    assert list(tmp_path.iterdir()) == []


def test_readonly_never_creates_and_never_writes(tmp_path: Path) -> None:
    db = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no database at"):
        open_store(str(db), readonly=True)
    with pytest.raises(InvalidConfiguration, match="readonly"):
        open_store(str(db), create=True, readonly=True)
    assert not db.exists()


def test_a_postgresql_url_opens_the_postgresql_store() -> None:
    url = pg.require_server()
    from hexeract_lite.store.postgres import PostgresScheduleStore

    table = pg.unique_table()
    try:
        with open_store(url, table=table, pool_max_size=2) as store:
            assert isinstance(store, PostgresScheduleStore)
            assert store.stats().total == 0
    finally:
        pg.drop_table(url, table)
