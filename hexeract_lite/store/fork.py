"""Objects that start afresh in a child process made by ``fork()``.

A child made by ``os.fork()`` (``multiprocessing``'s default start method on Linux,
pre-fork servers) inherits a copy of every object, locks included, with only the
forking thread running: a lock another thread held at the fork stays held for ever in
the child, and a database connection must never be used from two processes. An object
registered here gets its ``_after_fork_in_child()`` called in the child, before any
other code of the child runs (``os.register_at_fork``), so its normal paths pay
nothing for the check.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol

__all__ = ["AT_FORK_HOOKS", "ForkAware", "start_afresh_after_fork"]


class ForkAware(Protocol):
    """An object with something to reset in a forked child."""

    def _after_fork_in_child(self) -> None: ...


AT_FORK_HOOKS = hasattr(os, "register_at_fork")
"""True where ``os.register_at_fork`` exists (every platform with ``fork()``)."""

_REGISTERED: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def start_afresh_after_fork(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every child this process forks, for as
    long as ``obj`` lives (a weak reference: registering keeps nothing alive)."""
    _REGISTERED.add(obj)


def _in_child() -> None:
    for obj in list(_REGISTERED):
        obj._after_fork_in_child()


if AT_FORK_HOOKS:
    os.register_at_fork(after_in_child=_in_child)
