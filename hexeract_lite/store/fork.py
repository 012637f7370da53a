"""Stores across ``fork()``: the forking thread holds each registered object's lock
(bounded), the parent releases it after, the child starts the object afresh.
"""

from __future__ import annotations

import logging  # noqa: F401 - imported first, so its own fork hook runs after ours
import os
import threading
import weakref
from collections.abc import Callable
from typing import Protocol

__all__ = ["AT_FORK_HOOKS", "ForkAware", "PidCheckingLock", "hold", "start_afresh_after_fork"]


class ForkAware(Protocol):
    """An object with a lock to hold across a fork and state to reset in the child."""

    def _before_fork(self) -> bool:
        """Take the object's lock (bounded wait); True if taken."""
        ...

    def _after_fork_in_parent(self) -> None:
        """Release what :meth:`_before_fork` took."""
        ...

    def _after_fork_in_child(self) -> None:
        """Start afresh: new locks (the inherited ones are never released)."""
        ...


AT_FORK_HOOKS = hasattr(os, "register_at_fork")
"""True where ``os.register_at_fork`` exists (every platform with ``fork()``)."""

_REGISTERED: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_HELD: list[ForkAware] = []
"""The objects whose lock the forking thread holds, from before the fork to after it."""


def start_afresh_after_fork(obj: ForkAware) -> None:
    """Register ``obj`` (weakly) for every fork of this process."""
    _REGISTERED.add(obj)


def hold(lock: threading.Lock, seconds: float) -> bool:
    """Acquire ``lock`` for a fork, waiting at most ``seconds``; True if acquired."""
    return lock.acquire(timeout=seconds)


class PidCheckingLock:
    """The store's lock where ``os.register_at_fork`` is missing: in another process it
    starts from a fresh lock and calls ``on_fork`` first.
    """

    def __init__(self, on_fork: Callable[[], None]) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._on_fork = on_fork

    def __enter__(self) -> None:
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._lock = threading.Lock()
            self._on_fork()
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _before() -> None:
    _HELD.clear()
    for obj in list(_REGISTERED):
        if obj._before_fork():
            _HELD.append(obj)


def _in_parent() -> None:
    for obj in reversed(_HELD):
        obj._after_fork_in_parent()
    _HELD.clear()


def _in_child() -> None:
    _HELD.clear()
    for obj in list(_REGISTERED):
        obj._after_fork_in_child()


if AT_FORK_HOOKS:
    os.register_at_fork(before=_before, after_in_parent=_in_parent, after_in_child=_in_child)
