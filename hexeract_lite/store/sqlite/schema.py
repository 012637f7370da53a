"""Opening a SQLite file for the store (:func:`open_database`): creation, the
connection, schema versions (a table without a row in :data:`META_TABLE` is version 0,
the reference's layout). Nothing changes before every check that could refuse it."""

from __future__ import annotations

import os
import pathlib
import stat
import time
from collections.abc import Callable
from contextlib import suppress
from datetime import timedelta

import apsw

from ...errors import StoreError
from ..schema import REFERENCE_COLUMNS, sqlite_table_ddl
from .driver import FileHold, hold_file, open_connection
from .paths import APP_NAME, DATABASE_FILE_NAME, check_path, default_database_path
from .session import not_waiting, roll_back, set_busy_wait
from .upgrades import UPGRADES

__all__ = [
    "APP_NAME",
    "DATABASE_FILE_NAME",
    "DURABILITY",
    "META_TABLE",
    "SCHEMA_VERSION",
    "UPGRADES",
    "check_path",
    "connect",
    "create_database",
    "default_database_path",
    "ensure_schema",
    "open_database",
    "memory_sorts",
    "open_error",
    "optimize",
]

SCHEMA_VERSION = 9
"""The schema version this code writes and understands."""
WAL_SIZE_LIMIT = 8 << 20  # PRAGMA journal_size_limit
META_TABLE = "hexeract_lite_schema"
"""One row per scheduler table in the file, ``(table_name, version)``."""

# ``durability`` -> ``PRAGMA synchronous`` ("relaxed": NORMAL around the worker's own)
DURABILITY = {"full": "FULL", "relaxed": "FULL", "normal": "NORMAL"}


def open_database(
    path: str | os.PathLike[str] | None,
    table: str,
    *,
    durability: str,
    busy_timeout: timedelta,
    create: bool,
    vfs: str | None,
    readonly: bool,
    driver: str = "apsw",
) -> tuple[pathlib.Path, apsw.Connection, int, FileHold]:
    """Open ``path`` for the store: the path, the connection, the table's version and
    this process's claim on the file for ``driver``."""
    db = check_path(path, create)
    if not db.exists():
        create_database(db, table, busy_timeout, vfs, driver=driver)
    hold = hold_file(db, driver)
    connection: apsw.Connection | None = None
    try:
        connection = connect(db, durability, busy_timeout, vfs, readonly=readonly, driver=driver)
        version = ensure_schema(
            connection, table, db, create=create, busy_timeout=busy_timeout, readonly=readonly
        )
        if not readonly:
            optimize(connection, busy_timeout)
        memory_sorts(connection)  # after the schema work, which may sort a big table
        return db, connection, version, hold
    except BaseException:
        if connection is not None:
            connection.close()
        hold.release()
        raise


def memory_sorts(conn: apsw.Connection) -> None:
    """``temp_store=MEMORY`` (the store's sorts are bounded) and the WAL's size limit."""
    conn.pragma("temp_store", "MEMORY")
    conn.pragma("journal_size_limit", WAL_SIZE_LIMIT)


def create_database(
    db: pathlib.Path, table: str, busy_timeout: timedelta, vfs: str | None, *, driver: str = "apsw"
) -> None:
    """Make a new database at ``db``, 0600, unless another process makes it first:
    built under a temporary name and hard-linked into place (no one sees a half-made
    file), or, without hard links, the name claimed empty with ``O_EXCL``."""
    link: Callable[[pathlib.Path, pathlib.Path], None] | None = getattr(os, "link", None)
    if link is None:
        _claim_name(db)
        return
    tmp = db.with_name(f".{db.name}.{os.getpid()}-{os.urandom(4).hex()}.creating")
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the database {db}: {exc.strerror or exc}") from exc
    os.close(fd)
    try:
        conn = connect(tmp, "full", busy_timeout, vfs, label=db, driver=driver)
        try:
            ensure_schema(conn, table, db, create=True, busy_timeout=busy_timeout)
            conn.pragma("wal_checkpoint", "TRUNCATE")
        finally:
            conn.close()
        try:
            link(tmp, db)
        except FileExistsError:
            return  # another process created it first; use theirs
        except OSError:
            _claim_name(db)  # no hard links on this file system
    except StoreError:
        raise  # an OSError too, naming the path already
    except OSError as exc:
        raise StoreError(f"cannot create the database {db}: {exc.strerror or exc}") from exc
    except apsw.Error as exc:
        raise open_error(db, exc) from exc
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(OSError):
                os.unlink(f"{tmp}{suffix}")


def _claim_name(db: pathlib.Path) -> None:
    try:
        fd = os.open(db, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process created it first; use theirs
    os.close(fd)


def connect(
    path: pathlib.Path,
    durability: str,
    busy_timeout: timedelta,
    vfs: str | None,
    *,
    label: pathlib.Path | None = None,
    readonly: bool = False,
    driver: str = "apsw",
) -> apsw.Connection:
    """Open and configure the store's own connection (errors name ``label`` or
    ``path``); ``readonly``: ``SQLITE_OPEN_READONLY``, or ``PRAGMA query_only`` where
    that would leave ``-wal``/``-shm`` files behind."""
    db = label or path
    traceless = readonly and vfs is None and _reads_without_trace(path)
    try:
        conn = open_connection(path, driver=driver, readonly=readonly and not traceless, vfs=vfs)
    except apsw.Error as exc:
        raise open_error(db, exc, readonly=readonly) from exc
    busy_ms = int(busy_timeout.total_seconds() * 1000)
    try:
        if traceless:
            conn.pragma("query_only", 1)
        elif readonly:
            conn = _readable(conn, path, vfs, busy_ms, driver)
        set_busy_wait(conn, busy_ms)
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
        if not readonly:
            if conn.readonly("main"):
                raise StoreError(f"cannot write to the database {db}: the file is read-only")
            conn.pragma("synchronous", DURABILITY[durability])
    except apsw.Error as exc:
        conn.close()
        raise open_error(db, exc, readonly=readonly) from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _reads_without_trace(path: pathlib.Path) -> bool:
    """A WAL file alone, it and its folder writable: read it read-write, ``query_only``
    (such a connection deletes ``-wal`` and ``-shm`` as the last to close)."""
    try:  # O_NONBLOCK: a FIFO put in the file's place must not block the read
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        header = os.read(fd, 20)
    except OSError:
        return False
    finally:
        os.close(fd)
    if len(header) < 20 or header[18:20] != b"\x02\x02":  # WAL read and write versions
        return False
    if any(os.path.lexists(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")):
        return False
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


_NO_SHARED_MEMORY = {apsw.SQLITE_READONLY_DIRECTORY, apsw.SQLITE_READONLY_CANTINIT}


def _readable(
    conn: apsw.Connection, path: pathlib.Path, vfs: str | None, busy_ms: int, driver: str
) -> apsw.Connection:
    """``conn``, or, when the ``-shm`` cannot be made in a read-only folder and there
    is no ``-wal``, the file opened ``immutable``."""
    try:
        set_busy_wait(conn, busy_ms)
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        return conn
    except apsw.ReadOnlyError as exc:
        extended = getattr(exc, "extendedresult", None)
        if extended not in _NO_SHARED_MEMORY or os.path.exists(f"{path}-wal"):
            conn.close()
            raise
    conn.close()
    return open_connection(path, driver=driver, readonly=True, vfs=vfs, immutable=True)


def open_error(db: pathlib.Path, exc: apsw.Error, *, readonly: bool = False) -> StoreError:
    """The :class:`StoreError` for an apsw error met while opening ``db``."""
    if isinstance(exc, apsw.NotADBError):
        return StoreError(f"cannot open {db}: it is not a SQLite database ({exc})")
    if isinstance(exc, apsw.CorruptError):
        return StoreError(f"cannot open {db}: the database is corrupt ({exc})")
    if isinstance(exc, apsw.ReadOnlyError | apsw.CantOpenError | apsw.AuthError):
        if readonly:
            return StoreError(f"cannot open the database {db} for reading: {exc}")
        return StoreError(
            f"cannot open the database {db} for writing (read-only file or folder?): {exc}"
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreError(f"cannot open the database {db}: it stayed locked ({exc})")
    return StoreError(f"cannot open the database {db}: {type(exc).__name__}: {exc}")


def optimize(conn: apsw.Connection, busy_timeout: timedelta) -> None:
    """``PRAGMA optimize``, bounded, skipped when another connection holds the lock."""
    with suppress(apsw.Error), not_waiting(conn, busy_timeout):
        conn.pragma("analysis_limit", 1000)
        conn.pragma("optimize", 0x10002)


def switch_to_wal(conn: apsw.Connection, db: pathlib.Path, busy_timeout: timedelta) -> None:
    """``journal_mode=WAL``, retried until the busy timeout (no busy handler waits for it)."""
    if str(conn.pragma("journal_mode")).lower() == "wal":
        return
    deadline = time.monotonic() + busy_timeout.total_seconds()
    while True:
        try:
            conn.pragma("journal_mode", "wal")
            break
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
    mode = conn.pragma("journal_mode")
    if str(mode).lower() != "wal":
        raise StoreError(f"cannot switch the database {db} to WAL (journal_mode is {mode!r})")


def _refusal(
    conn: apsw.Connection, table: str, db: pathlib.Path, *, may_create: bool
) -> tuple[bool, int | None, bool]:
    """Every check that can refuse the table, all reads; when none does, (does the table
    exist, its recorded version or None, does its run log exist)."""
    names = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN (?, ?, ?)",
            (table, META_TABLE, f"{table}_runs"),
        )
    }
    version: int | None = None
    if META_TABLE in names:
        rows = conn.execute(
            f"SELECT version FROM {META_TABLE} WHERE table_name = ?", (table,)
        ).fetchall()
        if rows:
            version = int(str(rows[0][0]))
    exists = table in names
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"the table {table} in {db} has schema version {version}, newer than this"
            f" hexeract_lite understands ({SCHEMA_VERSION}); upgrade hexeract_lite"
        )
    if not exists and not may_create:
        raise StoreError(f"no database at {db}: the file has no table {table}")
    if exists and version is None:
        check_reference_layout(conn, table, db)
    return exists, version, f"{table}_runs" in names


def ensure_schema(
    conn: apsw.Connection,
    table: str,
    db: pathlib.Path,
    *,
    create: bool,
    busy_timeout: timedelta,
    readonly: bool = False,
) -> int:
    """Check ``table`` and, unless ``readonly``, create, adopt or upgrade it to
    :data:`SCHEMA_VERSION` in one transaction; the version it has now."""
    try:
        exists, version, runs = _refusal(conn, table, db, may_create=create)
        if readonly:
            return version or 0
        # only now, with nothing to refuse, may the file change
        if not exists and conn.execute("PRAGMA page_count").fetchall()[0][0] == 0:
            # a new file: chosen before its first table
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        switch_to_wal(conn, db, busy_timeout)
        if exists and version == SCHEMA_VERSION and runs:
            return SCHEMA_VERSION
        conn.execute("BEGIN IMMEDIATE")
        try:
            # again, under the write lock
            exists, version, runs = _refusal(conn, table, db, may_create=create)
            if not exists:  # new, or dropped by another tool with its indexes
                conn.execute(sqlite_table_ddl(table))
                version = None  # every step (each idempotent) makes its indexes
            start = version or 0
            if start == SCHEMA_VERSION and not runs:
                start = 6  # its run log dropped by another tool: made again
            for step in UPGRADES[start:]:
                step(conn, table)
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {META_TABLE} ("
                " table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)"
            )
            conn.execute(
                f"INSERT INTO {META_TABLE} (table_name, version) VALUES (?, ?)"
                " ON CONFLICT (table_name) DO UPDATE SET version = excluded.version",
                (table, SCHEMA_VERSION),
            )
            conn.execute("COMMIT")
        except BaseException:
            roll_back(conn)
            raise
    except apsw.Error as exc:
        raise open_error(db, exc, readonly=readonly) from exc
    return SCHEMA_VERSION


def check_reference_layout(conn: apsw.Connection, table: str, db: pathlib.Path) -> None:
    """A table without a recorded version: a rowid table with the reference's columns."""
    columns = {row[1]: str(row[2]).upper() for row in conn.execute(f"PRAGMA table_info({table})")}
    wrong = [
        name for name, decl, _ in REFERENCE_COLUMNS if name not in columns or columns[name] != decl
    ]
    if wrong:
        raise StoreError(
            f"the table {table} in {db} is not a scheduler table: the columns"
            f" {', '.join(wrong)} are missing or have another type"
        )
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0").fetchall()
    except apsw.SQLError as exc:
        raise StoreError(
            f"the table {table} in {db} is WITHOUT ROWID; the reference's layout (and"
            " hexeract_lite's claim) needs an ordinary rowid table"
        ) from exc


assert len(UPGRADES) == SCHEMA_VERSION
