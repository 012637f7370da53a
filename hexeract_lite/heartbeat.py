"""The worker's dispatches in flight: their handles, and a daemon thread that reads
their abort requests twice per ``poll_interval`` and, with a ``heartbeat``, extends
every lease of the batch each period."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence

from ._log import package_logger
from .clock import Clock
from .config import SchedulerWorkerConfig
from .hooks import HeartbeatLost, Hook, LeaseExtended, call_hooks
from .longrun import DispatchAborted, DispatchHandle, _Lease
from .settle import DispatchResult, ResultKind, error_summary, error_text
from .snapshot import LeasedOccurrence
from .store.base import ScheduleStore
from .store.longrun import ABORT_KINDS

__all__ = ["InFlight"]

log = package_logger("hexeract_lite.worker")

_IDLE_WAIT_S = 1.0
"""How long the heartbeat thread sleeps at a time while nothing is in flight."""


class InFlight:
    """The handles of one worker's batch in flight."""

    def __init__(
        self,
        store: ScheduleStore,
        clock: Clock,
        config: SchedulerWorkerConfig,
        hooks: tuple[Hook, ...],
        *,
        beats: bool,
    ) -> None:
        self._store = store
        self._how = _Lease(store, clock, config.lease, self._told if hooks else None)
        self._hooks = hooks
        heartbeat = config.heartbeat if beats else None
        self.period = None if heartbeat is None else heartbeat.total_seconds()
        """Seconds between two heartbeats of the batch in flight (None: none)."""
        poll = config.poll_interval.total_seconds() / 2
        self.poll = poll if self.period is None else min(poll, self.period)
        """Seconds between two looks for abort requests: half ``poll_interval``, or the
        heartbeat period when shorter."""
        self._lock = threading.Lock()
        self._handles: dict[int, DispatchHandle] = {}  # by schedule_id.int
        self.tracked = 0
        """How many batches were tracked so far."""
        self.wake = threading.Event()
        self.closed = threading.Event()
        self._thread: threading.Thread | None = None

    def track(self, batch: Sequence[LeasedOccurrence]) -> Sequence[LeasedOccurrence]:
        """Give each occurrence of ``batch`` a handle, watched from now on; ``batch``."""
        how = self._how
        with self._lock:
            for occ in batch:
                self._handles[occ.message.schedule_id.int] = DispatchHandle(occ, how)
            self.tracked += 1
            if self._thread is None:
                self.closed = threading.Event()  # the thread's own: an old one may linger
                self._thread = threading.Thread(
                    target=_watch_main,
                    args=(weakref.ref(self), self.wake, self.closed),
                    name=f"hexeract-heartbeat-{id(self):x}",
                    daemon=True,
                )
                self._thread.start()
        self.wake.set()
        return batch

    def handle(self, occ: LeasedOccurrence) -> DispatchHandle | None:
        """The handle of ``occ`` while its batch is in flight."""
        return self._handles.get(occ.message.schedule_id.int)

    def turn(
        self, inner: Callable[[LeasedOccurrence], DispatchResult | None]
    ) -> Callable[[LeasedOccurrence], DispatchResult | None]:
        """``inner`` judging each occurrence on its current lease."""
        get = self._handles.get
        return lambda occ: inner(
            occ if (h := get(occ.message.schedule_id.int)) is None else h.occurrence
        )

    def finish(
        self, batch: Sequence[LeasedOccurrence]
    ) -> tuple[list[LeasedOccurrence], Callable[[list[DispatchResult]], list[DispatchResult]]]:
        """End the handles of ``batch``: each occurrence with its last lease, and the judge
        of the results (a dispatch an abort was asked for is recorded as aborted)."""
        with self._lock:
            handles = [self._handles.pop(occ.message.schedule_id.int, None) for occ in batch]
        last = [occ if h is None else h.close() for occ, h in zip(batch, handles, strict=True)]

        def judge(results: list[DispatchResult]) -> list[DispatchResult]:
            return [_judged(h, r) for h, r in zip(handles, results, strict=True)]

        return last, judge

    def in_flight(self) -> list[DispatchHandle]:
        """The handles of the batch in flight."""
        with self._lock:
            return list(self._handles.values())

    def close(self) -> None:
        """End the watching thread (a later batch starts another)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self.closed.set()
            self.wake.set()

    def beat(self) -> None:
        """One heartbeat of every handle in flight."""
        for handle in self.in_flight():
            try:
                handle.heartbeat()
            except Exception as exc:  # the store: the next period tries again
                log.warning("heartbeat failed: %s", error_summary(error_text(exc)))

    def look_for_aborts(self) -> None:
        """Read the abort requests of the dispatch with the sink and pass them on."""
        handles = {
            h.occurrence.message.schedule_id: h
            for h in self.in_flight()
            if h.running and h.abort_requested is None
        }
        if not handles:
            return
        try:
            found = self._store.abort_requests(list(handles))
        except Exception as exc:  # the store: the next look tries again
            log.warning("reading abort requests failed: %s", error_summary(error_text(exc)))
            return
        for sid, how in found.items():
            if how in ABORT_KINDS:
                handles[sid].request_abort(how)

    def _told(self, handle: DispatchHandle, ok: bool) -> None:
        msg = handle.occurrence.message
        event = LeaseExtended(message=msg, leased_until=handle.lease) if ok else None
        call_hooks(self._hooks, [event if event is not None else HeartbeatLost(message=msg)])


def _judged(handle: DispatchHandle | None, result: DispatchResult) -> DispatchResult:
    if handle is None or not handle.started or result.kind not in _OVERRULED:
        return result
    how = handle.abort_requested
    if how is None:
        return result
    aborted = DispatchResult.failed(DispatchAborted(cancel=how == "cancel"))
    return aborted.took(result.duration or 0.0, result.began)


_OVERRULED = frozenset({ResultKind.SUCCEEDED, ResultKind.FAILED, ResultKind.SNOOZED})


def _watch_main(
    owner: weakref.ref[InFlight], wake: threading.Event, closed: threading.Event
) -> None:
    """The watching thread: heartbeats every ``period``, looks for aborts every ``poll``;
    ends once closed or once its worker is gone (holding no reference while it sleeps).

    Once a batch begins it keeps those deadlines, whichever batch is then in flight, and
    waits to be woken again only after a deadline with no batch begun since the one
    before: the first look at a batch comes at most ``poll`` after it began, its first
    heartbeat at most ``period``, and batches shorter than that never wake the thread.
    """
    beat_at = look_at = None
    seen = 0  # flight.tracked at the last look
    while not closed.is_set():
        flight = owner()
        if flight is None:
            return
        if flight.tracked == seen and not flight._handles:
            del flight
            beat_at = look_at = None
            wake.wait(_IDLE_WAIT_S)
            wake.clear()
            continue
        seen = flight.tracked
        now = time.monotonic()
        if look_at is None:  # a batch began: first looks one period from now
            look_at = now + flight.poll
            beat_at = None if flight.period is None else now + flight.period
        if now >= look_at:
            flight.look_for_aborts()
            look_at = now + flight.poll
        if beat_at is not None and now >= beat_at:
            flight.beat()
            beat_at = time.monotonic() + (flight.period or 0.0)
        due = look_at if beat_at is None else min(look_at, beat_at)
        del flight
        if closed.wait(max(due - time.monotonic(), 0.0)):
            return
