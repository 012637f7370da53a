"""ChangeSignal: how a store wakes the workers of its own process after a commit."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .fork import hold, start_afresh_after_fork

__all__ = ["ChangeSignal"]


class ChangeSignal:
    """Wakes a sleeping worker when this process changes something it may claim.

    A worker reads :meth:`version` before it looks for work, then :meth:`wait` s on it,
    so a change in between is never missed.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._version = 0
        self._waiting = 0
        self._stale = False
        self.look: Callable[[], object] | None = None
        """Set by a store that notices other processes' commits: looks for one now (and
        notifies if it finds one); :meth:`wait` calls it first after :meth:`mark_stale`."""
        start_afresh_after_fork(self)

    def _before_fork(self) -> bool:
        return hold(self._mutex, 10)

    def _after_fork_in_parent(self) -> None:
        self._mutex.release()

    def _after_fork_in_child(self) -> None:
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._waiting = 0

    def version(self) -> int:
        """A counter that moves on every notify."""
        with self._cond:
            return self._version

    def notify(self) -> None:
        """Record a change and wake every waiter."""
        with self._mutex:
            self._version += 1
            if self._waiting:  # most notifies (every insert) find nobody waiting
                self._cond.notify_all()

    def wait(self, since: int, timeout: float) -> bool:
        """Block until the version differs from ``since`` or ``timeout`` (monotonic)
        seconds pass; True on a change. After :meth:`mark_stale`, :attr:`look` first.
        """
        look = self.look
        with self._cond:
            self._waiting += 1  # first: a commit noticed during the look is looked at
        try:
            if self._stale and look is not None:
                self._stale = False
                look()
            with self._cond:
                return self._cond.wait_for(lambda: self._version != since, max(timeout, 0.0))
        finally:
            with self._cond:
                self._waiting -= 1

    def waiting(self) -> bool:
        """True while a thread is in :meth:`wait` (a worker sleeping for work)."""
        return self._waiting > 0

    def mark_stale(self) -> None:
        """Another process may have committed unseen: the next :meth:`wait` looks first."""
        self._stale = True
