"""SchedulerWorker: claims due occurrences, dispatches them to a sink, settles them.

One poll cycle (:meth:`SchedulerWorker.run_once`), as the reference runs it:

1. ``store.dead_letter_exhausted()``: dead-letter what a crashed worker left on its
   last attempt.
2. ``store.claim_due(now, batch_size, lease)``: claim up to ``batch_size`` due
   occurrences; each claim spends one attempt and holds the occurrence until
   ``now + lease``.
3. Each claimed occurrence, in order:

   - its lease has already run out (earlier dispatches in the batch took that long):
     **skipped**, not dispatched; another worker may own it now;
   - the worker is stopping: not dispatched, **released** (step 4);
   - else it is dispatched to the sink under ``dispatch_timeout``.

4. The whole batch is settled in one ``store.settle(...)`` (one transaction), each
   item fenced by the claim's ``leased_until`` exactly as the single methods are:

   - success, delay trigger: ``delivered``;
   - success, cron trigger: ``reschedule`` to ``next_due(now, scheduled_for)``, the
     first cron instant after both (missed ticks collapse into one catch-up), or
     ``delivered`` when the expression has no further instant;
   - failure: :meth:`SchedulerWorker.on_failure`'s rule
     (:meth:`~SchedulerWorker.failure_settlement`): an exhausted occurrence
     (``attempts >= max_attempts``) is ``dead_lettered`` with the error, any other is
     ``failed`` with the retry delay of :meth:`SchedulerWorker.retry_delay`;
   - released: the claim's attempt given back, the lease cleared (claimable again at once).

   An item the store answers False for (another worker owns the occurrence now) is
   logged and counted as ``lease_lost``, never retried.

Delivery is at least once: a crash between a dispatch and the batch's settlement (or
a settlement that fails) records nothing of the batch, and every occurrence of it is
delivered again (same occurrence id) once its lease runs out.

Failures
--------
A sink that raises, does not return within ``dispatch_timeout``, or returns anything
but ``None`` (see :mod:`hexeract_lite.sinks`) is a failed dispatch, never a dead
worker. ``last_error`` records ``"<ExceptionType>: <message>"`` (just the type when the
message is empty), at most :data:`MAX_ERROR_CHARS` characters.

Sync and async sinks work with every way of running the worker.
:meth:`SchedulerWorker.run_once`, :meth:`~SchedulerWorker.run` and
:meth:`~SchedulerWorker.start` call ``dispatch`` on a helper thread; if it returns an
awaitable (an ``async def`` sink, or a sync one handing back a coroutine), that
awaitable is run to completion on a private event loop on the same thread, within the
same timeout. :meth:`~SchedulerWorker.run_async` awaits an async sink on the running
loop and calls a sync one on the helper thread, awaiting on the loop any awaitable it
returns.

A synchronous sink runs on a helper thread of the worker so that the worker can stop
waiting for it. Python cannot kill a thread: a sink still running at the timeout is
**abandoned**, it keeps running in the background until it returns on its own, and
the worker goes on with a fresh helper thread. A sink that hangs for ever therefore
leaks one thread each time; give such sinks their own timeouts. An async sink run by
:meth:`SchedulerWorker.run_async` is cancelled at the timeout instead.

Sync sinks are called one at a time, from the helper thread, which is handed a whole
batch at once (one thread hand-off per batch, not one per occurrence); each call still
has its own ``dispatch_timeout``, counted from the end of the call before it. After a
timeout the abandoned call may still be running while the next one starts on a fresh
thread, so a sink that can hang must tolerate that overlap.

Logging goes to the ``hexeract_lite.worker`` logger (schedule id, occurrence id,
attempt and lag in every record, also as ``extra`` fields); nothing is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import logging
import math
import queue
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol

import attrs

from .clock import SYSTEM_CLOCK, Clock
from .errors import InvalidConfiguration, StoreError
from .message import ScheduledMessage
from .sinks import CallableSink, ScheduleSink, _bad_return, _discard, is_async_sink
from .snapshot import LeasedOccurrence
from .store.base import ScheduleStore, Settlement, SettlementKind

__all__ = [
    "MAX_ERROR_CHARS",
    "CycleReport",
    "DispatchOutcome",
    "SchedulerWorker",
    "SchedulerWorkerConfig",
    "WorkerHandle",
    "error_text",
]

log = logging.getLogger("hexeract_lite.worker")

MAX_ERROR_CHARS = 4000
"""``last_error`` texts longer than this are cut (ending in ``…``) to keep rows small."""

STORE_ERROR_BACKOFF_MAX = timedelta(seconds=30)
"""The longest pause :meth:`SchedulerWorker.run` makes after repeated store errors."""

_STOP_CHECK_S = 0.1
"""An idle :meth:`SchedulerWorker.run` looks at its ``stop`` event at least this often."""

_FULL_CYCLE_EVERY_S = 5.0

_COMMIT_CHECKS_PER_POLL = 2
"""An idle worker on a ``data_version()`` store checks it this often per poll_interval,
so that another process's insert is noticed well within one poll_interval. The PRAGMA
itself costs 3 us; the thread's wake-up costs far more (about 0.1-0.25 ms of CPU each
on a 2-core VM): at the default 100 ms, 20 checks a second kept an idle worker near
0.5 % of a core, 40 a second near 0.7 %."""
"""With a ``data_version()`` store, an idle worker still runs a full cycle this often."""

_ZERO = timedelta(0)
_US = timedelta(microseconds=1)


# -- configuration -----------------------------------------------------------------------


def _fmt(value: timedelta) -> str:
    return f"{value.total_seconds():g} s"


def _duration(name: str, value: object, *, allow_zero: bool = False) -> timedelta:
    if not isinstance(value, timedelta):
        raise InvalidConfiguration(f"{name} must be a datetime.timedelta, got {name}={value!r}")
    if value < _ZERO or (value == _ZERO and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidConfiguration(f"{name} must be {bound}, got {name}={_fmt(value)}")
    return value


@attrs.frozen(kw_only=True)
class SchedulerWorkerConfig:
    """How a :class:`SchedulerWorker` polls, claims, times out and retries.

    Every duration is a :class:`datetime.timedelta`. Checked at construction; a bad
    value raises :class:`InvalidConfiguration` naming the field and the value:

    ==================  =========  ====================================================
    field               default    rule
    ==================  =========  ====================================================
    poll_interval       100 ms     > 0; the longest an idle worker sleeps between looks
    batch_size          10         int >= 1; occurrences claimed per cycle
    lease               300 s      > 0 and >= batch_size * dispatch_timeout
    retry_base_delay    1 s        > 0
    retry_max_delay     300 s      >= retry_base_delay
    jitter              True       bool; full jitter on retry delays
    min_cycle_delay     5 ms       >= 0; the pause after a cycle that claimed a full batch
    dispatch_timeout    30 s       > 0; how long one dispatch may take
    ==================  =========  ====================================================

    The lease must cover a whole batch dispatched back to back at the timeout, or
    the last occurrences of a slow batch would be skipped as expired.

    ``min_cycle_delay`` paces the drain of a backlog: a worker that keeps claiming
    full batches moves at most ``batch_size`` occurrences per ``min_cycle_delay``
    (2,000/s with the defaults); set it to 0 to drain as fast as the store allows.
    A cycle that claimed less than a full batch is followed by the idle sleep instead
    (see :meth:`SchedulerWorker.run`).
    """

    poll_interval: timedelta = timedelta(milliseconds=100)
    batch_size: int = 10
    lease: timedelta = timedelta(seconds=300)
    retry_base_delay: timedelta = timedelta(seconds=1)
    retry_max_delay: timedelta = timedelta(seconds=300)
    jitter: bool = True
    min_cycle_delay: timedelta = timedelta(milliseconds=5)
    dispatch_timeout: timedelta = timedelta(seconds=30)

    def __attrs_post_init__(self) -> None:
        _duration("poll_interval", self.poll_interval)
        batch = self.batch_size
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidConfiguration(
                f"batch_size must be an integer >= 1, got batch_size={batch!r}"
            )
        _duration("lease", self.lease)
        _duration("retry_base_delay", self.retry_base_delay)
        _duration("retry_max_delay", self.retry_max_delay)
        if not isinstance(self.jitter, bool):
            raise InvalidConfiguration(f"jitter must be True or False, got jitter={self.jitter!r}")
        _duration("min_cycle_delay", self.min_cycle_delay, allow_zero=True)
        _duration("dispatch_timeout", self.dispatch_timeout)
        if self.retry_max_delay < self.retry_base_delay:
            raise InvalidConfiguration(
                f"retry_max_delay must be >= retry_base_delay ({_fmt(self.retry_base_delay)}),"
                f" got retry_max_delay={_fmt(self.retry_max_delay)}"
            )
        needed = self.dispatch_timeout * batch
        if self.lease < needed:
            raise InvalidConfiguration(
                f"lease must be >= batch_size * dispatch_timeout ({batch} *"
                f" {_fmt(self.dispatch_timeout)} = {_fmt(needed)}), so that a whole batch"
                f" can be dispatched within one lease; got lease={_fmt(self.lease)}"
            )


# -- what a cycle did --------------------------------------------------------------------


class DispatchOutcome(enum.StrEnum):
    """What became of one claimed occurrence."""

    DELIVERED = "delivered"
    """Dispatched; a delay trigger (or a cron with no further instant) marked delivered."""
    RESCHEDULED = "rescheduled"
    """Dispatched; a cron schedule moved to its next instant."""
    RETRIED = "retried"
    """The dispatch failed; the occurrence waits out its retry delay."""
    DEAD_LETTERED = "dead_lettered"
    """The dispatch failed on the last attempt; the schedule is dead-lettered."""
    LEASE_LOST = "lease_lost"
    """The acknowledgement was fenced out: another worker owns the occurrence now."""
    SKIPPED = "skipped"
    """Its lease had expired before its turn in the batch; not dispatched."""
    RELEASED = "released"
    """The worker was stopping; not dispatched, handed back to the store."""


@attrs.frozen(kw_only=True)
class CycleReport:
    """The counts of one poll cycle.

    ``claimed`` = ``delivered + rescheduled + retried + dead_lettered + lease_lost +
    skipped + released``; ``swept`` counts rows the opening sweep dead-lettered.
    """

    swept: int = 0
    claimed: int = 0
    delivered: int = 0
    rescheduled: int = 0
    retried: int = 0
    dead_lettered: int = 0
    lease_lost: int = 0
    skipped: int = 0
    released: int = 0


class _Counts:
    __slots__ = ("claimed", "outcomes", "swept")

    def __init__(self) -> None:
        self.swept = 0
        self.claimed = 0
        self.outcomes: dict[DispatchOutcome, int] = dict.fromkeys(DispatchOutcome, 0)

    def add(self, outcome: DispatchOutcome) -> None:
        self.outcomes[outcome] += 1

    def report(self) -> CycleReport:
        o = self.outcomes
        return CycleReport(
            swept=self.swept,
            claimed=self.claimed,
            delivered=o[DispatchOutcome.DELIVERED],
            rescheduled=o[DispatchOutcome.RESCHEDULED],
            retried=o[DispatchOutcome.RETRIED],
            dead_lettered=o[DispatchOutcome.DEAD_LETTERED],
            lease_lost=o[DispatchOutcome.LEASE_LOST],
            skipped=o[DispatchOutcome.SKIPPED],
            released=o[DispatchOutcome.RELEASED],
        )


def error_text(error: BaseException | str) -> str:
    """The ``last_error`` text of a failure: ``"<ExceptionType>: <message>"``.

    Just the type name when the message is empty; cut to :data:`MAX_ERROR_CHARS`.
    """
    if isinstance(error, BaseException):
        detail = str(error)
        text = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    else:
        text = str(error)
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return text


class _RandomSource(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


# -- the helper thread that runs synchronous sinks ---------------------------------------

_PENDING, _COMPLETED, _ABANDONED = 0, 1, 2


class _Job:
    """One sink call handed to a dispatcher thread; the caller waits with a timeout."""

    __slots__ = ("_done", "_fn", "_on_done", "_state", "_state_lock", "error", "result")

    def __init__(self, fn: Callable[[], object], on_done: Callable[[], None] | None = None):
        self._fn = fn
        self._on_done = on_done
        self._done = threading.Lock()
        self._done.acquire()
        self._state_lock = threading.Lock()
        self._state = _PENDING
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = self._fn()
        except BaseException as exc:  # a sink's SystemExit is a failed dispatch too
            error = exc
        with self._state_lock:
            if self._state == _ABANDONED:
                _discard(result)
                return
            self.result, self.error = result, error
            self._state = _COMPLETED
        self._done.release()
        if self._on_done is not None:
            self._on_done()

    def wait(self, timeout: float) -> bool:
        """True when the call finished within ``timeout`` seconds (measured, not frozen)."""
        if self._done.acquire(timeout=min(timeout, threading.TIMEOUT_MAX)):
            return True
        return not self.abandon()

    def abandon(self) -> bool:
        """Give up on the call unless it already finished; True when abandoned."""
        with self._state_lock:
            if self._state == _COMPLETED:
                return False
            self._state = _ABANDONED
            return True


class _Marker(enum.Enum):
    NOT_RUN = "not run"
    """A batch item left undispatched because the worker is stopping (to be released)."""
    SKIPPED = "skipped"
    """A batch item whose lease had run out before its turn: not dispatched."""


_NOT_RUN = _Marker.NOT_RUN
_SKIPPED = _Marker.SKIPPED


class _BatchRun:
    """A whole batch of sink calls handed to a dispatcher thread at once.

    One hand-off per batch instead of one per occurrence: the dispatcher thread runs
    the calls in order and the worker thread sleeps until all are done. Each call
    still has its own ``dispatch_timeout``, counted from the moment the call before it
    ended (from the hand-off for the first): :meth:`wait` wakes when the call in
    flight would run out, and gives up on it (and on the rest of this run) only if
    that very call has not finished by then.

    Before each call the dispatcher thread checks ``stop`` (set: this item and every
    later one are :data:`_NOT_RUN`) and the item's lease (run out: :data:`_SKIPPED`).
    ``results`` gets one entry per finished item: None (delivered), the exception (a
    failed dispatch), or one of those two markers. It holds no reference to the
    worker, so a run left behind by a hung sink does not keep the worker alive.
    """

    __slots__ = (
        "_abandoned",
        "_clock",
        "_done",
        "_items",
        "_lock",
        "_sink",
        "_started",
        "_stop",
        "results",
    )

    def __init__(
        self,
        sink: ScheduleSink,
        clock: Clock,
        items: list[LeasedOccurrence],
        stop: threading.Event | None,
    ) -> None:
        self._sink = sink
        self._clock = clock
        self._items = items
        self._stop = stop
        self._lock = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()
        self._abandoned = False
        self._started = time.monotonic()
        self.results: list[object] = []

    def run(self) -> None:
        """On the dispatcher thread: every item, in order, unless abandoned."""
        sink, clock, stop, lock = self._sink, self._clock, self._stop, self._lock
        results = self.results
        stopping = False
        for occ in self._items:
            outcome: object
            if stopping or (stop is not None and stop.is_set()):
                stopping = True
                outcome = _NOT_RUN
            else:
                try:
                    if _lease_expired(clock, occ):
                        outcome = _SKIPPED
                    else:
                        _call_blocking(sink, occ.message)
                        outcome = None
                except BaseException as exc:  # a sink's SystemExit is a failed dispatch too
                    outcome = exc
            with lock:
                if self._abandoned:
                    return  # the worker gave up on this call and took the rest elsewhere
                results.append(outcome)
                self._started = time.monotonic()
        self._done.release()

    def wait(self, timeout: float) -> bool:
        """Block until every item finished (True), or until one call ran past
        ``timeout`` seconds (False: that call and the rest of the run are abandoned;
        ``results`` holds the items finished before it)."""
        try:
            while True:
                with self._lock:
                    finished, started = len(self.results), self._started
                remaining = started + timeout - time.monotonic()
                if remaining > 0 and self._done.acquire(
                    timeout=min(remaining, threading.TIMEOUT_MAX)
                ):
                    return True
                with self._lock:
                    if len(self.results) == len(self._items):
                        return True
                    if len(self.results) == finished and time.monotonic() >= started + timeout:
                        self._abandoned = True
                        return False
                # another call finished meanwhile: wait on for the one now in flight
        except BaseException:
            with self._lock:
                self._abandoned = True  # interrupted: the helper stops after its call
            raise


def _dispatcher_main(jobs: queue.SimpleQueue[_Job | _BatchRun | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        job.run()
        del job


class _Dispatcher:
    """A daemon thread running sink calls one at a time."""

    def __init__(self, owner: object, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | _BatchRun | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=_dispatcher_main, args=(self._jobs,), name=name, daemon=True
        )
        self.thread.start()
        # When the worker goes away the thread ends too (the finalizer holds no worker).
        self._close = weakref.finalize(owner, self._jobs.put, None)

    def submit(self, job: _Job | _BatchRun) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        """End the thread once its current call (if any) returns."""
        self._close()


_OUTCOMES = {
    SettlementKind.DELIVERED: DispatchOutcome.DELIVERED,
    SettlementKind.RESCHEDULE: DispatchOutcome.RESCHEDULED,
    SettlementKind.FAILED: DispatchOutcome.RETRIED,
    SettlementKind.DEAD_LETTERED: DispatchOutcome.DEAD_LETTERED,
}
"""What a recorded settlement of a dispatched occurrence counts as."""

_EXTRA = ("schedule_id", "occurrence_id", "attempt", "lag")


def _log_occurrence(
    clock: Clock, level: int, template: str, occ: LeasedOccurrence, **fields: object
) -> None:
    """Log about one occurrence: ids, attempt and lag in the text and as ``extra``. The
    occurrence id (a SHA-1) is only derived when the level is enabled."""
    if not log.isEnabledFor(level):
        return
    msg = occ.message
    lag = (clock.now() - msg.scheduled_for).total_seconds()
    data: dict[str, object] = {
        "schedule_id": str(msg.schedule_id),
        "occurrence_id": str(msg.occurrence_id()),
        "attempt": occ.attempts,
        "max_attempts": occ.max_attempts,
        "lag": lag,
        "event_type": msg.event_type,
        **fields,
    }
    text = template % data if "%(" in template else template
    log.log(
        level,
        "schedule %s occurrence %s attempt %d lag %.3fs: %s",
        data["schedule_id"],
        data["occurrence_id"],
        occ.attempts,
        lag,
        text,
        extra={k: data[k] for k in _EXTRA},
    )


def _lease_expired(clock: Clock, occ: LeasedOccurrence) -> bool:
    """At an occurrence's turn in its batch: has its lease run out (skip it)?"""
    if occ.leased_until > clock.now():
        _log_occurrence(
            clock, logging.DEBUG, "dispatching attempt %(attempt)d/%(max_attempts)d", occ
        )
        return False
    _log_occurrence(
        clock,
        logging.WARNING,
        "skipped: its lease ran out at %(leased_until)s before its turn in the batch",
        occ,
        leased_until=occ.leased_until.isoformat(),
    )
    return True


def _warn_left_to_expiry(left: int) -> None:
    """A cycle broke off (a store error while settling): the rest waits out its lease."""
    if left:
        log.warning("%d claimed occurrence(s) left to lease expiry", left)


async def _await_value(value: Awaitable[object]) -> object:
    return await value


def _call_blocking(sink: ScheduleSink, message: ScheduledMessage) -> None:
    """Run on a dispatcher thread by the synchronous worker: dispatch, await if need be."""
    result: object = sink.dispatch(message)
    if result is not None and inspect.isawaitable(result):
        # A coroutine from a sync run: run it to completion here, on a private loop.
        result = asyncio.run(_await_value(result))
    if result is not None:
        raise _bad_return("sink", sink, result)


def _call_raw(sink: ScheduleSink, message: ScheduledMessage) -> object:
    """Run on a dispatcher thread by the asyncio worker; an awaitable goes back to the loop."""
    return sink.dispatch(message)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _notify_loop(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(_resolve, fut)


# -- the idle sleep ----------------------------------------------------------------------


class _IdlePlan:
    """When an idle worker should look again; shared by the thread and asyncio loops.

    After an empty cycle the worker sleeps until the store's ``next_wakeup()`` hint,
    at most ``poll_interval`` at a time, and wakes early on ``store.changes``. A store
    with ``data_version()`` (SQLite) lets it notice other processes' commits with a
    cheap check, made :data:`_COMMIT_CHECKS_PER_POLL` times per ``poll_interval`` (so a
    commit is seen within half of it), and it only runs a full cycle when
    something changed, the hint is reached, or :data:`_FULL_CYCLE_EVERY_S` passed. Any
    other store gets a full cycle every ``poll_interval``.
    """

    __slots__ = ("_clock", "_hint", "_poll", "_started", "_tracks_commits")

    def __init__(
        self, clock: Clock, hint: datetime | None, poll: float, tracks_commits: bool
    ) -> None:
        self._clock = clock
        self._hint = hint
        self._poll = poll
        self._tracks_commits = tracks_commits
        self._started = time.monotonic()

    def next_timeout(self, cap: float) -> float | None:
        """Seconds to wait before the next look, or None: run a cycle now."""
        step = self._poll / _COMMIT_CHECKS_PER_POLL if self._tracks_commits else self._poll
        timeout = min(step, cap)
        if self._hint is not None:
            until_hint = (self._hint - self._clock.now()).total_seconds()
            if until_hint <= 0:
                return None
            timeout = min(timeout, until_hint)
        elapsed = time.monotonic() - self._started
        budget = _FULL_CYCLE_EVERY_S if self._tracks_commits else self._poll
        if elapsed >= budget:
            return None
        return max(min(timeout, budget - elapsed), 0.0)


# -- the worker --------------------------------------------------------------------------


class SchedulerWorker:
    """Runs the poll cycle of the reference against a store, dispatching to a sink.

    ``SchedulerWorker(store, sink, config=SchedulerWorkerConfig(), *, clock=SYSTEM_CLOCK,
    rng=None)``

    - ``store``: any :class:`~hexeract_lite.store.ScheduleStore`.
    - ``sink``: a :class:`~hexeract_lite.sinks.ScheduleSink`, or a plain function /
      coroutine function taking the message (wrapped in :class:`CallableSink`).
    - ``clock``: where "now" comes from for claims, lease checks and cron instants.
    - ``rng``: the random source of the retry jitter, anything with
      ``uniform(a, b)`` (default: a fresh :class:`random.Random`); pass a seeded one
      for reproducible delays.

    Drive it with :meth:`run_once` (one cycle, deterministic: what tests use),
    :meth:`run` (a loop in the calling thread), :meth:`start` (that loop on a daemon
    thread) or :meth:`run_async` (the loop as an asyncio task). A worker runs one loop
    at a time; for parallelism start several workers (on one store or several
    processes): claims never overlap.
    """

    def __init__(
        self,
        store: ScheduleStore,
        sink: ScheduleSink | Callable[[ScheduledMessage], Any],
        config: SchedulerWorkerConfig = SchedulerWorkerConfig(),
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: _RandomSource | None = None,
    ) -> None:
        if not isinstance(config, SchedulerWorkerConfig):
            raise InvalidConfiguration(
                f"config must be a SchedulerWorkerConfig, got config={config!r}"
            )
        if not isinstance(store, ScheduleStore):
            raise InvalidConfiguration(f"store must be a ScheduleStore, got store={store!r}")
        if not callable(getattr(sink, "dispatch", None)):
            if not callable(sink):
                raise InvalidConfiguration(
                    f"sink must have a dispatch(message) method or be callable, got {sink!r}"
                )
            sink = CallableSink(sink)
        if rng is not None and not callable(getattr(rng, "uniform", None)):
            raise InvalidConfiguration(f"rng must have a uniform(a, b) method, got rng={rng!r}")
        self.store = store
        self.sink: ScheduleSink = sink  # type: ignore[assignment]
        self.config = config
        self.clock = clock
        self._rng: _RandomSource = rng if rng is not None else random.Random()
        self._sink_is_async = is_async_sink(self.sink)
        data_version = getattr(store, "data_version", None)
        self._data_version: Callable[[], int] | None = (
            data_version if callable(data_version) else None
        )
        self._dispatch_timeout_s = config.dispatch_timeout.total_seconds()
        self._poll_s = config.poll_interval.total_seconds()
        self._running = threading.Lock()
        self._dispatcher_lock = threading.Lock()
        self._dispatcher: _Dispatcher | None = None

    def __repr__(self) -> str:
        return f"SchedulerWorker({self.store!r}, {self.sink!r})"

    # -- the retry policy ----------------------------------------------------------------

    def retry_delay(self, attempts: int) -> timedelta:
        """The wait before retrying an occurrence that failed with ``attempts`` consumed.

        ``capped = min(retry_base_delay * 2**attempts, retry_max_delay)``; with
        ``jitter`` on, a uniform draw from ``[0, capped]`` (full jitter), else
        ``capped``. ``attempts`` includes the failed one, so the first failure waits
        up to ``2 * retry_base_delay``.
        """
        cfg = self.config
        base_us = cfg.retry_base_delay // _US
        max_us = cfg.retry_max_delay // _US
        exponent = min(max(int(attempts), 0), 128)  # base * 2**128 is past any cap
        capped_us = min(base_us << exponent, max_us)
        if not cfg.jitter:
            return timedelta(microseconds=capped_us)
        drawn = self._rng.uniform(0.0, capped_us / 1e6)
        return timedelta(seconds=min(max(drawn, 0.0), capped_us / 1e6))

    def failure_settlement(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> Settlement:
        """What a failed dispatch of ``occurrence`` records (:meth:`on_failure`'s rule).

        Exhausted (``attempts >= max_attempts``): a ``dead_lettered`` settlement with
        the error text. Otherwise ``failed`` with :meth:`retry_delay` (drawn here, so
        with jitter each call draws anew): the occurrence is claimable again once the
        delay passes; its attempt counter, advanced at claim time, is left as it is.
        """
        msg = occurrence.message
        text = error_text(error)
        if occurrence.attempts >= occurrence.max_attempts:
            return Settlement.dead_lettered(msg.schedule_id, text, occurrence.leased_until)
        delay = self.retry_delay(occurrence.attempts)
        return Settlement.failed(msg.schedule_id, delay, text, occurrence.leased_until)

    def on_failure(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> DispatchOutcome:
        """Settle a failed dispatch of ``occurrence``, on its own.

        Exhausted (``attempts >= max_attempts``): ``mark_dead_lettered`` with the
        error text. Otherwise ``mark_failed`` with :meth:`retry_delay`: the occurrence
        is claimable again once the delay passes; its attempt counter, advanced at
        claim time, is left as it is. Returns the outcome (``LEASE_LOST`` when the
        store fenced the acknowledgement out). The worker's cycle computes the same
        settlement (:meth:`failure_settlement`) and records it with the rest of its
        batch, in one :meth:`~hexeract_lite.store.ScheduleStore.settle`.
        """
        settlement = self.failure_settlement(occurrence, error)
        [ok] = self.store.settle([settlement])
        return self._settled(occurrence, settlement, _OUTCOMES[settlement.kind], ok)

    # -- one cycle, synchronous ----------------------------------------------------------

    def run_once(self) -> CycleReport:
        """Run exactly one poll cycle (see the module docstring) and report its counts.

        Store errors propagate (nothing is retried here); :meth:`run` is the loop that
        backs off and carries on.
        """
        return self._cycle(None)

    def _cycle(self, stop: threading.Event | None) -> CycleReport:
        counts = _Counts()
        batch = self._sweep_and_claim(counts)
        if batch:
            try:
                results = self._dispatch_batch(batch, stop)
            except BaseException:
                _warn_left_to_expiry(len(batch))
                raise
            self._settle_batch(batch, results, counts)
        return counts.report()

    def _sweep_and_claim(self, counts: _Counts) -> list[LeasedOccurrence]:
        """Steps 1 and 2 of the cycle: the sweep, then the claim."""
        counts.swept = self.store.dead_letter_exhausted()
        if counts.swept:
            log.warning("sweep dead-lettered %d occurrence(s) left exhausted", counts.swept)
        cfg = self.config
        batch = self.store.claim_due(self.clock.now(), cfg.batch_size, cfg.lease)
        counts.claimed = len(batch)
        return batch

    def _dispatch_batch(
        self, batch: list[LeasedOccurrence], stop: threading.Event | None
    ) -> list[object]:
        """Dispatch a claimed batch on the helper thread, one hand-off per batch (see
        :class:`_BatchRun`); one result per occurrence. A call that times out is a
        failed dispatch (:class:`TimeoutError`); its thread is abandoned and the rest
        of the batch goes on on a fresh one."""
        results: list[object] = []
        while len(results) < len(batch):
            run = _BatchRun(self.sink, self.clock, batch[len(results) :], stop)
            self._get_dispatcher().submit(run)
            finished = run.wait(self._dispatch_timeout_s)
            results += run.results
            if finished:
                break
            results.append(self._timed_out())
        return results

    def _timed_out(self) -> TimeoutError:
        with self._dispatcher_lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()
            log.warning(
                "a sink did not return within dispatch_timeout (%g s); its thread %r is"
                " abandoned and keeps running until the sink returns",
                self._dispatch_timeout_s,
                dispatcher.thread.name,
            )
        return TimeoutError(
            f"the sink did not return within dispatch_timeout ({self._dispatch_timeout_s:g} s)"
        )

    def _get_dispatcher(self) -> _Dispatcher:
        with self._dispatcher_lock:
            if self._dispatcher is None:
                self._dispatcher = _Dispatcher(self, f"hexeract-sink-{id(self):x}")
            return self._dispatcher

    def _close_dispatcher(self) -> None:
        with self._dispatcher_lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()

    # -- settling a batch ----------------------------------------------------------------

    def _settle_batch(
        self, batch: list[LeasedOccurrence], results: list[object], counts: _Counts
    ) -> None:
        """Step 4: every dispatched (or released) occurrence of the batch settled in one
        :meth:`~hexeract_lite.store.ScheduleStore.settle`, fenced item by item.

        - delivered, delay trigger (or a cron with no further instant):
          ``delivered``; cron: ``reschedule`` to ``next_due(now, scheduled_for)``;
        - failed: :meth:`failure_settlement` (``failed`` with the retry delay, or
          ``dead_lettered`` when exhausted);
        - not dispatched because the worker is stopping: **released**
          (:meth:`Settlement.released`, fenced): the claim's attempt is given back and
          the lease cleared, so it is claimable again at once, under the same
          occurrence id, with its budget and last error as before the claim. (Leaving
          it to lease expiry instead would delay it by the whole lease and, on its last
          attempt, let the sweep dead-letter a message never dispatched.)
        - skipped (lease ran out before its turn): nothing to record.

        A False from the store is ``lease_lost`` (another worker owns the occurrence
        now). If the store raises, nothing of the batch was recorded: every occurrence
        waits out its lease and is delivered again (at-least-once).
        """
        now = self.clock.now()
        planned: list[tuple[LeasedOccurrence, Settlement, DispatchOutcome]] = []
        for occ, result in zip(batch, results, strict=True):
            if result is None:
                settlement = self._success_settlement(occ, now)
                outcome = _OUTCOMES[settlement.kind]
            elif result is _SKIPPED:
                counts.add(DispatchOutcome.SKIPPED)
                continue
            elif result is _NOT_RUN:
                settlement = Settlement.released(occ.message.schedule_id, occ.leased_until)
                outcome = DispatchOutcome.RELEASED
            else:
                assert isinstance(result, BaseException)
                settlement = self.failure_settlement(occ, result)
                outcome = _OUTCOMES[settlement.kind]
            planned.append((occ, settlement, outcome))
        if not planned:
            return
        try:
            oks = self.store.settle([settlement for _, settlement, _ in planned])
        except BaseException:
            _warn_left_to_expiry(len(planned))
            raise
        for (occ, settlement, outcome), ok in zip(planned, oks, strict=True):
            counts.add(self._settled(occ, settlement, outcome, ok))

    def _success_settlement(self, occ: LeasedOccurrence, now: datetime) -> Settlement:
        msg = occ.message
        expr = msg.trigger.cron_expression
        nxt = None if expr is None else expr.next_due(now, msg.scheduled_for)
        if nxt is None:
            return Settlement.delivered(msg.schedule_id, occ.leased_until)
        return Settlement.reschedule(msg.schedule_id, nxt, occ.leased_until)

    def _settled(
        self, occ: LeasedOccurrence, settlement: Settlement, outcome: DispatchOutcome, ok: bool
    ) -> DispatchOutcome:
        """Log one recorded settlement and return its outcome (``LEASE_LOST`` when the
        store fenced it out)."""
        if not ok:
            return self._lease_lost(occ, outcome)
        if outcome is DispatchOutcome.DELIVERED or outcome is DispatchOutcome.RESCHEDULED:
            if log.isEnabledFor(logging.DEBUG):
                note = "" if settlement.next is None else f", next at {settlement.next.isoformat()}"
                self._log(logging.DEBUG, f"{outcome.value}{note}", occ)
        elif outcome is DispatchOutcome.RETRIED:
            assert settlement.retry_in is not None
            self._log(
                logging.WARNING,
                "dispatch failed (attempt %(attempt)d/%(max_attempts)d), retrying in"
                " %(retry_in).3f s: %(error)s",
                occ,
                error=settlement.error,
                retry_in=settlement.retry_in.total_seconds(),
            )
        elif outcome is DispatchOutcome.DEAD_LETTERED:
            self._log(
                logging.ERROR,
                "dead-lettered after %(attempt)d/%(max_attempts)d attempts: %(error)s",
                occ,
                error=settlement.error,
            )
        else:
            self._log(logging.INFO, "released undispatched: the worker is stopping", occ)
        return outcome

    def _lease_lost(self, occ: LeasedOccurrence, wanted: DispatchOutcome) -> DispatchOutcome:
        self._log(
            logging.WARNING,
            "lease lost: could not record %(wanted)s; another worker owns the occurrence now",
            occ,
            wanted=wanted.value,
        )
        return DispatchOutcome.LEASE_LOST

    def _log(self, level: int, template: str, occ: LeasedOccurrence, **fields: object) -> None:
        _log_occurrence(self.clock, level, template, occ, **fields)

    # -- the thread loop -----------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Poll until ``stop`` is set (forever without one), in the calling thread.

        After a cycle that claimed a full batch (more is probably waiting) it pauses
        ``min_cycle_delay`` and goes again. After any other cycle the backlog is
        drained, so it sleeps until the store's next due instant, at most
        ``poll_interval`` at a time, waking at once when this process changes the store
        (``store.changes``, including changes made while the cycle ran) and, with a
        store that has ``data_version()`` (SQLite), noticing other processes' commits
        within half of ``poll_interval``. (The reference pauses after every cycle
        that claimed something; skipping the pause after a partial batch is what lets an
        occurrence inserted right after a delivery be dispatched within a millisecond or
        two, instead of after ``min_cycle_delay``.) A store error is logged and backed off
        (``poll_interval`` doubling per consecutive error, at most
        :data:`STORE_ERROR_BACKOFF_MAX`), and the loop goes on.

        Stopping: ``stop`` is checked between occurrences. The occurrence in hand is
        finished first (a hung synchronous sink holds the stop for up to
        ``dispatch_timeout``); the rest of the batch is not dispatched but released
        (rescheduled to its due instant, claimable at once), in the same settlement as
        what was dispatched (see :meth:`_settle_batch`).
        """
        stop = stop if stop is not None else threading.Event()
        if not self._running.acquire(blocking=False):
            raise RuntimeError(f"{self!r} is already running; start another worker instead")
        try:
            self._loop(stop)
        finally:
            self._close_dispatcher()
            self._running.release()

    def _loop(self, stop: threading.Event) -> None:
        changes = getattr(self.store, "changes", None)
        failures = 0
        hint_overdue = 0
        while not stop.is_set():
            version = changes.version() if changes is not None else 0
            data_version = self._read_data_version()
            try:
                report = self._cycle(stop)
                if failures:
                    log.info("the store answers again after %d error(s)", failures)
                    failures = 0
                if report.claimed >= self.config.batch_size:
                    if self.config.min_cycle_delay > _ZERO:
                        stop.wait(self.config.min_cycle_delay.total_seconds())
                    continue
                hint = self._next_wakeup()
                hint, hint_overdue = self._check_hint(hint, hint_overdue, report)
                plan = _IdlePlan(self.clock, hint, self._poll_s, self._data_version is not None)
                while not stop.is_set():
                    timeout = plan.next_timeout(_STOP_CHECK_S)
                    if timeout is None:
                        break
                    if changes is not None:
                        if changes.wait(version, timeout):
                            break
                    elif stop.wait(timeout):
                        break
                    if self._data_version is not None and self._read_data_version() != (
                        data_version
                    ):
                        break
            except Exception as exc:
                failures += 1
                delay = self._error_backoff(failures)
                self._log_loop_error(exc, failures, delay)
                stop.wait(delay)

    def _check_hint(
        self, hint: datetime | None, overdue: int, report: CycleReport
    ) -> tuple[datetime | None, int]:
        """Guard against a hint that stays in the past after empty cycles (a spin).

        A past hint after an empty cycle means the store says work is due but hands
        none out; twice in a row, the hint is ignored and the worker polls instead.
        """
        if hint is None or hint > self.clock.now() or report.claimed:
            return hint, 0
        overdue += 1
        return (None, overdue) if overdue >= 2 else (hint, overdue)

    def _next_wakeup(self) -> datetime | None:
        next_wakeup = getattr(self.store, "next_wakeup", None)
        return next_wakeup() if callable(next_wakeup) else None

    def _read_data_version(self) -> int | None:
        if self._data_version is None:
            return None
        try:
            return int(self._data_version())
        except Exception:  # unknown: the next comparison differs and a cycle runs
            return None

    def _error_backoff(self, failures: int) -> float:
        cap = max(STORE_ERROR_BACKOFF_MAX.total_seconds(), self._poll_s)
        return min(self._poll_s * 2.0 ** min(failures - 1, 30), cap)

    def _log_loop_error(self, exc: Exception, failures: int, delay: float) -> None:
        if isinstance(exc, StoreError):
            log.warning(
                "store error (%d in a row), next try in %.2f s: %s",
                failures,
                delay,
                error_text(exc),
                exc_info=exc,
            )
        else:
            log.error(
                "unexpected error in the poll loop (%d in a row), next try in %.2f s",
                failures,
                delay,
                exc_info=exc,
            )

    def start(self, *, name: str = "hexeract-worker") -> WorkerHandle:
        """Run :meth:`run` on a new daemon thread; the handle stops it.

        ``with worker.start(): ...`` stops it (and waits for it) on leaving the block.
        """
        if self._running.locked():
            raise RuntimeError(f"{self!r} is already running; start another worker instead")
        stop = threading.Event()
        thread = threading.Thread(target=self.run, args=(stop,), name=name, daemon=True)
        handle = WorkerHandle(self, thread, stop)
        thread.start()
        return handle

    # -- asyncio -------------------------------------------------------------------------

    async def run_async(self, stop: asyncio.Event | None = None) -> None:
        """The :meth:`run` loop as a coroutine, for asyncio applications.

        Store calls run off the event loop (``asyncio.to_thread``). An async sink is
        awaited on the loop under ``dispatch_timeout`` (cancelled when it runs out); a
        synchronous sink runs on the worker's helper thread as in :meth:`run`, and an
        awaitable it returns is awaited on the loop within the same timeout.

        Stop it by setting ``stop``, or by cancelling the task: either way the
        occurrence in hand is finished and settled and the rest of the batch released
        before it returns (a cancellation is then re-raised).
        """
        stop = stop if stop is not None else asyncio.Event()
        if not self._running.acquire(blocking=False):
            raise RuntimeError(f"{self!r} is already running; start another worker instead")
        try:
            await self._loop_async(stop)
        finally:
            self._close_dispatcher()
            self._running.release()

    async def _loop_async(self, stop: asyncio.Event) -> None:
        changes = getattr(self.store, "changes", None)
        failures = 0
        hint_overdue = 0
        while not stop.is_set():
            version = changes.version() if changes is not None else 0
            data_version = await asyncio.to_thread(self._read_data_version)
            try:
                report = await self._cycle_to_the_end(stop)
                if failures:
                    log.info("the store answers again after %d error(s)", failures)
                    failures = 0
                if report.claimed >= self.config.batch_size:
                    if self.config.min_cycle_delay > _ZERO:
                        await _wait_event(stop, self.config.min_cycle_delay.total_seconds())
                    continue
                hint = await asyncio.to_thread(self._next_wakeup)
                hint, hint_overdue = self._check_hint(hint, hint_overdue, report)
                plan = _IdlePlan(self.clock, hint, self._poll_s, self._data_version is not None)
                while not stop.is_set():
                    timeout = plan.next_timeout(math.inf)
                    if timeout is None:
                        break
                    if await self._wait_change_or_stop(stop, version, timeout):
                        break
                    if self._data_version is not None and (
                        await asyncio.to_thread(self._read_data_version) != data_version
                    ):
                        break
            except Exception as exc:
                failures += 1
                delay = self._error_backoff(failures)
                self._log_loop_error(exc, failures, delay)
                await _wait_event(stop, delay)

    async def _cycle_to_the_end(self, stop: asyncio.Event) -> CycleReport:
        """One cycle that, once it has claimed, finishes even if we are cancelled."""
        halted = False

        def should_stop() -> bool:
            return halted or stop.is_set()

        cycle = asyncio.ensure_future(self._cycle_async(should_stop))
        try:
            return await asyncio.shield(cycle)
        except asyncio.CancelledError:
            halted = True
            while not cycle.done():
                try:
                    await asyncio.shield(cycle)
                except asyncio.CancelledError:
                    continue
                except Exception:
                    break
            if not cycle.cancelled() and cycle.exception() is not None:
                log.warning("cycle interrupted by cancellation failed", exc_info=cycle.exception())
            raise

    async def _cycle_async(self, should_stop: Callable[[], bool]) -> CycleReport:
        counts = _Counts()
        batch = await asyncio.to_thread(self._sweep_and_claim, counts)
        if not batch:
            return counts.report()
        results: list[object] = []
        try:
            for occ in batch:
                if should_stop():
                    results.append(_NOT_RUN)  # released with the batch's settlement
                elif _lease_expired(self.clock, occ):
                    results.append(_SKIPPED)
                else:
                    results.append(await self._dispatch_async(occ.message))
        except BaseException:
            _warn_left_to_expiry(len(batch))
            raise
        await asyncio.to_thread(self._settle_batch, batch, results, counts)
        return counts.report()

    async def _dispatch_async(self, message: ScheduledMessage) -> BaseException | None:
        loop = asyncio.get_running_loop()
        timeout = min(self._dispatch_timeout_s, threading.TIMEOUT_MAX)
        deadline = loop.time() + timeout
        try:
            if self._sink_is_async:
                result: object = self.sink.dispatch(message)
            else:
                error, result = await self._call_in_thread(loop, message, timeout)
                if error is not None:
                    return error
            if result is not None and inspect.isawaitable(result):
                try:
                    async with asyncio.timeout_at(deadline) as budget:
                        result = await result
                except TimeoutError:
                    if budget.expired():
                        return self._async_timeout()
                    raise
            if result is not None:
                raise _bad_return("sink", self.sink, result)
        except Exception as exc:
            return exc
        return None

    async def _call_in_thread(
        self, loop: asyncio.AbstractEventLoop, message: ScheduledMessage, timeout: float
    ) -> tuple[BaseException | None, object]:
        """Run a sync sink on the helper thread: ``(error or timeout, None)`` or
        ``(None, what dispatch returned)``."""
        fut: asyncio.Future[None] = loop.create_future()
        job = _Job(
            functools.partial(_call_raw, self.sink, message),
            on_done=functools.partial(_notify_loop, loop, fut),
        )
        self._get_dispatcher().submit(job)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            if job.abandon():
                return self._timed_out(), None
        except asyncio.CancelledError:
            job.abandon()  # only when the cycle task itself is cancelled (run_async shields it)
            raise
        if job.error is not None:
            return job.error, None
        return None, job.result

    def _async_timeout(self) -> TimeoutError:
        log.warning(
            "an async sink did not finish within dispatch_timeout (%g s); it was cancelled",
            self._dispatch_timeout_s,
        )
        return TimeoutError(
            f"the sink did not return within dispatch_timeout ({self._dispatch_timeout_s:g} s)"
        )

    async def _wait_change_or_stop(self, stop: asyncio.Event, version: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for a store change (True) or ``stop`` (False)."""
        changes = getattr(self.store, "changes", None)
        if changes is None:
            await _wait_event(stop, timeout)
            return False
        waiter = asyncio.ensure_future(asyncio.to_thread(changes.wait, version, timeout))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not waiter.done():
                changes.notify()  # let the helper thread go now; a spurious wake is harmless
        return waiter.done() and not waiter.cancelled() and waiter.result() is True


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)


class WorkerHandle:
    """A worker running on a daemon thread (from :meth:`SchedulerWorker.start`).

    ``stop(timeout=None)`` asks it to stop and waits; ``is_alive`` tells whether the
    thread still runs; as a context manager it stops the worker on exit.
    """

    def __init__(
        self, worker: SchedulerWorker, thread: threading.Thread, stop_event: threading.Event
    ) -> None:
        self.worker = worker
        self.thread = thread
        self._stop = stop_event

    def stop(self, timeout: float | timedelta | None = None) -> bool:
        """Ask the worker to stop and wait up to ``timeout`` (None: until it has).

        The occurrence in hand is finished and settled first, the rest of its batch
        released. Returns True when the thread has ended.
        """
        self._stop.set()
        changes = getattr(self.worker.store, "changes", None)
        if changes is not None:
            changes.notify()  # wake it now if it sleeps; a spurious wake is harmless
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if self.thread.ident != threading.get_ident():
            self.thread.join(timeout)
        return not self.thread.is_alive()

    @property
    def is_alive(self) -> bool:
        """True while the worker's thread runs."""
        return self.thread.is_alive()

    def __enter__(self) -> WorkerHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_alive else "stopped"
        return f"WorkerHandle({self.thread.name!r}, {state})"
