"""The worker's dispatches in flight: their handles, and the thread that heartbeats them.

A worker's :class:`InFlight` makes a :class:`~hexeract_lite.longrun.DispatchHandle`
for each occurrence of a claimed batch (:meth:`InFlight.track`) and ends them once
the batch is dispatched (:meth:`InFlight.finish`), which gives the worker each
occurrence with its last lease: the fencing token of its settlement. Every turn of
the batch is judged on the current lease (:meth:`InFlight.turn`).

With ``SchedulerWorkerConfig(heartbeat=...)``, a daemon thread extends the lease of
every occurrence of the batch in flight (the one with the sink and those waiting for
their turn) each ``heartbeat`` period, to ``now + lease``. A heartbeat that finds the
lease lost ends that handle (``should_abort()`` turns True); a store error is logged
and the next period tries again. Hooks are told :class:`~hexeract_lite.hooks.LeaseExtended`
and :class:`~hexeract_lite.hooks.HeartbeatLost` on the thread that heartbeat.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Callable, Sequence
from datetime import timedelta

from ._log import package_logger
from .clock import Clock
from .config import SchedulerWorkerConfig
from .dispatch import SinkRunner
from .hooks import HeartbeatLost, Hook, LeaseExtended, call_hooks
from .longrun import DispatchHandle, _Lease
from .settle import DispatchResult, error_summary, error_text
from .snapshot import LeasedOccurrence
from .store.base import ScheduleStore

__all__ = ["InFlight"]

log = package_logger("hexeract_lite.worker")

_IDLE_WAIT_S = 1.0
"""How long the heartbeat thread sleeps at a time while nothing is in flight."""


class InFlight:
    """The handles of one worker's batch in flight (see the module)."""

    def __init__(
        self,
        store: ScheduleStore,
        clock: Clock,
        lease: timedelta,
        heartbeat: timedelta | None,
        hooks: tuple[Hook, ...],
    ) -> None:
        self._how = _Lease(store, clock, lease, self._told if hooks else None)
        self._hooks = hooks
        self._period = None if heartbeat is None else heartbeat.total_seconds()
        self._lock = threading.Lock()
        self._handles: dict[uuid.UUID, DispatchHandle] = {}
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of(
        cls,
        runner: SinkRunner,
        store: ScheduleStore,
        clock: Clock,
        config: SchedulerWorkerConfig,
        hooks: tuple[Hook, ...],
    ) -> InFlight:
        """The registry of a worker with ``config``, whose ``runner`` finds each
        dispatch's handle in it."""
        flight = cls(store, clock, config.lease, config.heartbeat, hooks)
        runner.handle_of = flight.handle
        return flight

    def track(self, batch: Sequence[LeasedOccurrence]) -> Sequence[LeasedOccurrence]:
        """A handle for each occurrence of ``batch``, heartbeat from now on; ``batch``."""
        how = self._how
        with self._lock:
            for occ in batch:
                self._handles[occ.message.schedule_id] = DispatchHandle(occ, how)
            if self._period is not None and self._thread is None:
                self._closed.clear()
                self._thread = threading.Thread(
                    target=_beat_main,
                    args=(weakref.ref(self), self._wake, self._closed, self._period),
                    name=f"hexeract-heartbeat-{id(self):x}",
                    daemon=True,
                )
                self._thread.start()
        self._wake.set()
        return batch

    def handle(self, occ: LeasedOccurrence) -> DispatchHandle | None:
        """The handle of ``occ`` while its batch is in flight."""
        return self._handles.get(occ.message.schedule_id)

    def current(self, occ: LeasedOccurrence) -> LeasedOccurrence:
        """``occ`` with its current lease."""
        handle = self._handles.get(occ.message.schedule_id)
        return occ if handle is None else handle.occurrence

    def turn(
        self, inner: Callable[[LeasedOccurrence], DispatchResult | None]
    ) -> Callable[[LeasedOccurrence], DispatchResult | None]:
        """``inner`` (a batch's turn) judging each occurrence on its current lease."""
        current = self.current
        return lambda occ: inner(current(occ))

    def finish(self, batch: Sequence[LeasedOccurrence]) -> list[LeasedOccurrence]:
        """End the handles of ``batch``: each occurrence with its last lease."""
        with self._lock:
            handles = [self._handles.pop(occ.message.schedule_id, None) for occ in batch]
        return [occ if h is None else h.close() for occ, h in zip(batch, handles, strict=True)]

    def in_flight(self) -> list[DispatchHandle]:
        """The handles of the batch in flight."""
        with self._lock:
            return list(self._handles.values())

    def close(self) -> None:
        """End the heartbeat thread (a later batch starts another)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._closed.set()
            self._wake.set()

    def beat(self) -> None:
        """One heartbeat of every handle in flight (on the heartbeat thread)."""
        for handle in self.in_flight():
            try:
                handle.heartbeat()
            except Exception as exc:  # the store: the next period tries again
                log.warning("heartbeat failed: %s", error_summary(error_text(exc)))

    def _told(self, handle: DispatchHandle, ok: bool) -> None:
        msg = handle.occurrence.message
        event = LeaseExtended(message=msg, leased_until=handle.lease) if ok else None
        call_hooks(self._hooks, [event if event is not None else HeartbeatLost(message=msg)])


def _beat_main(
    owner: weakref.ref[InFlight], wake: threading.Event, closed: threading.Event, period: float
) -> None:
    """The heartbeat thread: every ``period`` seconds while something is in flight;
    it ends once closed or once its worker is gone."""
    while not closed.is_set():
        flight = owner()
        if flight is None:
            return
        busy = bool(flight._handles)
        del flight
        if not busy:
            wake.wait(_IDLE_WAIT_S)
            wake.clear()
            continue
        if closed.wait(period):
            return
        flight = owner()
        if flight is None:
            return
        flight.beat()
        del flight
