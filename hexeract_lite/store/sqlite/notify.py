"""Cross-process wake-ups for the SQLite store: the WAL file watched with inotify.

Every commit in WAL mode writes the ``-wal`` file; a store that claims work watches it
(Linux) and signals its ``changes``. The signal is a hint; without inotify the worker's
polling of ``data_version()`` still notices every commit within its poll interval.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import select
import sys
import threading
import time
from collections.abc import Callable

from ..._log import package_logger
from ...errors import StoreError
from ..signal import ChangeSignal

__all__ = ["CommitWatch", "WalWatcher"]

_log = package_logger(__name__)

_IN_MODIFY = 0x00000002
_COALESCE_S = 0.002
"""After a signal the thread pauses this long, so that the several writes of one
commit (and a burst of commits) wake it once rather than once each."""


def _inotify() -> tuple[Callable[..., int], Callable[..., int]] | None:
    """The C library's ``inotify_init1`` and ``inotify_add_watch``; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # only a claiming store starts a watcher

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):  # pragma: no cover - a libc without inotify
        return None
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    add.restype = ctypes.c_int
    return init, add


class WalWatcher:
    """A thread that calls ``signal()`` soon after ``<db>-wal`` is written.

    Build it with :meth:`start` (None where it cannot watch); :meth:`stop` ends the
    thread and closes its descriptors. ``signal`` must not raise and must be quick.
    """

    def __init__(self, fd: int, signal: Callable[[], None]) -> None:
        self._fd = fd
        self._signal = signal
        self._wake_r, self._wake_w = os.pipe()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="hexeract-sqlite-watch", daemon=True)

    @classmethod
    def start(cls, db: pathlib.Path, signal: Callable[[], None]) -> WalWatcher | None:
        """Watch ``<db>-wal``; None when this platform has no inotify or the watch
        cannot be set (no such file yet, a file system without inotify, no watches
        left): the caller's polling then does the work alone."""
        calls = _inotify()
        if calls is None:
            return None
        init, add = calls
        fd = init(os.O_CLOEXEC | os.O_NONBLOCK)
        if fd < 0:
            return None
        if add(fd, os.fsencode(f"{db}-wal"), _IN_MODIFY) < 0:
            os.close(fd)
            return None
        watcher = cls(fd, signal)
        watcher._thread.start()
        return watcher

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [])
                if self._wake_r in ready:
                    return
                with contextlib.suppress(BlockingIOError):
                    os.read(self._fd, 65536)  # the events themselves say nothing more
                self._signal()
                time.sleep(_COALESCE_S)
        except OSError as exc:  # pragma: no cover - the descriptor broke: polling remains
            _log.debug("the WAL watcher stopped: %s", exc)
        finally:
            os.close(self._fd)

    def stop(self) -> None:
        """End the thread (within a moment) and release its descriptors. Idempotent;
        in a forked child it only forgets the parent's thread."""
        if self._pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pid = -1


_RECHECK_S = (0.0, 0.001, 0.002, 0.004, 0.008)
"""When another connection's commit may show after a write to the WAL file."""


class CommitWatch:
    """Signals a store's :class:`ChangeSignal` when another connection commits (a write
    to the WAL file). A store starts one at its first claim in a process."""

    def __init__(self, changes: ChangeSignal, data_version: Callable[[], int], seen: int) -> None:
        self._changes = changes
        self._data_version = data_version
        self._seen = seen
        self._watcher: WalWatcher | None = None

    @classmethod
    def start(
        cls,
        db: pathlib.Path,
        changes: ChangeSignal,
        data_version: Callable[[], int],
        seen: int,
    ) -> CommitWatch:
        """Watch ``db``'s WAL; ``seen``: the ``data_version`` now."""
        watch = cls(changes, data_version, seen)
        watch._watcher = WalWatcher.start(db, watch._on_wal_write)
        if watch._watcher is not None:
            changes.look = watch.look
        return watch

    def stop(self) -> None:
        """End the thread, if one runs."""
        if self._watcher is not None:
            self._watcher.stop()

    def _on_wal_write(self) -> None:
        """The WAL file was written: signal once another connection's commit shows
        (``data_version`` moved; it shows only after the writer's fsync, so it is
        looked at again for a few milliseconds while a worker waits for work; otherwise
        the next wait looks first, :meth:`ChangeSignal.mark_stale`)."""
        for pause in _RECHECK_S:
            if pause:
                time.sleep(pause)
            if not self._changes.waiting():
                self._changes.mark_stale()
                continue
            if self.look():
                return

    def look(self) -> bool:
        """Notify if another connection committed since the last look; True when it did
        (or the look failed: the poll notices later)."""
        try:
            version = self._data_version()
        except StoreError:  # closed, or the lock stayed busy: the poll notices later
            return True
        if version == self._seen:
            return False
        self._seen = version
        self._changes.notify()
        return True
