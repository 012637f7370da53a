"""Cross-process wake-ups for the SQLite store: the WAL file watched with inotify.

Every commit to a database in WAL mode, by any connection of any process, writes its
pages to the ``-wal`` file beside it. A store that claims work runs one
:class:`WalWatcher` (Linux): a daemon thread blocked on an inotify descriptor that
signals the store's ``changes`` soon after the file is written, so a worker idle in
one process wakes within milliseconds of another process's insert instead of at its
next ``PRAGMA data_version`` check, and without waking up meanwhile.

The signal is a hint: it also fires for the store's own commits (a spurious wake
costs an idle worker one empty cycle, which writes nothing), and where there is no
inotify, or the watch cannot be set, or the file is replaced, the worker's polling of
``data_version()`` still notices every commit within its poll interval.
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

__all__ = ["WalWatcher"]

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

    def alive(self) -> bool:
        """True while the thread runs in this process (a forked child has none)."""
        return self._pid == os.getpid() and self._thread.is_alive()

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
