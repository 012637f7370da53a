"""A SQLite VFS that fails writes and syncs on command: a disk that errors or fills up.

:class:`FaultVFS` inherits every method from the default VFS (``""``) and wraps each file
it opens in a :class:`FaultFile`, whose ``xWrite`` and ``xSync`` first ask the shared
:class:`FaultSwitch` whether to fail. The test flips the switch::

    vfs = FaultVFS("faulty")
    store = SqliteScheduleStore.open(path, vfs="faulty")
    vfs.switch.arm(apsw.FullError, ops={"write"})   # every write now fails: disk full
    ...
    vfs.switch.clear()                               # the disk is healthy again
    vfs.unregister()

Raising ``apsw.IOError`` makes SQLite see ``SQLITE_IOERR``; ``apsw.FullError`` is
``SQLITE_FULL``. Nothing here is a mock of the store: SQLite itself receives the error
from its I/O layer exactly as it would from a failing disk, and reacts as it does.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable

import apsw

__all__ = ["FaultFile", "FaultSwitch", "FaultVFS", "file_kind"]

_KINDS = (
    (apsw.SQLITE_OPEN_MAIN_DB, "db"),
    (apsw.SQLITE_OPEN_WAL, "wal"),
    (apsw.SQLITE_OPEN_MAIN_JOURNAL, "journal"),
)


def file_kind(flags: int) -> str:
    """``db``, ``wal``, ``journal`` or ``other`` (temp files, sub-journals) for open flags."""
    for bit, kind in _KINDS:
        if flags & bit:
            return kind
    return "other"


class FaultSwitch:
    """Which I/O calls fail, with which error. Thread-safe; flipped by the test.

    A call matches when its operation (``write`` or ``sync``) is in ``ops`` and the kind
    of its file (``db``, ``wal``, ``journal``, ``other``) is in ``files``. The first
    ``after`` matching calls pass; then each matching call fails, ``times`` times in all
    (``None``: until :meth:`clear`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._error: type[apsw.Error] | None = None
        self._ops: frozenset[str] = frozenset()
        self._files: frozenset[str] = frozenset()
        self._after = 0
        self._times: int | None = None
        self.injected: Counter[tuple[str, str]] = Counter()
        """How many errors were raised, by (operation, file kind)."""
        self.calls: Counter[tuple[str, str]] = Counter()
        """Every write and sync seen, by (operation, file kind), faulted or not."""

    def arm(
        self,
        error: type[apsw.Error],
        *,
        ops: Iterable[str] = ("write", "sync"),
        files: Iterable[str] = ("db", "wal", "journal", "other"),
        after: int = 0,
        times: int | None = None,
    ) -> None:
        """Start failing matching calls with ``error`` (``apsw.IOError``, ``apsw.FullError``)."""
        ops = frozenset(ops)
        files = frozenset(files)
        assert ops <= {"write", "sync"}, ops
        assert files <= {"db", "wal", "journal", "other"}, files
        with self._lock:
            self._error = error
            self._ops = ops
            self._files = files
            self._after = after
            self._times = times

    def clear(self) -> None:
        """Stop failing: the disk is healthy again."""
        with self._lock:
            self._error = None

    @property
    def armed(self) -> bool:
        """True while calls may still fail."""
        with self._lock:
            return self._error is not None

    def total_injected(self) -> int:
        """How many errors were raised in all."""
        with self._lock:
            return sum(self.injected.values())

    def check(self, op: str, kind: str) -> None:
        """Raise the armed error if this call (``op`` on a ``kind`` file) must fail."""
        with self._lock:
            self.calls[op, kind] += 1
            error = self._error
            if error is None or op not in self._ops or kind not in self._files:
                return
            if self._after > 0:
                self._after -= 1
                return
            if self._times is not None:
                if self._times <= 0:
                    self._error = None
                    return
                self._times -= 1
            self.injected[op, kind] += 1
        raise error(f"injected fault: {op} on the {kind} file")


class FaultFile(apsw.VFSFile):
    """A file of the default VFS whose writes and syncs consult the switch first."""

    def __init__(
        self, switch: FaultSwitch, name: str | apsw.URIFilename | None, flags: list[int]
    ) -> None:
        self._switch = switch
        self._kind = file_kind(flags[0])
        super().__init__("", name, flags)

    def xWrite(self, data: bytes, offset: int) -> None:
        self._switch.check("write", self._kind)
        super().xWrite(data, offset)

    def xSync(self, flags: int) -> None:
        self._switch.check("sync", self._kind)
        super().xSync(flags)


class FaultVFS(apsw.VFS):
    """The default VFS with :class:`FaultFile` files, registered under ``name``.

    Registration is process-wide: call :meth:`unregister` when done.
    """

    def __init__(self, name: str = "faulty", switch: FaultSwitch | None = None) -> None:
        self.name = name
        self.switch = switch if switch is not None else FaultSwitch()
        super().__init__(name, "")

    on_open: Callable[[str], None] | None = None
    """Called with the file kind (``db``, ``wal``, ...) before each file is opened: a
    hook to make something happen at an exact moment of another connection's open."""

    def xOpen(self, name: str | apsw.URIFilename | None, flags: list[int]) -> FaultFile:
        if self.on_open is not None:
            self.on_open(file_kind(flags[0]))
        return FaultFile(self.switch, name, flags)
