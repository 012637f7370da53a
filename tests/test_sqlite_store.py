"""SqliteScheduleStore beyond the contract: files, settings, schema versions, errors,
indexes and threads. (The contract suite runs on it too, through conftest.)"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    InvalidConfiguration,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    StoreError,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.settlement import Settlement
from hexeract_lite.snapshot import MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from hexeract_lite.store.base import ScheduleStore
from hexeract_lite.store.schema import sqlite_ddl
from hexeract_lite.store.sqlite import (
    META_TABLE,
    SCHEMA_VERSION,
    SqliteScheduleStore,
    default_database_path,
)
from hexeract_lite.store.sqlite.statements import LEASE_CHUNK

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)
LEASE = timedelta(seconds=30)
POSIX = os.name == "posix"


def one_shot(at: datetime = T0, payload: object = None) -> ScheduledMessage:
    return ScheduledMessage.delay(
        Target.mediator(), at, "ev", {"n": 1} if payload is None else payload
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def store(db: Path, clock: ManualClock) -> Iterator[SqliteScheduleStore]:
    with SqliteScheduleStore.open(db, clock=clock) as s:
        yield s


def raw(path: Path) -> apsw.Connection:
    return apsw.Connection(str(path))


def listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


# -- opening: paths and files ------------------------------------------------------


def test_open_creates_the_file_the_table_and_every_index(db: Path) -> None:
    with SqliteScheduleStore.open(db) as store:
        assert store.path == db and store.table == "scheduled_messages"
        names = {
            row[0]
            for row in store._conn.execute(  # type: ignore[union-attr]
                "SELECT name FROM sqlite_schema WHERE tbl_name = 'scheduled_messages'"
            )
        }
    assert {
        "scheduled_messages",
        "idx_scheduled_messages_pending",
        "idx_scheduled_messages_dead_letter",
        "idx_scheduled_messages_due",
        "idx_scheduled_messages_leased",
        "idx_scheduled_messages_exhausted",
        "idx_scheduled_messages_paused",
    } <= names


def test_the_connection_is_configured(db: Path) -> None:
    with SqliteScheduleStore.open(db, busy_timeout=timedelta(milliseconds=1234)) as store:
        conn = store._conn
        assert conn is not None
        assert conn.pragma("journal_mode") == "wal"
        assert conn.pragma("synchronous") == 2, "FULL by default"
        assert conn.pragma("temp_store") == 2, "MEMORY: the claim's small sorts"
    with SqliteScheduleStore.open(db, durability="normal") as store:
        assert store._conn is not None and store._conn.pragma("synchronous") == 1
    with SqliteScheduleStore.open(db, durability="relaxed") as store:
        assert store._conn is not None and store._conn.pragma("synchronous") == 2
        assert store.durability == "relaxed"


def _wal_syncs(durability: str, db: Path, clock: ManualClock) -> dict[str, int]:
    """How many times each operation syncs the WAL, counted by a pass-through VFS."""
    from tests.reliability.faultvfs import FaultVFS

    vfs = FaultVFS("counting")
    syncs: dict[str, int] = {}
    try:
        with SqliteScheduleStore.open(db, clock=clock, durability=durability, vfs="counting") as s:

            def count(name: str, op: Callable[[], object]) -> object:
                before = vfs.switch.calls["sync", "wal"]
                result = op()
                syncs[name] = vfs.switch.calls["sync", "wal"] - before
                return result

            msgs = [one_shot(T0 - S), one_shot(T0)]
            count("insert_many", lambda: s.insert_many(msgs, 1))
            later = one_shot(T0 + S)
            count("insert", lambda: s.insert(later, 1))
            occs: Any = count("claim_due", lambda: s.claim_due(T0, 1, LEASE))
            count(
                "settle",
                lambda: s.settle([Settlement.delivered(msgs[0].schedule_id, occs[0].leased_until)]),
            )
            count("claim_due again", lambda: s.claim_due(T0, 1, LEASE))
            clock.advance(LEASE)  # the second claim's lease ran out on its last attempt
            assert count("sweep", s.dead_letter_exhausted) == 1
            assert count("cancel", lambda: s.cancel(later.schedule_id)) is True
            assert s._conn is not None and s._conn.pragma("synchronous") == (
                1 if durability == "normal" else 2
            ), "back to the configured level after the worker's transactions"
    finally:
        vfs.unregister()
    return syncs


def test_relaxed_durability_fsyncs_the_applications_writes_not_the_workers(
    tmp_path: Path, clock: ManualClock
) -> None:
    full = _wal_syncs("full", tmp_path / "full.db", clock)
    assert all(n >= 1 for n in full.values()), full
    relaxed = _wal_syncs("relaxed", tmp_path / "relaxed.db", ManualClock(T0))
    application = ("insert_many", "insert", "cancel")
    assert all(relaxed[name] >= 1 for name in application), relaxed
    assert all(n == 0 for name, n in relaxed.items() if name not in application), relaxed
    normal = _wal_syncs("normal", tmp_path / "normal.db", ManualClock(T0))
    assert all(n == 0 for n in normal.values()), normal


@pytest.mark.parametrize("bad", ["fast", "FULL", "off", "", None])
def test_an_unknown_durability_is_refused_naming_it(db: Path, bad: object) -> None:
    with pytest.raises(InvalidConfiguration, match=repr(bad).replace("(", r"\(")):
        SqliteScheduleStore.open(db, durability=bad)  # type: ignore[arg-type]
    assert not db.exists()


@pytest.mark.parametrize(
    "table",
    [
        "x; DROP TABLE scheduled_messages",
        "scheduled_messages--",
        'a"b',
        "1abc",
        "",
        "t" * 64,
        "tablé",
    ],
)
def test_a_table_name_with_sql_in_it_is_refused_before_any_sql(db: Path, table: str) -> None:
    with pytest.raises(InvalidConfiguration, match="table name"):
        SqliteScheduleStore.open(db, table=table)
    assert not db.exists(), "refused before the file was even created"


def test_a_path_that_is_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "folder.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="directory") as info:
        SqliteScheduleStore.open(folder)
    assert str(folder) in str(info.value)
    assert listing(folder) == []


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    content = b"these are my notes, not a database\n" * 200
    notes.write_bytes(content)
    with pytest.raises(StoreError, match="not a SQLite database") as info:
        SqliteScheduleStore.open(notes)
    assert str(notes) in str(info.value)
    assert isinstance(info.value.__cause__, apsw.Error)
    assert notes.read_bytes() == content
    assert listing(tmp_path) == ["notes.txt"], "no -wal or -shm left behind"


def test_a_missing_folder_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "deeper" / "x.db"
    with pytest.raises(StoreError, match="does not exist") as info:
        SqliteScheduleStore.open(path)
    assert str(path) in str(info.value)
    assert listing(tmp_path) == []


def test_create_false_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(StoreError) as info:
        SqliteScheduleStore.open(path, create=False)
    assert str(info.value) == f"no database at {path}"
    assert listing(tmp_path) == []


def test_create_false_on_a_file_without_the_table(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = raw(path)
    conn.execute("CREATE TABLE unrelated (x)")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="no table scheduled_messages"):
        SqliteScheduleStore.open(path, create=False)
    assert path.read_bytes() == before


def test_create_false_opens_an_existing_store(db: Path) -> None:
    SqliteScheduleStore.open(db).close()
    with SqliteScheduleStore.open(db, create=False) as store:
        assert store.list_pending() == []


def test_the_default_path_is_in_the_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    expected = default_database_path()
    assert expected.name == "scheduler.db" and expected.parent.name == "hexeract_lite"
    assert tmp_path in expected.parents
    with pytest.raises(StoreError, match="no database at"):
        SqliteScheduleStore.open(create=False)
    assert not (tmp_path / "data").exists(), "create=False makes no folders either"
    with SqliteScheduleStore.open() as store:
        assert store.path == expected
    assert expected.is_file()


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
def test_a_new_database_is_private_even_with_a_permissive_umask(db: Path) -> None:
    old = os.umask(0)
    try:
        with SqliteScheduleStore.open(db) as store:
            store.insert(one_shot(), 3)
            files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
            for path in files:
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        os.umask(old)


@pytest.mark.skipif(not POSIX, reason="POSIX permissions")
def test_the_default_folders_are_private_even_with_a_permissive_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    old = os.umask(0)
    try:
        with SqliteScheduleStore.open() as store:
            made = [store.path.parent, *store.path.parent.parents]
    finally:
        os.umask(old)
    made = [folder for folder in made if folder == home or home in folder.parents]
    assert [f.name for f in made] == ["hexeract_lite", "share", ".local", "home"]
    for folder in made:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


@pytest.mark.skipif(not POSIX, reason="POSIX special files")
@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
@pytest.mark.parametrize("readonly", [False, True])
def test_a_path_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str, readonly: bool
) -> None:
    import socket

    path = tmp_path / "special.db"
    held: list[socket.socket] = []
    if kind == "fifo":
        os.mkfifo(path)
        expected = "a FIFO"
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        held.append(sock)
        expected = "a socket"
    else:
        path = Path("/dev/null")
        expected = "a character device"
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            SqliteScheduleStore.open(path, readonly=readonly, create=not readonly).close()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive() and kind == "fifo":  # unblock the hung open for the test's end
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    for sock in held:
        sock.close()
    assert not thread.is_alive(), "the opening hung"
    [error] = errors
    assert isinstance(error, StoreError)
    assert f"it is {expected}, not a regular file" in str(error) and str(path) in str(error)


@pytest.mark.parametrize(
    ("url", "name"),
    [("sqlite:///{tmp}/x.db", "x.db"), ("sqlite:////{tmp}/y.db", "y.db")],
)
def test_open_accepts_a_sqlite_url(tmp_path: Path, url: str, name: str) -> None:
    conn = url.format(tmp=str(tmp_path).lstrip("/"))
    with SqliteScheduleStore.open(conn) as store:
        assert store.path == tmp_path / name
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@pytest.mark.parametrize(
    "conn",
    ["postgresql://app:hunter2@db/app", "host=db.internal dbname=app password=hunter2"],
)
def test_open_refuses_another_databases_connection_string(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conn: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidConfiguration, match="not a SQLite path") as caught:
        SqliteScheduleStore.open(conn)
    assert "hunter2" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def _as_another_user(action: Callable[[], object]) -> str:
    """Run ``action`` in a child process that cannot override file permissions (root
    drops to ``nobody``); return ``ok`` or ``<ErrorType>: <message>``."""
    if os.geteuid() != 0:
        try:
            action()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "ok"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                action()
                out = "ok"
            except Exception as exc:
                out = f"{type(exc).__name__}: {exc}"
            os.write(write, out.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    return text


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can reach (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="hexeract-perm-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in (path, *path.iterdir()):
            with contextlib.suppress(OSError):
                p.chmod(0o700 if p.is_dir() else 0o600)
        shutil.rmtree(path)


def _open_and_insert(path: Path) -> Callable[[], object]:
    def action() -> None:
        with SqliteScheduleStore.open(path) as store:
            store.insert(one_shot(), 3)

    return action


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_read_only_file_is_refused_naming_it(shared_dir: Path) -> None:
    db = shared_dir / "ro.db"
    SqliteScheduleStore.open(db).close()
    db.chmod(0o444)
    shared_dir.chmod(0o777)
    before = db.read_bytes()
    outcome = _as_another_user(_open_and_insert(db))
    assert outcome.startswith("StoreError:") and str(db) in outcome, outcome
    assert "read-only" in outcome
    assert db.read_bytes() == before


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_read_only_folder_is_refused_naming_the_path(shared_dir: Path) -> None:
    db = shared_dir / "new.db"
    shared_dir.chmod(0o555)
    outcome = _as_another_user(_open_and_insert(db))
    assert outcome.startswith("StoreError:") and str(db) in outcome, outcome
    assert listing(shared_dir) == []


@pytest.mark.skipif(not POSIX or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_writable_file_in_a_read_only_folder_is_refused(shared_dir: Path) -> None:
    db = shared_dir / "stuck.db"
    SqliteScheduleStore.open(db).close()  # closing removes -wal and -shm
    db.chmod(0o666)
    shared_dir.chmod(0o555)  # WAL needs to create its side files next to the database
    before = db.read_bytes()
    outcome = _as_another_user(_open_and_insert(db))
    assert outcome.startswith("StoreError:") and str(db) in outcome, outcome
    assert db.read_bytes() == before


def test_a_new_file_appears_complete_and_failures_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new database is built under a temporary name and linked into place whole, so
    a failed creation leaves no file and no temporary behind."""
    import hexeract_lite.store.sqlite.schema as module

    db = tmp_path / "new.db"

    def broken(*args: object, **kwargs: object) -> None:
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(module, "ensure_schema", broken)
    with pytest.raises(StoreError, match=r"new\.db"):
        SqliteScheduleStore.open(db)
    assert listing(tmp_path) == []
    monkeypatch.undo()
    with SqliteScheduleStore.open(db) as store:
        store.insert(one_shot(), 3)
    assert listing(tmp_path) == ["new.db"], "no temporary left (and the WAL folded in)"


def test_many_stores_creating_one_new_file_at_once_share_it(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []
    ids: list[uuid.UUID] = []

    def opener() -> None:
        try:
            barrier.wait()
            with SqliteScheduleStore.open(db) as store:
                msg = one_shot()
                store.insert(msg, 3)
                ids.append(msg.schedule_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    with SqliteScheduleStore.open(db, create=False) as store:
        assert sorted(s.schedule_id for s in store.list_pending() if s.schedule_id) == sorted(ids)
    assert not [name for name in listing(tmp_path) if "creating" in name]


def test_a_vfs_can_be_named(db: Path) -> None:
    with pytest.raises(InvalidConfiguration, match="no-such-vfs"):
        SqliteScheduleStore.open(db, vfs="no-such-vfs")
    assert not db.exists()
    name = apsw.vfs_names()[0]
    with SqliteScheduleStore.open(db, vfs=name) as store:
        store.insert(one_shot(), 3)


def test_options_are_validated(db: Path) -> None:
    with pytest.raises(InvalidConfiguration, match="busy_timeout"):
        SqliteScheduleStore.open(db, busy_timeout=-S)
    with pytest.raises(InvalidConfiguration, match="busy_timeout"):
        SqliteScheduleStore.open(db, busy_timeout=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="clock"):
        SqliteScheduleStore.open(db, clock=object())  # type: ignore[arg-type]
    assert not db.exists()


def test_a_closed_store_raises_store_error(db: Path) -> None:
    store = SqliteScheduleStore.open(db)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.list_pending()
    with pytest.raises(StoreError, match="closed"):
        store.insert(one_shot(), 3)


# -- schema versions ------------------------------------------------------------------


def _version(path: Path, table: str = "scheduled_messages") -> int | None:
    conn = raw(path)
    try:
        if not conn.table_exists(None, META_TABLE):
            return None
        rows = conn.execute(
            f"SELECT version FROM {META_TABLE} WHERE table_name = ?", (table,)
        ).fetchall()
    finally:
        conn.close()
    return int(str(rows[0][0])) if rows else None


def test_the_version_is_recorded_per_table(db: Path) -> None:
    SqliteScheduleStore.open(db).close()
    SqliteScheduleStore.open(db, table="other_jobs").close()
    assert _version(db) == SCHEMA_VERSION
    assert _version(db, "other_jobs") == SCHEMA_VERSION
    conn = raw(db)
    assert conn.pragma("user_version") == 0, "the file's user_version is left to the app"
    conn.close()


def test_tables_in_one_file_are_independent(db: Path, clock: ManualClock) -> None:
    with (
        SqliteScheduleStore.open(db, clock=clock) as a,
        SqliteScheduleStore.open(db, table="b_jobs", clock=clock) as b,
    ):
        msg = one_shot()
        a.insert(msg, 3)
        assert b.inspect(msg.schedule_id) is None
        assert b.claim_due(T0, 10, LEASE) == []
        assert len(a.claim_due(T0, 10, LEASE)) == 1


def test_a_newer_schema_version_is_refused(db: Path) -> None:
    SqliteScheduleStore.open(db).close()
    conn = raw(db)
    conn.execute(f"UPDATE {META_TABLE} SET version = ?", (SCHEMA_VERSION + 1,))
    conn.close()
    with pytest.raises(StoreError, match="newer than this hexeract_lite") as info:
        SqliteScheduleStore.open(db)
    assert f"version {SCHEMA_VERSION + 1}" in str(info.value) and str(db) in str(info.value)
    assert _version(db) == SCHEMA_VERSION + 1, "left as it was"


def test_a_foreign_table_with_the_name_is_refused(db: Path) -> None:
    conn = raw(db)
    conn.execute("CREATE TABLE scheduled_messages (id INTEGER PRIMARY KEY, body TEXT)")
    conn.close()
    with pytest.raises(StoreError, match="not a scheduler table"):
        SqliteScheduleStore.open(db)
    assert _version(db) is None


def test_the_cli_ddl_is_the_store_schema_and_idempotent(tmp_path: Path) -> None:
    ddl = sqlite_ddl("jobs")
    by_ddl = tmp_path / "ddl.db"
    conn = raw(by_ddl)
    conn.execute(ddl)
    conn.execute(ddl)  # IF NOT EXISTS throughout
    conn.close()
    by_store = tmp_path / "store.db"
    SqliteScheduleStore.open(by_store, table="jobs").close()

    def schema(path: Path) -> list[tuple[str, str]]:
        c = raw(path)
        try:
            return sorted(
                (str(n), " ".join(str(s).replace("IF NOT EXISTS ", "").split()))
                for n, s in c.execute("SELECT name, sql FROM sqlite_schema WHERE tbl_name = 'jobs'")
                if s is not None
            )
        finally:
            c.close()

    assert schema(by_ddl) == schema(by_store)
    with SqliteScheduleStore.open(by_ddl, table="jobs") as store:  # adopted, version recorded
        store.insert(one_shot(), 1)
    assert _version(by_ddl, "jobs") == SCHEMA_VERSION


def test_opening_a_current_store_takes_no_write_lock(db: Path) -> None:
    SqliteScheduleStore.open(db).close()
    holder = raw(db)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with SqliteScheduleStore.open(db, busy_timeout=timedelta(milliseconds=50)) as store:
            assert store.list_pending() == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()


# -- errors from SQLite -----------------------------------------------------------------


def test_a_lock_held_past_the_busy_timeout_is_a_store_error(db: Path, clock: ManualClock) -> None:
    with SqliteScheduleStore.open(
        db, clock=clock, busy_timeout=timedelta(milliseconds=100)
    ) as store:
        store.insert(one_shot(), 3)
        holder = raw(db)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="locked") as info:
                store.insert(one_shot(), 3)
            assert isinstance(info.value.__cause__, apsw.BusyError)
            assert str(db) in str(info.value) and "0.1 s" in str(info.value)
            with pytest.raises(StoreError):
                store.claim_due(T0, 10, LEASE)
            assert len(store.list_pending()) == 1, "reads go on while another writes"
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        [occ] = store.claim_due(T0, 10, LEASE)
        assert occ.attempts == 1, "the failed claim applied nothing"
        store.insert(one_shot(), 3)


def test_a_sweep_with_nothing_to_do_takes_no_write_lock(db: Path, clock: ManualClock) -> None:
    """The sweep runs every poll cycle: when no row is exhausted (and no instant needs
    rewriting) a read says so, and another connection's write lock does not stall it."""
    with SqliteScheduleStore.open(
        db, clock=clock, busy_timeout=timedelta(milliseconds=50)
    ) as store:
        exhausted = one_shot(T0 - S)
        store.insert_many([exhausted, one_shot(T0 - S)], 1)
        holder = raw(db)
        holder.execute("BEGIN IMMEDIATE")
        try:
            assert store.dead_letter_exhausted() == 0
        finally:
            holder.execute("ROLLBACK")
        store.claim_due(T0, 1, LEASE)  # claimed on its last attempt, then abandoned
        clock.advance(LEASE)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="locked"):
                store.dead_letter_exhausted()  # work to do: it needs the write lock
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.dead_letter_exhausted() == 1
        assert store.dead_letter_exhausted() == 0


def test_a_full_disk_is_a_store_error_and_applies_nothing(store: SqliteScheduleStore) -> None:
    conn = store._conn
    assert conn is not None
    store.insert(one_shot(), 3)
    pages = conn.pragma("page_count")
    conn.pragma("max_page_count", pages)  # the disk is full now
    big = [one_shot(T0, "x" * 5000) for _ in range(50)]
    with pytest.raises(StoreError) as info:
        store.insert_many(big, 3)
    assert isinstance(info.value.__cause__, apsw.FullError)
    assert len(store.list_pending(1000)) == 1, "all or nothing"
    conn.pragma("max_page_count", 1 << 30)
    store.insert_many(big, 3)
    assert len(store.list_pending(1000)) == 51


def test_a_corrupt_file_is_a_store_error(db: Path, clock: ManualClock) -> None:
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many([one_shot(T0, "y" * 300) for _ in range(300)], 3)
    data = bytearray(db.read_bytes())
    page = 4096
    for start in range(2 * page, len(data), page):  # every page but the schema's
        data[start : start + 64] = b"\xa5" * 64
    db.write_bytes(bytes(data))
    # the open or the first read fails, whichever meets a damaged page first
    with pytest.raises(StoreError) as info, SqliteScheduleStore.open(db, clock=clock) as store:
        store.claim_due(T0, 10, LEASE)
        store.list_pending()
    assert isinstance(info.value.__cause__, apsw.CorruptError | apsw.NotADBError)
    assert str(db) in str(info.value)


# -- rows another tool wrote badly -------------------------------------------------------

MALFORMED = {
    "payload": "{not json",
    "cron_expr": "61 * * * *",
    "target_kind": "email",
    "trigger_kind": "weekly",  # none of delay, cron or interval
    "scheduled_for": "2026-02-30 25:61",  # sorts as due, but is no instant
}


@pytest.mark.parametrize("column", sorted(MALFORMED))
def test_a_malformed_row_is_dead_lettered_and_spares_its_batch(
    db: Path, clock: ManualClock, column: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0 - 10 * S, "e", {})
    good = [one_shot(T0 - i * S) for i in range(3)]
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many([bad, *good], 3)
        conn = raw(db)
        conn.execute(
            f"UPDATE scheduled_messages SET {column} = ? WHERE schedule_id = ?",
            (MALFORMED[column], bad.schedule_id.bytes),
        )
        conn.close()
        # inspect names the row and the column; a listing marks the row, as the worker
        # finds it (a payload that is not JSON included)
        with pytest.raises(StoreError, match=str(bad.schedule_id)) as info:
            store.inspect(bad.schedule_id)
        assert column in str(info.value)
        listed = store.list_pending()
        [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
        assert odd.schedule_id == bad.schedule_id and column in odd.reason
        assert len(listed) == 4, "the healthy rows are listed too"
        assert main(["scheduler", "list", "--conn", str(db)]) == 0  # the plain listing
        plain = capsys.readouterr().out
        assert f"{bad.schedule_id}  malformed  {column}" in plain, plain
        claimed = store.claim_due(T0, 10, LEASE)
        assert sorted(c.message.schedule_id for c in claimed) == sorted(m.schedule_id for m in good)
        conn = raw(db)
        [(dead_at, error, leased)] = conn.execute(
            "SELECT dead_lettered_at, last_error, leased_until FROM scheduled_messages"
            " WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        assert dead_at == "2026-03-01T12:00:00.000Z" and leased is None
        assert column in str(error) and "malformed" in str(error)
        # its run is recorded with the dead letter, unless the fields a run needs are
        # what does not decode
        runs = store.runs(bad.schedule_id)
        if column == "scheduled_for":
            assert runs == []
        else:
            [run] = runs
            assert run.outcome.value == "dead_lettered" and run.attempt == 1
            assert run.error is not None and run.error.startswith("malformed row")
        for occ in claimed:
            assert store.mark_delivered(occ.message.schedule_id, occ.leased_until)
        assert store.list_pending() == []


@pytest.mark.parametrize("column", sorted(MALFORMED))
def test_changes_that_need_the_whole_row_refuse_a_malformed_one_and_pause_and_cancel_apply(
    db: Path, clock: ManualClock, column: str
) -> None:
    """update, reschedule and run_now (by name) raise the store's malformed-row error naming
    the column and write nothing; a pause and a cancel still apply."""
    from hexeract_lite import SchedulerControl

    with SqliteScheduleStore.open(db, clock=clock) as store:
        control = SchedulerControl(store)
        control.ensure("app.job", cron="* * * * *", event_type="e", payload={"n": 1})
        conn = raw(db)
        conn.execute(f"UPDATE scheduled_messages SET {column} = ?", (MALFORMED[column],))
        before = db.read_bytes()
        changes: list[Callable[[], object]] = [
            lambda: control.update("app.job", payload={"n": 2}),
            lambda: control.reschedule("app.job", T0 + timedelta(hours=1)),
            lambda: control.run_now("app.job"),
        ]
        for change in changes:
            with pytest.raises(StoreError, match=f"is malformed: {column}"):
                change()
        assert db.read_bytes() == before
        assert control.pause("app.job") is True
        assert control.cancel("app.job") is True
        [(cancelled,)] = conn.execute("SELECT cancelled_at FROM scheduled_messages")
        assert cancelled is not None
        conn.close()


NOT_UTF8 = ("event_type", "payload", "last_error", "name", "cron_expr")
"""TEXT columns a claimable row may hold bytes in that are not UTF-8."""


def _raw_of(db: Path, driver: str) -> Any:
    """An autocommit connection on ``db`` of the library a ``driver`` store uses."""
    if driver == "sqlite3":
        import sqlite3

        return sqlite3.connect(db, isolation_level=None)
    return raw(db)


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
@pytest.mark.parametrize("column", NOT_UTF8)
def test_a_row_whose_text_is_not_utf8_is_dead_lettered_and_spares_its_batch(
    db: Path, clock: ManualClock, column: str, driver: str
) -> None:
    bad = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0 - 10 * S, "e", {}, name="nightly")
    good = [one_shot(T0 - i * S) for i in range(3)]
    with SqliteScheduleStore.open(db, clock=clock, driver=driver) as store:
        store.insert_many([bad, *good], 3)
        conn = _raw_of(db, driver)
        conn.execute(
            f"UPDATE scheduled_messages SET {column} = CAST(x'6576ff' AS TEXT)"
            " WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        listed = store.list_pending()
        assert len(listed) == 4, "the healthy rows are listed too"
        [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
        assert odd.schedule_id == bad.schedule_id
        assert odd.reason.startswith(f"{column} is not UTF-8 text"), odd.reason
        with pytest.raises(StoreError, match=f"{bad.schedule_id}.*{column} is not UTF-8"):
            store.inspect(bad.schedule_id)
        claimed = store.claim_due(T0, 10, LEASE)
        assert sorted(c.message.schedule_id for c in claimed) == sorted(m.schedule_id for m in good)
        conn = _raw_of(db, driver)
        [(dead_at, error)] = conn.execute(
            "SELECT dead_lettered_at, CAST(last_error AS BLOB) FROM scheduled_messages"
            " WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        ).fetchall()
        conn.close()
        assert dead_at == "2026-03-01T12:00:00.000Z"
        assert f"malformed row, dead-lettered without dispatch: {column} is not UTF-8" in (
            error.decode()
        )
        dead = store.list_dead_letter()
        assert [item.schedule_id for item in dead] == [bad.schedule_id]
        if column != "last_error":  # the dead-lettering wrote a new one
            assert isinstance(dead[0], MalformedSchedule)
            assert dead[0].status is ScheduleStatus.DEAD_LETTERED
        for occ in claimed:
            assert store.mark_delivered(occ.message.schedule_id, occ.leased_until)
        assert store.list_pending() == []


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
@pytest.mark.parametrize("payload", ['{"a":NaN}', '{"a":-Infinity}', '{"a":1e999}'])
def test_a_payload_that_is_not_strict_json_is_dead_lettered(
    db: Path, clock: ManualClock, payload: str, driver: str
) -> None:
    """Python's json reads NaN and overflows to infinity; the API writes neither: such
    a payload another tool wrote is malformed, never delivered as nan or inf."""
    bad, good = one_shot(T0 - S), one_shot(T0)
    with SqliteScheduleStore.open(db, clock=clock, driver=driver) as store:
        store.insert_many([bad, good], 3)
        conn = _raw_of(db, driver)
        conn.execute(
            "UPDATE scheduled_messages SET payload = ? WHERE schedule_id = ?",
            (payload, bad.schedule_id.bytes),
        )
        conn.close()
        claimed = store.claim_due(T0, 10, LEASE)
        assert [c.message.schedule_id for c in claimed] == [good.schedule_id]
        [dead] = store.list_dead_letter()  # listed as the worker found it: malformed
        assert isinstance(dead, MalformedSchedule), dead
        assert dead.status is ScheduleStatus.DEAD_LETTERED
        assert dead.reason.startswith("payload is not JSON"), dead.reason
        conn = _raw_of(db, driver)
        [(error,)] = conn.execute(
            "SELECT last_error FROM scheduled_messages WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        ).fetchall()
        conn.close()
        assert error.startswith("malformed row, dead-lettered without dispatch: payload is not")


LISTED_BADLY = {
    "leap second": ("scheduled_for", "2026-06-30T23:59:60.000Z"),
    "february 30": ("scheduled_for", "2099-02-30T00:00:00.000Z"),
    "created_at": ("created_at", "yesterday"),
    "cron": ("cron_expr", "61 * * * *"),
    "id": ("schedule_id", b"\x01\x02"),
}


@pytest.mark.parametrize("case", sorted(LISTED_BADLY))
def test_one_malformed_row_does_not_break_a_listing(
    db: Path, clock: ManualClock, case: str
) -> None:
    """A paused row with an instant no worker will ever claim does not make
    list_pending fail whole: the other rows are listed; the bad one is a
    MalformedSchedule in its place naming the column; inspect names row and column."""
    column, value = LISTED_BADLY[case]
    bad = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0 + S, "e", {})
    good = [one_shot(T0), one_shot(T0 + 2 * S)]
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many([bad, *good], 3)
        store.set_paused(bad.schedule_id, True)
        conn = raw(db)
        conn.execute(
            f"UPDATE scheduled_messages SET {column} = ? WHERE schedule_id = ?",
            (value, bad.schedule_id.bytes),
        )
        conn.close()
        listed = store.list_pending()
        assert len(listed) == 3
        [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
        assert odd.reason.startswith(column), odd.reason
        assert odd.status is ScheduleStatus.PAUSED
        if column == "schedule_id":
            assert odd.schedule_id is None and odd.raw_id.startswith("b'")
        else:
            assert odd.schedule_id == bad.schedule_id and odd.raw_id == str(bad.schedule_id)
            with pytest.raises(StoreError, match=str(bad.schedule_id)) as info:
                store.inspect(bad.schedule_id)
            assert column in str(info.value)
        assert {s.schedule_id for s in listed if isinstance(s, ScheduleSnapshot)} == {
            m.schedule_id for m in good
        }
        claimed = store.claim_due(T0 + 5 * S, 10, LEASE)
        assert [c.message.schedule_id for c in claimed] == [m.schedule_id for m in good]


@pytest.mark.parametrize("column", ["scheduled_for", "leased_until"])
def test_an_instant_that_is_no_instant_does_not_break_stats_or_the_wake_up(
    db: Path, clock: ManualClock, column: str
) -> None:
    """Text another tool wrote where an instant goes makes its row never due; stats, the
    wake-up and a worker's cycle go on over the other rows instead of raising."""
    bad, good = one_shot(T0), one_shot(T0 + 2 * S)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many([bad, good], 3)
        conn = raw(db)
        conn.execute(
            f"UPDATE scheduled_messages SET {column} = 'yesterday' WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        assert store.stats().pending == 2
        assert store.next_wakeup() == T0 + 2 * S
        clock.set(T0 + 3 * S)
        got: list[ScheduledMessage] = []
        assert SchedulerWorker(store, got.append).run_once().delivered == 1
        assert [m.schedule_id for m in got] == [good.schedule_id]
        assert store.stats().next_wakeup is None


def test_a_malformed_dead_letter_is_marked_in_its_listing(db: Path, clock: ManualClock) -> None:
    bad, good = one_shot(), one_shot()
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many([bad, good], 1)
        for occ in store.claim_due(T0, 10, LEASE):
            store.mark_dead_lettered(occ.message.schedule_id, "poison", occ.leased_until)
        conn = raw(db)
        conn.execute(
            "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        listed = store.list_dead_letter()
    [odd] = [item for item in listed if isinstance(item, MalformedSchedule)]
    assert odd.schedule_id == bad.schedule_id and "target_kind" in odd.reason
    assert odd.status is ScheduleStatus.DEAD_LETTERED
    assert [s.schedule_id for s in listed if isinstance(s, ScheduleSnapshot)] == [good.schedule_id]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_retry_past_the_year_9999_from_now_is_refused_before_writing(db: Path, kind: str) -> None:
    """A retry_in shorter than the span of instants can still end past 9999
    from the store's now (here 9000 years from 2026): InvalidConfiguration naming it,
    and the batch, checked first, writes nothing."""
    from hexeract_lite import InvalidConfiguration

    clock = ManualClock(T0)
    with contextlib.ExitStack() as stack:
        store: ScheduleStore = (
            InMemoryScheduleStore(clock=clock)
            if kind == "memory"
            else stack.enter_context(SqliteScheduleStore.open(db, clock=clock))
        )
        a, b = one_shot(), one_shot()
        store.insert_many([a, b], 3)
        occs = store.claim_due(T0, 10, LEASE)
        far = timedelta(days=365 * 8000)
        with pytest.raises(InvalidConfiguration, match="retry_in") as info:
            store.settle(
                [
                    Settlement.delivered(occs[0].message.schedule_id, occs[0].leased_until),
                    Settlement.failed(occs[1].message.schedule_id, far, "x", occs[1].leased_until),
                ]
            )
        assert "days=2920000" in str(info.value) and "9999" in str(info.value)
        for occ in occs:
            snap = store.inspect(occ.message.schedule_id)
            assert snap is not None and snap.delivered_at is None, "nothing written"
            assert snap.leased_until == occ.leased_until


def test_a_claim_decodes_rows_as_the_record_path_does(db: Path, clock: ManualClock) -> None:
    """The claim builds occurrences straight from its rows (shared Target and cron
    Trigger values, the lease parsed once); they equal the record path's, for every
    trigger and target, a lease the row carries in another layout, and instants in
    SQLite's datetime() form."""
    from hexeract_lite.store.sqlite.codec import SELECT_LIST, record_from_row

    msgs = [
        one_shot(T0 - 5 * S, payload={"x": [1, "é", None, 2.5]}),
        ScheduledMessage.delay(Target.bus("a.b"), T0 - 4 * S, "ev", [1, 2]),
        ScheduledMessage.delay(Target.outbox(), T0 - 3 * S, "ev", "text"),
        ScheduledMessage.cron(Target.bus("tick"), "*/10 * * * * *", T0 - 2 * S, "t", None),
        ScheduledMessage.cron(Target.mediator(), "@hourly", T0 - S, "t", 7),
    ]
    with SqliteScheduleStore.open(db, clock=clock) as store:
        store.insert_many(msgs, 3)
        conn = raw(db)
        conn.execute(  # another tool wrote this instant in SQLite's own layout
            "UPDATE scheduled_messages SET scheduled_for = '2026-03-01 11:59:55'"
            " WHERE schedule_id = ?",
            (msgs[0].schedule_id.bytes,),
        )
        conn.close()
        claimed = store.claim_due(T0, 10, LEASE)
        conn = raw(db)
        rows = {
            bytes(row[0]): row
            for row in conn.execute(f"SELECT {SELECT_LIST} FROM scheduled_messages")
        }
        conn.close()
    assert [c.message.schedule_id for c in claimed] == [m.schedule_id for m in msgs]
    for occ, msg in zip(claimed, msgs, strict=True):
        assert occ == record_from_row(rows[msg.schedule_id.bytes]).leased()
        assert occ.message == msg and occ.message.payload == msg.payload
        assert occ.leased_until == T0 + LEASE and occ.attempts == 1


# -- the shape of what is written -----------------------------------------------------------


def test_created_at_and_every_written_instant_come_from_the_clock(db: Path) -> None:
    clock = ManualClock(datetime(1999, 12, 31, 23, 59, 59, 250_000, tzinfo=UTC))
    with SqliteScheduleStore.open(db, clock=clock) as store:
        msg = one_shot(datetime(1999, 1, 1, tzinfo=UTC))
        store.insert(msg, 3)
        [occ] = store.claim_due(clock.now(), 1, LEASE)
        clock.advance(S)
        store.mark_delivered(msg.schedule_id, occ.leased_until)
    conn = raw(db)
    [(created, delivered, leased)] = conn.execute(
        "SELECT created_at, delivered_at, leased_until FROM scheduled_messages"
    ).fetchall()
    conn.close()
    assert created == "1999-12-31T23:59:59.250Z"
    assert delivered == "2000-01-01T00:00:00.250Z"
    assert leased is None


def test_no_statement_reads_sqlites_clock(store: SqliteScheduleStore) -> None:
    seen: list[str] = []

    def trace(_cursor: apsw.Cursor, sql: str, _bindings: object) -> bool:
        seen.append(sql)
        return True

    conn = store._conn
    assert conn is not None
    conn.exec_trace = trace
    msg = ScheduledMessage.cron(Target.bus("k"), "* * * * *", T0, "t", 1)
    store.insert_many([one_shot(), msg], 1)
    store.insert(one_shot(), 2)
    [a, b] = store.claim_due(T0, 2, LEASE)
    store.reschedule(msg.schedule_id, T0 + S, b.leased_until)
    store.mark_failed(a.message.schedule_id, S, "x", a.leased_until)
    store.set_paused(msg.schedule_id, True)
    store.resume(msg.schedule_id)
    store.dead_letter_exhausted()
    store.next_wakeup()
    store.list_pending()
    store.list_dead_letter()
    store.cancel(msg.schedule_id)
    conn.exec_trace = None
    assert len(seen) > 20
    for sql in seen:
        lowered = sql.lower()
        assert "'now'" not in lowered and "current_" not in lowered, sql


def test_indexes_are_used_by_every_hot_statement(store: SqliteScheduleStore) -> None:
    conn = store._conn
    assert conn is not None
    statements = {
        "claim": store._sql.claim,
        "sweep": store._sql.sweep,
        "next_wakeup": store._sql.next_wakeup,
        "list_pending": store._sql.list_pending,
        "list_dead_letter": store._sql.list_dead_letter,
        "mark_delivered": store._sql.mark_delivered,
        "cancel": store._sql.cancel,
        "select_one": store._sql.select_one,
    }
    params = {
        "now": "x",
        "until": "y",
        "n": 10,
        "limit": 10,
        "error": "e",
        "kept": "k",
        "id": b"i",
        "lease": "l",
        "counted": True,
    }
    for name, sql in statements.items():
        wanted = {k: params[k] for k in set(re.findall(r":(\w+)", sql))}
        bind: Any = wanted if wanted else (b"i",) if "?" in sql else ()
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, bind)]
        for step in plan:
            if step.startswith("SCAN scheduled_messages"):
                assert "USING" in step and "INDEX" in step, (name, plan)
        assert any("INDEX" in step for step in plan), (name, plan)

    def plan_of(sql: str) -> str:
        return " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))

    claim_plan = plan_of(store._sql.claim)
    assert "idx_scheduled_messages_due (scheduled_for<?)" in claim_plan
    assert "idx_scheduled_messages_leased (leased_until>? AND leased_until<?)" in claim_plan
    # the claim's common case: a probe of the leased rows, then the due index alone
    assert plan_of(store._sql.claim_fresh) == (
        "SEARCH scheduled_messages USING INDEX idx_scheduled_messages_due (scheduled_for<?)"
    )
    assert plan_of(store._sql.claim_probe) == (
        "SEARCH scheduled_messages USING INDEX idx_scheduled_messages_leased"
        " (leased_until>? AND leased_until<?)"
    )
    lease = str(
        conn.execute("EXPLAIN QUERY PLAN " + store._sql.lease(3), ("u", 1, 2, 3)).fetchall()
    )
    assert "USING INTEGER PRIMARY KEY (rowid=?)" in lease, lease


def test_a_wal_in_steady_use_is_reused_in_place_and_a_blown_up_one_is_cut_back(
    db: Path, clock: ManualClock
) -> None:
    """journal_size_limit below the size automatic checkpoints let the WAL reach (1 MiB
    before) truncated the WAL at every checkpoint, so most commits grew the file again
    (each fsync then also writes the file system's journal). The WAL must never shrink
    while inserts run one by one, and a WAL a big transaction blew up is cut back."""
    wal = Path(f"{db}-wal")
    with SqliteScheduleStore.open(db, clock=clock, durability="normal") as store:
        sizes = []
        for i in range(1500):  # several automatic checkpoints (1000 pages each)
            store.insert(one_shot(T0 + i * S), 3)
            sizes.append(wal.stat().st_size)
        assert max(sizes) > 3 << 20, "the WAL went through automatic checkpoints"
        assert sizes == sorted(sizes), "it shrank"
        big = [one_shot(T0, payload={"pad": "x" * 2000}) for _ in range(6000)]
        store.insert_many(big, 3)  # one transaction far beyond the limit
        assert wal.stat().st_size > 12 << 20
        for i in range(400):  # a checkpoint, then the WAL starts over, cut back
            store.insert(one_shot(T0 - (i + 1) * S), 3)
        assert wal.stat().st_size <= 8 << 20


def test_a_claim_merges_expired_leases_with_fresh_rows_as_the_memory_store_does(
    clock: ManualClock, db: Path
) -> None:
    """Fresh rows and rows whose lease or backoff expired, interleaved by scheduled_for:
    the claim takes the oldest first across both (the probe sends it to the two-index
    merge), the batch limit cutting across them, as the reference store does."""
    memory = InMemoryScheduleStore(clock=clock)
    with SqliteScheduleStore.open(db, clock=clock) as sqlite:
        runs = []
        for store in (memory, sqlite):
            msgs = [one_shot(T0 + i * S) for i in range(8)]
            store.insert_many(msgs, 5)
            early = store.claim_due(T0 + 8 * S, 8, LEASE)  # all eight leased
            for occ in early[::2]:  # half back in backoff, ending before the rest's lease
                store.mark_failed(occ.message.schedule_id, S, "x", occ.leased_until)
            store.insert_many([one_shot(T0 + i * S + S / 2) for i in range(8)], 5)
            batches = [store.claim_due(T0 + 10 * S, 5, LEASE) for _ in range(3)]
            runs.append(
                [[(o.message.scheduled_for, o.attempts) for o in batch] for batch in batches]
            )
        assert runs[0] == runs[1]
        assert [len(batch) for batch in runs[1]] == [5, 5, 2]
        assert {attempts for batch in runs[1] for _, attempts in batch} == {1, 2}


@pytest.mark.slow
def test_a_claim_larger_than_one_leasing_statement_leases_every_row_once(
    store: SqliteScheduleStore,
) -> None:
    """The claim leases the rows it selected in UPDATEs of at most LEASE_CHUNK rowids:
    a batch beyond SQLite's 32766 bound parameters is leased whole, in order."""
    n = 32_800
    assert n > 32_766 and n > LEASE_CHUNK
    messages = [one_shot(T0 + i * timedelta(microseconds=1000)) for i in range(n + 5)]
    store.insert_many(messages, 3)
    now = T0 + 100 * S
    claimed = store.claim_due(now, n, LEASE)
    assert [o.message.schedule_id for o in claimed] == [m.schedule_id for m in messages[:n]]
    assert all(o.attempts == 1 and o.leased_until == now + LEASE for o in claimed)
    assert len(store.claim_due(now, n, LEASE)) == 5


# -- behaviour details beyond the contract ---------------------------------------------


def test_next_wakeup_when_a_lease_ends_before_the_row_is_due(clock: ManualClock, db: Path) -> None:
    """A claim made with a clock running ahead, then a failure with no delay: the lease
    ends before scheduled_for, and the hint is the later of the two."""
    memory = InMemoryScheduleStore(clock=clock)
    with SqliteScheduleStore.open(db, clock=clock) as sqlite:
        for store in (memory, sqlite):
            first, second = one_shot(T0 + 10 * S), one_shot(T0 + 20 * S)
            store.insert_many([first, second], 3)
            [occ] = store.claim_due(T0 + 10 * S, 1, LEASE)
            store.mark_failed(first.schedule_id, timedelta(0), "x", occ.leased_until)
            assert store.next_wakeup() == T0 + 10 * S
            store.set_paused(second.schedule_id, True)
            assert store.next_wakeup() == T0 + 10 * S
            # another leased row whose lease ends inside (T0, T0 + 10 s] comes first
            third = one_shot(T0 + S)
            store.insert(third, 3)
            store.claim_due(T0 + S, 1, 4 * S)
            assert store.next_wakeup() == T0 + 5 * S
    assert memory.next_wakeup() == T0 + 5 * S


def test_data_version_moves_on_other_connections_commits(store: SqliteScheduleStore) -> None:
    before = store.data_version()
    store.insert(one_shot(), 3)
    assert store.data_version() == before, "its own commits do not move it"
    with SqliteScheduleStore.open(store.path) as other:
        other.insert(one_shot(), 3)
    assert store.data_version() != before


def test_changes_are_notified_after_commits(store: SqliteScheduleStore) -> None:
    msg = ScheduledMessage.cron(Target.outbox(), "* * * * *", T0, "t", 1)
    store.insert(msg, 3)

    def moved(action: Callable[[], object]) -> bool:
        version = store.changes.version()
        action()
        return store.changes.version() != version

    assert moved(lambda: store.insert_many([one_shot()], 3))
    assert not moved(lambda: store.insert_many([], 3))
    [occ, _] = store.claim_due(T0, 10, LEASE)
    assert moved(lambda: store.mark_failed(occ.message.schedule_id, S, "x", occ.leased_until))
    assert not moved(lambda: store.mark_failed(occ.message.schedule_id, S, "x", occ.leased_until))
    assert moved(lambda: store.set_paused(msg.schedule_id, True))
    assert moved(lambda: store.resume(msg.schedule_id))
    assert not moved(lambda: store.cancel(msg.schedule_id))


def test_insert_many_of_many_rows_is_one_transaction(store: SqliteScheduleStore) -> None:
    msgs = [one_shot(T0 + i * timedelta(milliseconds=1)) for i in range(5000)]
    store.insert_many(msgs, 3)
    claimed = store.claim_due(T0 + 10 * S, 5000, LEASE)
    assert [c.message.schedule_id for c in claimed] == [m.schedule_id for m in msgs]


def test_a_repr_names_the_file(store: SqliteScheduleStore) -> None:
    assert str(store.path) in repr(store) and "scheduled_messages" in repr(store)


if sys.platform == "win32":  # pragma: no cover
    pytestmark = pytest.mark.skip("the store's tests assume POSIX paths")


NOT_BOOLS = ["no", "false", 0, 1, None]


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


@pytest.mark.parametrize("flag", ["create", "readonly"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_sqlite_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    tmp_path: Path, flag: str, value: object
) -> None:
    """A flag that is not a bool (``create="no"``, a string read from a setting) is refused,
    never read as truthy: nothing is created."""
    db = tmp_path / "s.db"
    with pytest.raises(InvalidConfiguration, match=rf"{flag} must be True or False, got {value!r}"):
        SqliteScheduleStore.open(db, **{flag: value})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["order", "group", "select", "index", "table"])
def test_a_table_name_sql_reads_as_a_keyword_is_refused_before_any_sql(
    tmp_path: Path, name: str
) -> None:
    """A table name SQLite reads as a keyword is refused by the name check, before any SQL: the
    SQLite statements name the table unquoted, as the reference's do (PostgreSQL's quote it
    and take such a name)."""
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


def _race_ensure_against_prune(
    declare: ScheduleStore, pruner: ScheduleStore, seconds: float
) -> int:
    """ensure + cancel of one name, over and over, while another store object prunes
    cancelled rows as a worker does, for ``seconds``; how many rounds ran (none may
    fail)."""
    msg = ScheduledMessage.cron(Target.outbox(), "0 9 * * *", None, "tick", {}, name="race.me")
    stop = threading.Event()
    errors: list[BaseException] = []

    def prune() -> None:
        while not stop.is_set():
            try:
                pruner.prune(timedelta(milliseconds=1))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
                return

    thread = threading.Thread(target=prune, daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    rounds = 0
    try:
        while time.monotonic() < deadline and not errors:
            declare.ensure(msg, 3)
            assert declare.cancel(msg.schedule_id), "the schedule ensure returned is there"
            rounds += 1
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors
    return rounds


def test_ensure_racing_a_pruning_worker_never_fails(db: Path) -> None:
    with SqliteScheduleStore.open(db) as declare, SqliteScheduleStore.open(db) as pruner:
        assert _race_ensure_against_prune(declare, pruner, 1.5) > 50
