"""SqliteScheduleStore.open(driver="sqlite3"): the store on the standard library's
sqlite3, and the rule of one SQLite library per file per process.

(The contract suite runs on a ``driver="sqlite3"`` store too: tests/conftest.py.)"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import (
    InvalidArgument,
    InvalidConfiguration,
    ScheduledMessage,
    StoreError,
    Target,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.store.sqlite.driver import (
    MIN_SQLITE3,
    check_sqlite3_version,
    shares_sqlite_with_apsw,
)

from .test_sqlite_store import POSIX, _as_another_user, shared_dir  # noqa: F401

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TWO_COPIES = not shares_sqlite_with_apsw()


def due(n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), T0, "e", {"n": n})


def fingerprint(db: Path) -> list[tuple[str, bytes]]:
    """The database and its side files, byte for byte."""
    return sorted((p.name, p.read_bytes()) for p in db.parent.iterdir() if p.is_file())


def test_the_sqlite3_driver_uses_sqlite3_connections(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "s.db", driver="sqlite3") as store:
        assert store.driver == "sqlite3"
        assert isinstance(getattr(store._conn, "raw", None), sqlite3.Connection)
        message = due()
        store.insert(message, 3)
        assert [s.schedule_id for s in store.list_pending()] == [message.schedule_id]
    with SqliteScheduleStore.open(tmp_path / "s.db") as store:  # the same file, on apsw
        assert store.driver == "apsw" and isinstance(store._conn, apsw.Connection)
        assert len(store.list_pending()) == 1


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"driver": "pysqlite"}, "driver must be 'apsw' or 'sqlite3', got 'pysqlite'"),
        ({"driver": None}, "got None"),
        ({"driver": "sqlite3", "vfs": "unix"}, "vfs='unix' cannot be used with driver='sqlite3'"),
    ],
)
def test_bad_driver_settings_are_refused_before_any_file(
    tmp_path: Path, kwargs: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidConfiguration, match=words):
        SqliteScheduleStore.open(tmp_path / "s.db", **kwargs)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_too_old_a_sqlite_is_named_with_the_minimum() -> None:
    with pytest.raises(
        InvalidConfiguration, match=r"needs SQLite 3\.35\.0 .* runs SQLite 3\.34\.1"
    ):
        check_sqlite3_version((3, 34, 1))
    check_sqlite3_version(MIN_SQLITE3)
    check_sqlite3_version(sqlite3.sqlite_version_info)  # this machine's passes


@pytest.mark.skipif(not TWO_COPIES, reason="sqlite3 and apsw share one SQLite here")
@pytest.mark.parametrize(("first", "second"), [("apsw", "sqlite3"), ("sqlite3", "apsw")])
@pytest.mark.parametrize("readonly", [False, True])
def test_one_library_per_file_per_process(
    tmp_path: Path, first: str, second: str, readonly: bool
) -> None:
    db = tmp_path / "s.db"
    one = SqliteScheduleStore.open(db, driver=first)
    two = SqliteScheduleStore.open(db, driver=first)  # the same library: fine
    one.insert(due(), 3)
    before = fingerprint(db)
    with pytest.raises(InvalidConfiguration, match="second copy of SQLite") as info:
        SqliteScheduleStore.open(db, driver=second, readonly=readonly)
    assert f"driver={first!r} already" in str(info.value)
    assert fingerprint(db) == before, "the refused opening touched the file"
    one.close()
    with pytest.raises(InvalidConfiguration):  # `two` still holds it
        SqliteScheduleStore.open(db, driver=second)
    two.close()
    with SqliteScheduleStore.open(db, driver=second) as other:  # no store of `first` left
        assert len(other.list_pending()) == 1


@pytest.mark.skipif(not TWO_COPIES, reason="sqlite3 and apsw share one SQLite here")
def test_the_guard_follows_the_file_not_its_name(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    link = tmp_path / "link.db"
    with SqliteScheduleStore.open(db, driver="sqlite3"):
        os.symlink(db, link)
        with pytest.raises(InvalidConfiguration, match="second copy of SQLite"):
            SqliteScheduleStore.open(link)
    with SqliteScheduleStore.open(tmp_path / "other.db"):  # another file: fine
        pass


@pytest.mark.skipif(not TWO_COPIES, reason="sqlite3 and apsw share one SQLite here")
def test_an_apsw_connection_is_refused_by_a_sqlite3_store(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver="sqlite3") as store:
        conn = apsw.Connection(str(db))
        conn.execute("BEGIN IMMEDIATE")
        with pytest.raises(InvalidArgument, match="second copy of SQLite") as info:
            store.insert(due(), 3, connection=conn)
        assert "driver='sqlite3'" in str(info.value) and "sqlite3.Connection" in str(info.value)
        conn.execute("ROLLBACK")
        conn.close()
        assert store.list_pending() == []


def test_a_busy_file_is_a_store_error_naming_the_lock(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver="sqlite3", busy_timeout=timedelta(0)) as store:
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError, match="stayed locked") as info:
            store.insert(due(), 3)
        assert isinstance(info.value.__cause__, apsw.BusyError)
        assert isinstance(info.value.__cause__.__cause__, sqlite3.OperationalError)
        holder.execute("ROLLBACK")
        holder.close()
        store.insert(due(), 3)
        assert len(store.list_pending()) == 1


def test_a_read_only_store_on_sqlite3_never_writes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver="sqlite3") as store:
        store.insert(due(), 3)
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, driver="sqlite3", readonly=True) as store:
        assert len(store.list_pending()) == 1
        assert store.stats().pending == 1
        with pytest.raises(StoreError, match="read-only"):
            store.insert(due(1), 3)
    assert db.read_bytes() == before


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_a_read_only_store_leaves_no_wal_files_and_refuses_writes_in_sql(
    tmp_path: Path, driver: str
) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver=driver) as store:
        store.insert(due(), 3)
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, driver=driver, readonly=True) as store:
        assert len(store.list_pending()) == 1
        with pytest.raises(apsw.ReadOnlyError):  # query_only, below the store's own guard
            conn = store._conn
            assert conn is not None
            conn.execute("DELETE FROM scheduled_messages")
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_a_read_only_store_beside_an_open_writer_keeps_its_files(
    tmp_path: Path, driver: str
) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver=driver) as writer:
        writer.insert(due(), 3)
        with SqliteScheduleStore.open(db, driver=driver, readonly=True) as reader:
            writer.insert(due(1), 3)  # in the WAL: the reader sees it
            assert len(reader.list_pending()) == 2
        assert {"s.db-wal", "s.db-shm"} <= {p.name for p in tmp_path.iterdir()}
        writer.insert(due(2), 3)
    with SqliteScheduleStore.open(db, driver=driver, readonly=True) as reader:
        assert len(reader.list_pending()) == 3


def test_a_forked_child_opens_its_own_sqlite3_connection(tmp_path: Path) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db, driver="sqlite3") as store:
        store.insert(due(0), 3)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                store.insert(due(1), 3)
                code = 0 if isinstance(getattr(store._conn, "raw", None), sqlite3.Connection) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        store.insert(due(2), 3)  # the parent's connection goes on
        assert len(store.list_pending()) == 3


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_read_only_file_is_refused_on_sqlite3(shared_dir: Path) -> None:  # noqa: F811
    db = shared_dir / "ro.db"
    SqliteScheduleStore.open(db, driver="sqlite3").close()
    db.chmod(0o444)
    shared_dir.chmod(0o777)
    before = db.read_bytes()

    def action() -> None:
        with SqliteScheduleStore.open(db, driver="sqlite3") as store:
            store.insert(due(), 3)

    outcome = _as_another_user(action)
    assert outcome.startswith("StoreError:") and str(db) in outcome, outcome
    assert "read-only" in outcome
    assert db.read_bytes() == before


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_file_the_user_may_only_read_opens_read_only_on_sqlite3() -> None:
    """As in test_sqlite_schema (a 0444 WAL file in a 0555 folder, as another user: no
    ``-shm`` can be made, so it is read as immutable), with driver="sqlite3"."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="hexeract-ro-"))
    try:
        db = folder / "s.db"
        message = due()
        with SqliteScheduleStore.open(db, driver="sqlite3") as store:
            store.insert(message, 3)
        db.chmod(0o444)
        folder.chmod(0o555)
        before = fingerprint(db)

        def action() -> None:
            with SqliteScheduleStore.open(db, readonly=True, driver="sqlite3") as store:
                [snap] = store.list_pending()
                assert snap.schedule_id == message.schedule_id

        assert _as_another_user(action) == "ok"
        assert fingerprint(db) == before
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder)


def test_a_failed_opening_keeps_no_claim_on_the_file(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SqliteScheduleStore.open(db).close()
    with pytest.raises(StoreError, match="no table"):
        SqliteScheduleStore.open(db, table="missing", create=False, driver="sqlite3")
    with SqliteScheduleStore.open(db) as store:  # apsw: nothing of sqlite3's is left
        assert store.list_pending() == []
