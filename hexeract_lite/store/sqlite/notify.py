"""Cross-process wake-ups for the SQLite store: the ``-wal`` file watched with inotify
(Linux). A hint only: the worker's polling of ``data_version()`` notices every commit."""

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

__all__ = ["CommitWatch"]

_log = package_logger(__name__)

_IN_MODIFY = 0x00000002
_COALESCE_S = 0.002  # the writes of one commit (or a burst) wake the thread once
_RECHECK_S = (0.0, 0.001, 0.002, 0.004, 0.008)  # when a commit may show after its write


def _inotify() -> tuple[Callable[..., int], Callable[..., int]] | None:
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


class CommitWatch:
    """Signals a store's :class:`ChangeSignal` when another connection commits (a write
    to the WAL file). A store starts one at its first claim in a process."""

    _fd: int
    _wake_r: int
    _wake_w: int

    def __init__(self, changes: ChangeSignal, data_version: Callable[[], int], seen: int) -> None:
        self._changes = changes
        self._data_version = data_version
        self._seen = seen
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    @classmethod
    def start(
        cls,
        db: pathlib.Path,
        changes: ChangeSignal,
        data_version: Callable[[], int],
        seen: int,
    ) -> CommitWatch:
        """Watch ``db``'s WAL (``seen``: the ``data_version`` now); without inotify or a
        watch on the file, no thread: the caller's polling does the work alone."""
        watch = cls(changes, data_version, seen)
        calls = _inotify()
        if calls is None:
            return watch
        init, add = calls
        fd = init(os.O_CLOEXEC | os.O_NONBLOCK)
        if fd < 0:
            return watch
        if add(fd, os.fsencode(f"{db}-wal"), _IN_MODIFY) < 0:
            os.close(fd)
            return watch
        watch._fd = fd
        watch._wake_r, watch._wake_w = os.pipe()
        watch._thread = threading.Thread(
            target=watch._run, name="hexeract-sqlite-watch", daemon=True
        )
        watch._thread.start()
        changes.look = watch.look
        return watch

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [])
                if self._wake_r in ready:
                    return
                with contextlib.suppress(BlockingIOError):
                    os.read(self._fd, 65536)  # the events themselves say nothing more
                self._on_wal_write()
                time.sleep(_COALESCE_S)
        except OSError as exc:  # pragma: no cover - the descriptor broke: polling remains
            _log.debug("the WAL watcher stopped: %s", exc)
        finally:
            os.close(self._fd)

    def stop(self) -> None:
        """End the thread, if one runs (idempotent; a forked child leaves the parent's)."""
        if self._thread is None or self._pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pid = -1

    def _on_wal_write(self) -> None:
        """Signal once another connection's commit shows: ``data_version`` moves only
        after the writer's fsync, so it is looked at again for a few milliseconds while
        a worker waits; otherwise the next wait looks first (``mark_stale``)."""
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
