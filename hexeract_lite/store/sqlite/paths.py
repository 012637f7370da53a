"""Where the SQLite store's file is: the default path, and the checks a path passes
before anything opens it (no SQL)."""

from __future__ import annotations

import os
import pathlib
import stat
from contextlib import suppress

from ..._conn import LIBPQ_KV_RE, POSTGRES_SCHEMES, SCHEME_RE, sqlite_url_path
from ...errors import InvalidConfiguration, StoreError
from ...redact import redact_conn

__all__ = ["APP_NAME", "DATABASE_FILE_NAME", "check_path", "default_database_path"]

APP_NAME = "hexeract_lite"
"""The platformdirs application name of the default database's folder."""
DATABASE_FILE_NAME = "scheduler.db"
"""The file name of the default database."""


def default_database_path() -> pathlib.Path:
    """``<user data dir>/hexeract_lite/scheduler.db`` (platformdirs), e.g.
    ``~/.local/share/hexeract_lite/scheduler.db`` on Linux."""
    import platformdirs  # imported when needed: most openings name their file

    return pathlib.Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / DATABASE_FILE_NAME


def check_path(path: str | os.PathLike[str] | None, create: bool) -> pathlib.Path:
    """The absolute database path, after the checks that need no SQL (the default
    folders made 0700 when ``create``); a ``sqlite://`` URL read as ``parse_conn`` reads
    it, another database's connection string refused."""
    if path is None:
        db = default_database_path()
        if create and not db.parent.is_dir():
            try:
                _make_private_folders(db.parent)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder {db.parent} for the database {db}: {exc}"
                ) from exc
    else:
        if not isinstance(path, str | os.PathLike):
            raise InvalidConfiguration(f"path must be a str or os.PathLike, got {path!r}")
        if isinstance(path, str) and ("://" in path or "=" in path):
            path = _path_of_url(path)
        db = pathlib.Path(os.fsdecode(os.fspath(path)))
    db = db.absolute()
    if db.is_dir():
        raise StoreError(f"cannot open the database {db}: it is a directory")
    try:
        mode = db.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise StoreError(f"cannot open the database {db}: {exc.strerror or exc}") from exc
    if mode is not None:
        if not stat.S_ISREG(mode):
            raise StoreError(
                f"cannot open the database {db}: it is"
                f" {_KINDS.get(stat.S_IFMT(mode), 'not a file')}, not a regular file"
            )
        return db
    if not create:
        raise StoreError(f"no database at {db}")
    if not db.parent.is_dir():
        raise StoreError(f"cannot create the database {db}: the folder {db.parent} does not exist")
    return db


def _path_of_url(conn: str) -> pathlib.Path:
    match = SCHEME_RE.match(conn)
    if match is not None and match.group(1).lower() == "sqlite":
        return sqlite_url_path(conn, match)
    if match is not None or LIBPQ_KV_RE.match(conn):
        kind = (
            "a PostgreSQL" if match is None or match.group(1).lower() in POSTGRES_SCHEMES else "a"
        )
        raise InvalidConfiguration(
            f"{redact_conn(conn)!r} is {kind} connection string, not a SQLite path:"
            " open it with hexeract_lite.open_store"
        )
    return pathlib.Path(conn)


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _make_private_folders(folder: pathlib.Path) -> None:
    """Create ``folder`` and each missing parent 0700 (``mkdir(parents=True)`` would not)."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for each in reversed(missing):
        with suppress(FileExistsError):
            each.mkdir(mode=0o700)
