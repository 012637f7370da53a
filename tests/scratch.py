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
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_S = TypeVar("_S")


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


class ScratchTables:
    """A test server's scratch tables: ``empty(url, name)`` and ``drop(url, name)`` as
    :class:`TablePool` takes them, ``unique()`` a new table name."""

    def __init__(
        self,
        empty: Callable[[str, str], bool],
        drop: Callable[[str, str], None],
        unique: Callable[[], str],
    ) -> None:
        self._empty, self._drop, self._unique = empty, drop, unique
        self._pools: dict[str, TablePool] = {}

    def _pool(self, url: str) -> TablePool:
        pool = self._pools.get(url)
        if pool is None:
            pool = self._pools[url] = TablePool(
                lambda name: self._empty(url, name), lambda name: self._drop(url, name)
            )
        return pool

    def open(
        self, store_class: type[_S], url: str, table: str | None, clock: Any, options: Any
    ) -> _S:
        """A store of ``store_class`` on a fresh table: ``table``, dropped when the store
        closes, or, without a name, an empty table of the pool that closing empties and
        gives back."""
        from hexeract_lite.clock import SYSTEM_CLOCK

        pool = self._pool(url) if table is None else None
        name = table or (pool and pool.take()) or self._unique()
        drop = self._drop

        class ScratchStore(store_class):  # type: ignore[valid-type,misc]
            def close(self) -> None:
                if not self.closed:
                    super().close()
                    if pool is None:
                        drop(url, name)
                    else:
                        pool.give_back(name)

        try:
            store = ScratchStore.open(url, table=name, clock=clock or SYSTEM_CLOCK, **options)
        except BaseException:
            with contextlib.suppress(Exception):  # the server may be what failed
                drop(url, name)
            raise
        assert isinstance(store, store_class)
        return store
