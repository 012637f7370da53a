"""The SQLite library a store's connections use: apsw (the default) or ``sqlite3``
(behind apsw's interface, :mod:`.shim`). Two copies of SQLite in one process do not see
each other's locks, so :func:`hold_file` keeps to one library per file per process."""

from __future__ import annotations

import os
import pathlib
import threading
from datetime import timedelta

import apsw

from ...errors import InvalidConfiguration

__all__ = [
    "DRIVERS",
    "MIN_SQLITE3",
    "FileHold",
    "check_open",
    "check_sqlite3_version",
    "hold_file",
    "open_connection",
    "shares_sqlite_with_apsw",
]

DRIVERS = ("apsw", "sqlite3")
"""The values of ``open(driver=...)``."""
MIN_SQLITE3 = (3, 35, 0)
"""The oldest SQLite the store's statements run on (``UPDATE ... RETURNING``)."""


def shares_sqlite_with_apsw() -> bool:
    """True when the stdlib ``sqlite3`` module and apsw use one copy of SQLite."""
    import sqlite3  # loaded only where the two libraries may meet

    return not apsw.using_amalgamation and apsw.sqlite_lib_version() == sqlite3.sqlite_version


def two_copies() -> str:
    """Why two SQLite libraries may not share a file."""
    import sqlite3

    return (
        f"the standard library's sqlite3 runs SQLite {sqlite3.sqlite_version}, a second copy"
        f" of SQLite beside the one apsw uses ({apsw.sqlite_lib_version()}, bundled): two"
        " copies in one process break each other's locks on the same file and can corrupt"
        " it (https://sqlite.org/howtocorrupt.html, 2.2.1)"
    )


def check_sqlite3_version(version: tuple[int, ...]) -> None:
    """Raise :class:`InvalidConfiguration` when ``version`` is older than :data:`MIN_SQLITE3`."""
    if tuple(version) < MIN_SQLITE3:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_SQLITE3))
        raise InvalidConfiguration(
            f"driver='sqlite3' needs SQLite {need} or newer (UPDATE ... RETURNING); the"
            f" standard library's sqlite3 runs SQLite {have}: use driver='apsw'"
        )


def check_open(
    durability: object,
    busy_timeout: object,
    clock: object,
    driver: object,
    vfs: str | None,
    create: object,
    readonly: object,
) -> str:
    """``SqliteScheduleStore.open``'s arguments checked before anything opens; the driver."""
    from ...clock import Clock
    from ..checks import check_flag

    if durability not in ("full", "relaxed", "normal"):
        raise InvalidConfiguration(
            f"durability must be 'full', 'relaxed' or 'normal', got {durability!r}"
        )
    if not isinstance(busy_timeout, timedelta) or busy_timeout < timedelta(0):
        raise InvalidConfiguration(f"busy_timeout must be a timedelta >= 0, got {busy_timeout!r}")
    if not isinstance(clock, Clock):
        raise InvalidConfiguration(f"clock must have a now() method, got {clock!r}")
    if driver not in DRIVERS:
        raise InvalidConfiguration(f"driver must be 'apsw' or 'sqlite3', got {driver!r}")
    if driver == "sqlite3":
        import sqlite3

        check_sqlite3_version(sqlite3.sqlite_version_info)
        if vfs is not None:
            raise InvalidConfiguration(
                f"vfs={vfs!r} cannot be used with driver='sqlite3': VFSes are registered"
                " through apsw (apsw.VFS), in apsw's SQLite, which the standard library's"
                " sqlite3 does not see; use driver='apsw' to open the file with a VFS"
            )
    if vfs is not None and vfs not in apsw.vfs_names():
        raise InvalidConfiguration(
            f"vfs must name a registered SQLite VFS {apsw.vfs_names()}, got {vfs!r}"
        )
    check_flag("create", create)
    check_flag("readonly", readonly)
    return str(driver)


_HELD: dict[tuple[int, int], tuple[str, int]] = {}
_HELD_LOCK = threading.Lock()


class FileHold:
    """One store's claim on its file for its library (see :func:`hold_file`)."""

    def __init__(self, key: tuple[int, int] | None, driver: str) -> None:
        self._key: tuple[int, int] | None = key
        self.driver = driver

    def release(self) -> None:
        """Give the claim back (idempotent)."""
        with _HELD_LOCK:
            key, self._key = self._key, None
            if key is None:
                return
            driver, count = _HELD.get(key, (self.driver, 1))
            if count <= 1:
                _HELD.pop(key, None)
            else:
                _HELD[key] = (driver, count - 1)


def hold_file(db: pathlib.Path, driver: str) -> FileHold:
    """Record that this process opens ``db`` with ``driver`` (no such file: nothing to
    hold); :class:`InvalidConfiguration` when it has the file open with the other library."""
    try:
        st = os.stat(db)
    except OSError:
        return FileHold(None, driver)
    key = (st.st_dev, st.st_ino)
    with _HELD_LOCK:
        held, count = _HELD.get(key, (driver, 0))
        if count and held != driver and not shares_sqlite_with_apsw():
            raise InvalidConfiguration(
                f"cannot open {db} with driver={driver!r}: this process has it open with"
                f" driver={held!r} already, and {two_copies()}. Use one driver for the file"
                " in each process"
            )
        _HELD[key] = (held if count else driver, count + 1)
    return FileHold(key, driver)


def open_connection(
    path: pathlib.Path,
    *,
    driver: str,
    readonly: bool,
    vfs: str | None,
    immutable: bool = False,
) -> apsw.Connection:
    """A connection on the existing file ``path``: read-write (never created),
    ``readonly`` or ``immutable`` (read without locks); apsw's errors either way. A
    read-only one reads an existing ``-shm`` without writing it (``readonly_shm``)."""
    if immutable:
        mode = "ro&immutable=1"
    elif readonly:
        mode = "ro&readonly_shm=1" if os.path.exists(f"{path}-shm") else "ro"
    else:
        mode = "rw"
    uri = f"{path.as_uri()}?mode={mode}"
    if driver == "apsw":
        flags = apsw.SQLITE_OPEN_READONLY if mode != "rw" else apsw.SQLITE_OPEN_READWRITE
        return apsw.Connection(uri, flags=flags | apsw.SQLITE_OPEN_URI, vfs=vfs)
    from .shim import open_sqlite3

    return open_sqlite3(uri, path, readonly=mode != "rw")
