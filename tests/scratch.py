"""Scratch tables on a test server, reused: a test that wants a fresh table and does
not care for its name gets one a finished test emptied, instead of one created for it.

Creating a table (with its run log and indexes) costs a PostgreSQL or MySQL server far
more than emptying one, and the contract suite asks for one per test. A table comes back
to the pool only when emptying it succeeded; otherwise it is dropped, as is every
pooled table when the process exits. A process started by ``fork`` never takes from
its parent's pool: the parent may hand the same table out again.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable


class TablePool:
    """Table names to reuse. ``empty(name)`` deletes every row of the table and of what
    belongs with it (its run log), True when it did; ``drop(name)`` drops them."""

    def __init__(self, empty: Callable[[str], bool], drop: Callable[[str], None]) -> None:
        self._empty = empty
        self._drop = drop
        self._pid = os.getpid()
        self._free: list[str] = []
        self._lock = threading.Lock()
        atexit.register(self.drop_all)

    def take(self) -> str | None:
        """An emptied table of an earlier test, or None (create one)."""
        with self._lock:
            if os.getpid() != self._pid or not self._free:
                return None
            return self._free.pop()

    def give_back(self, name: str) -> None:
        """``name`` is no longer used: emptied for the next test, or dropped."""
        if os.getpid() == self._pid and self._empty(name):
            with self._lock:
                self._free.append(name)
        else:
            self._drop(name)

    def drop_all(self) -> None:
        """Drop every pooled table (at exit)."""
        with self._lock:
            if os.getpid() != self._pid:
                return
            free, self._free = self._free, []
        for name in free:
            try:
                self._drop(name)
            except Exception:  # the server went away: nothing to clean
                return
