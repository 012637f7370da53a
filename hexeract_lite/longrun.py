"""Long handlers: :func:`current_dispatch` and :class:`Snooze`."""

from __future__ import annotations

import contextvars
import math
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from ._time import to_utc_ms
from .errors import DispatchError, InvalidArgument

if TYPE_CHECKING:
    from .clock import Clock
    from .snapshot import LeasedOccurrence
    from .store.base import ScheduleStore

__all__ = [
    "DispatchAborted",
    "DispatchHandle",
    "Snooze",
    "current_dispatch",
    "current_handle",
    "dispatching",
    "seconds_of",
]

_CURRENT: contextvars.ContextVar[DispatchHandle | None] = contextvars.ContextVar(
    "hexeract_lite_current_dispatch", default=None
)

_STEP = timedelta(milliseconds=1)
"""A lease is stored at millisecond precision: an extension moves it by at least this."""


def seconds_of(value: object, name: str) -> timedelta:
    """``value`` (a timedelta, or seconds) as a timedelta > 0; else :class:`InvalidArgument`
    naming ``name``."""
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        delta = timedelta(seconds=value)
    else:
        raise InvalidArgument(
            f"{name} must be a timedelta or a number of seconds, got {name}={value!r:.100}"
        )
    if delta <= timedelta(0):
        raise InvalidArgument(f"{name} must be > 0, got {name}={value!r:.100}")
    return delta


class Snooze(Exception):
    """Raised (or returned) by a handler: dispatch this occurrence again after ``delay`` (a
    timedelta or seconds, > 0), its attempt given back, same id and ``scheduled_for``.
    Past the worker's ``max_snoozes`` the schedule is dead-lettered.

    .. versionadded:: 0.2.0"""

    def __init__(self, delay: timedelta | float) -> None:
        self.delay = seconds_of(delay, "delay")
        super().__init__(f"snoozed for {self.delay.total_seconds():g} s")


class DispatchAborted(DispatchError):
    """The failure recorded for a dispatch stopped by ``SchedulerControl.abort``;
    ``cancel``: the schedule is cancelled with it.

    .. versionadded:: 0.2.0"""

    def __init__(self, cancel: bool = False) -> None:
        self.cancel = cancel
        how = "aborted and cancelled" if cancel else "aborted"
        super().__init__(f"the dispatch was {how} by request (SchedulerControl.abort)")


@attrs.frozen
class _Lease:
    store: ScheduleStore
    clock: Clock
    lease: timedelta
    told: Callable[[DispatchHandle, bool], None] | None


class DispatchHandle:
    """The dispatch in flight of one occurrence (:func:`current_dispatch`);
    ``occurrence`` has its current ``leased_until``.

    .. versionadded:: 0.2.0"""

    __slots__ = (
        "_abort",
        "_closed",
        "_how",
        "_lock",
        "_lost",
        "_occurrence",
        "_on_abort",
        "_running",
        "_started",
    )

    def __init__(self, occurrence: LeasedOccurrence, how: _Lease) -> None:
        self._occurrence = occurrence
        self._how = how
        self._lock = threading.Lock()
        self._lost = False
        self._closed = False
        self._started = False
        self._running = False
        self._abort: str | None = None
        self._on_abort: Callable[[], None] | None = None

    def __repr__(self) -> str:
        msg = self._occurrence.message
        return f"DispatchHandle({msg.schedule_id}, leased_until={self.lease.isoformat()})"

    @property
    def occurrence(self) -> LeasedOccurrence:
        """The occurrence dispatched, with its current lease."""
        return self._occurrence

    @property
    def lease(self) -> datetime:
        """Its current ``leased_until``: the fencing token of its settlement."""
        return self._occurrence.leased_until

    @property
    def lost(self) -> bool:
        """True once a heartbeat found the lease lost."""
        return self._lost

    def heartbeat(self, extend: timedelta | float | None = None) -> bool:
        """Extend the lease to ``now + extend`` (default: the worker's ``lease``; never
        shorter), fenced by the current lease: True when extended, False once the lease was
        lost or the dispatch is over. A store error is raised, the lease unchanged.
        ``SchedulerWorkerConfig(heartbeat=...)`` calls it on a period."""
        how = self._how
        span = how.lease if extend is None else seconds_of(extend, "extend")
        with self._lock:
            if self._lost or self._closed:
                return False
            occ = self._occurrence
            until = to_utc_ms(how.clock.now() + span, "lease deadline")
            until = max(until, occ.leased_until + _STEP)
            ok = how.store.extend_lease(occ.message.schedule_id, occ.leased_until, until)
            if ok:
                self._occurrence = attrs.evolve(occ, leased_until=until)
            else:
                self._lost = True
        if how.told is not None:
            how.told(self, ok)
        return ok

    def should_abort(self) -> bool:
        """True once the dispatch should stop: its lease was lost, an abort was asked for, or
        the worker gave up on it or ended its handle."""
        return self._lost or self._closed or self._abort is not None

    @property
    def abort_requested(self) -> str | None:
        """``"abort"`` or ``"cancel"`` once an abort was asked for; else None."""
        return self._abort

    def request_abort(self, how: str) -> None:
        """Mark the dispatch as asked to stop (``"abort"`` or ``"cancel"``), cancelling an
        async one (:meth:`on_abort`)."""
        self._abort = how
        stop = self._on_abort
        if stop is not None:
            stop()

    def on_abort(self, stop: Callable[[], None] | None) -> None:
        """Call ``stop`` when an abort is asked for (at once if it was); None: no more."""
        self._on_abort = stop
        if stop is not None and self._abort is not None:
            stop()

    def close(self) -> LeasedOccurrence:
        """End the handle (heartbeats return False); the occurrence with its last lease."""
        with self._lock:
            self._closed = True
            return self._occurrence

    @property
    def started(self) -> bool:
        """True once the occurrence was handed to the sink."""
        return self._started

    @property
    def running(self) -> bool:
        """True while the occurrence is with the sink."""
        return self._running


def current_handle() -> DispatchHandle | None:
    """The handle of the dispatch in flight in this thread or task, if any."""
    return _CURRENT.get()


def current_dispatch() -> DispatchHandle:
    """The :class:`DispatchHandle` of the dispatch in flight in this thread or task;
    outside one: :class:`RuntimeError`.

    .. versionadded:: 0.2.0"""
    handle = _CURRENT.get()
    if handle is None:
        raise RuntimeError(
            "current_dispatch() was called outside a dispatch: only a handler the worker"
            " is running (or code it calls) has one"
        )
    return handle


class dispatching:  # a context manager, named as used: with dispatching(handle)
    """``with dispatching(handle):`` makes ``handle`` (if any) this thread's or task's
    current dispatch for the block."""

    __slots__ = ("_handle", "_token")

    def __init__(self, handle: DispatchHandle | None) -> None:
        self._handle = handle
        self._token: contextvars.Token[DispatchHandle | None] | None = None

    def __enter__(self) -> None:
        handle = self._handle
        if handle is not None:
            handle._started = handle._running = True
            self._token = _CURRENT.set(handle)

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle._running = False
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None
