"""SchedulerWorker: claims due occurrences, dispatches them to a sink, settles them.

One poll cycle (:meth:`SchedulerWorker.run_once`; the loops run it through
:mod:`hexeract_lite.engine`):

1. ``store.dead_letter_exhausted()``: dead-letter what a crashed worker left on its
   last attempt (in the loops, at most once per ``poll_interval``).
2. ``store.claim_due(now, batch_size, lease)``: claim up to ``batch_size`` due
   occurrences, each spending one attempt and held until ``now + lease``.
3. Each occurrence at its turn (:mod:`hexeract_lite.dispatch`): skipped when its lease
   has run out, not dispatched when the worker is stopping, else handed to the sink
   under ``dispatch_timeout``.
4. The batch is settled in one ``store.settle(...)`` (:mod:`hexeract_lite.ledger`),
   each item fenced by its claim's ``leased_until``. In the loops, a full batch's
   settlement is written with the next claim (``store.settle_and_claim(...)``), unless
   the worker has hooks.

Delivery is at least once: a crash before the batch's settlement is written delivers
every occurrence of it again (same occurrence id) once its lease runs out. Logging
goes to the ``hexeract_lite.worker`` logger.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import random
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import Any

import attrs

from ._log import package_logger
from .clock import Clock
from .config import SchedulerWorkerConfig
from .dispatch import SinkRunner, take_turn
from .engine import AsyncDriver, Call, Dispatch, Pause, Steps, Wait, drive, run_watched
from .errors import InvalidArgument, InvalidConfiguration
from .heartbeat import InFlight
from .hooks import (
    Hook,
    MalformedDeadLettered,
    StoreErrorBackedOff,
    Swept,
    WorkerEvent,
    call_hooks,
    check_hooks,
)
from .idle import STOP_CHECK_S, STORE_ERROR_BACKOFF_MAX, Pacer
from .ledger import Counts, Held, Ledger, Planned, warn_left_to_expiry
from .message import ScheduledMessage
from .retry import RandomSource, RetryPolicy
from .settle import (
    MAX_ERROR_CHARS,
    DispatchOutcome,
    DispatchResult,
    error_text,
    settlement_for,
)
from .settlement import Settlement
from .sinks import CallableSink, OccurrenceSink, ScheduleSink
from .snapshot import LeasedOccurrence
from .store.base import ChangeSignal, ScheduleStore
from .store.notices import collecting_malformed
from .transactional import TRANSACTIONAL_GRACE_S, TransactionalSink
from .upkeep import Retention, checkpoint_after_burst

__all__ = [
    "MAX_ERROR_CHARS",
    "STORE_ERROR_BACKOFF_MAX",
    "CycleReport",
    "DispatchOutcome",
    "SchedulerWorker",
    "SchedulerWorkerConfig",
    "WorkerHandle",
    "error_text",
]

log = package_logger("hexeract_lite.worker")


@attrs.frozen(kw_only=True)
class CycleReport:
    """The counts of one poll cycle.

    ``claimed`` = ``delivered + rescheduled + retried + dead_lettered + lease_lost +
    skipped + released + snoozed + cancelled + missed``; ``swept`` counts rows the
    opening sweep dead-lettered. ``cancelled``: aborted with ``cancel=True``;
    ``missed``: recurring firings not dispatched (misfire grace, ``catch_up``, the
    policy's end or ``max_firings``), each counted once, not as delivered.

    .. versionadded:: 0.1.0
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
    snoozed: int = 0
    cancelled: int = 0
    missed: int = 0


def _report(counts: Counts) -> CycleReport:
    outcomes = {outcome.value: n for outcome, n in counts.outcomes.items()}
    return CycleReport(swept=counts.swept, claimed=counts.claimed, **outcomes)


_DEFAULT_CONFIG = SchedulerWorkerConfig()


def _set_soon(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: the loop ended anyway
        loop.call_soon_threadsafe(event.set)


class SchedulerWorker:
    """Runs the poll cycle of the reference against a store, dispatching to a sink.

    - ``store``: any :class:`~hexeract_lite.store.ScheduleStore`.
    - ``sink``: a :class:`~hexeract_lite.sinks.ScheduleSink`, or a plain function /
      coroutine function taking the message (wrapped in :class:`CallableSink`).
    - ``clock``: where "now" comes from for claims, lease checks and cron instants;
      by default the store's own ``clock`` (the system clock for a store without one).
    - ``rng``: the random source of the retry jitter, anything with
      ``uniform(a, b)`` (default: a fresh :class:`random.Random`); pass a seeded one
      for reproducible delays.
    - ``hooks``: callables each called with every :mod:`~hexeract_lite.hooks` event; a
      hook that raises is logged and never changes what is delivered or settled.
    - ``propagate_errors`` (the test mode): when True, a cycle in which a dispatch
      failed settles the whole batch as usual (retry or dead letter), then re-raises
      the first failure's exception from :meth:`run_once`, :meth:`run` and
      :meth:`run_async` (a timeout as :class:`TimeoutError`, an abandoned or bad
      return as :class:`~hexeract_lite.errors.DispatchError`), so a failing assertion
      in a handler fails the test.
    - ``retention``: off (None) by default; a timedelta prunes delivered and cancelled
      rows that ended longer ago than that, at the first cycle and then hourly
      (:class:`~hexeract_lite.upkeep.Retention`; dead letters are kept), and the run
      log's records older than that.
    - ``run_log``: True (the default) records every dispatch attempt, and every firing
      settled without one, in the store's run log (:mod:`hexeract_lite.runlog`), in
      the transaction that settles it; False records none (a store without a run log
      records none either way).

    Raises :class:`InvalidConfiguration` for a bad config, store, sink or rng.

    Drive it with :meth:`run_once` (one cycle, deterministic: what tests use),
    :meth:`run` (a loop in the calling thread), :meth:`start` (that loop on a daemon
    thread) or :meth:`run_async` (the loop as an asyncio task). A worker runs one loop
    at a time; for parallelism start several workers (on one store or several
    processes): claims never overlap.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        store: ScheduleStore,
        sink: ScheduleSink | Callable[[ScheduledMessage], Any],
        config: SchedulerWorkerConfig = _DEFAULT_CONFIG,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        hooks: Iterable[Hook] | None = None,
        propagate_errors: bool = False,
        retention: timedelta | None = None,
        run_log: bool = True,
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
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidConfiguration(f"clock must have a now() method, got clock={clock!r:.100}")
        if rng is not None and not callable(getattr(rng, "uniform", None)):
            raise InvalidConfiguration(f"rng must have a uniform(a, b) method, got rng={rng!r}")
        if not isinstance(propagate_errors, bool):
            raise InvalidConfiguration(
                f"propagate_errors must be True or False, got propagate_errors={propagate_errors!r}"
            )
        if not isinstance(run_log, bool):
            raise InvalidConfiguration(f"run_log must be True or False, got run_log={run_log!r}")
        self.hooks: tuple[Hook, ...] = check_hooks(hooks)
        self._retention = None if retention is None else Retention(retention)
        self.propagate_errors = propagate_errors
        self._propagating: BaseException | None = None
        self.store = store
        self.sink: ScheduleSink = sink  # type: ignore[assignment]
        self.config = config
        self.clock: Clock = clock if clock is not None else store.clock
        self._rng: RandomSource = rng if rng is not None else random.Random()
        self._retry = RetryPolicy.from_config(config)
        self._pacer = Pacer(self.clock, config, store.writers_take_turns)
        self._ledger = Ledger(
            store,
            self.clock,
            self._retry,
            self._rng,
            self.hooks,
            run_log=run_log,
            max_snoozes=config.max_snoozes,
        )
        self._changes: ChangeSignal = store.changes
        self._aborting = threading.Event()
        timeout = config.dispatch_timeout.total_seconds()
        if isinstance(self.sink, TransactionalSink):
            self.sink = self.sink.bind(store, self.clock, self._retry, timeout, run_log=run_log)
            # the sink stops its own handler at the timeout; this is the backstop
            timeout += TRANSACTIONAL_GRACE_S
        self._runner = SinkRunner(self.sink, timeout, self._aborting)
        self._inflight = InFlight.of(self._runner, store, self.clock, config, self.hooks)
        self._running = threading.Lock()
        self._stop_lock = threading.Lock()
        self._loop_thread = threading.local()
        """``on`` is True on the thread loop's own threads (see :meth:`_in_loop_thread`)."""
        self._stopper: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"SchedulerWorker({self.store!r}, {self.sink!r})"

    # -- the retry policy ----------------------------------------------------------------

    @property
    def retry_policy(self) -> RetryPolicy:
        """The :class:`RetryPolicy` of the config's retry fields."""
        return self._retry

    def retry_delay(self, attempts: int) -> timedelta:
        """The wait before retrying an occurrence that failed with ``attempts`` consumed:
        :meth:`RetryPolicy.next_delay` drawn from this worker's ``rng``."""
        return self._retry.next_delay(attempts, self._rng)

    def failure_settlement(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> Settlement:
        """What a failed dispatch of ``occurrence`` records (:meth:`on_failure`'s rule).

        Exhausted (``attempts >= max_attempts``): a ``dead_lettered`` settlement with
        the error text. Otherwise ``failed`` with :meth:`retry_delay` (drawn here, so
        with jitter each call draws anew); the attempt counter, advanced at claim
        time, is left as it is.
        """
        result = DispatchResult.failed(error)
        now = self.clock.now()
        stamp = self._ledger.stamp(now)  # its run: not dispatched here, settled now
        settlement = settlement_for(occurrence, result, now, self._retry, self._rng, stamp)
        assert settlement is not None  # a failure always records something
        return settlement

    def on_failure(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> DispatchOutcome:
        """Settle a failed dispatch of ``occurrence`` on its own, with
        :meth:`failure_settlement`, and return the outcome (``LEASE_LOST`` when the
        store fenced the acknowledgement out)."""
        settlement = self.failure_settlement(occurrence, error)
        [ok] = self.store.settle([settlement])
        counts = Counts()
        outcome = self._ledger.record(
            occurrence, settlement, ok, DispatchResult.failed(error), counts
        )
        call_hooks(self.hooks, counts.events)
        return outcome

    # -- one cycle -----------------------------------------------------------------------

    def run_once(self) -> CycleReport:
        """Run exactly one poll cycle (sweep, claim, dispatch, settle); report its counts.

        The batch is dispatched on the worker's dispatch thread, this thread watching
        each call's ``dispatch_timeout``. Store errors propagate (nothing is retried
        here); :meth:`run` is the loop that backs off and carries on. With
        ``propagate_errors``, a failed dispatch's exception is raised once the batch is
        settled.
        """
        try:
            return self._run_cycle(self._aborting.is_set)
        finally:
            self._aborting.clear()

    def _run_cycle(self, stopping: Callable[[], bool]) -> CycleReport:
        """One unpaced cycle on this thread; ``stopping`` is read at each turn."""
        stop = threading.Event()  # a cycle neither waits nor pauses
        steps = self._cycle(stopping, None, looping=False)
        handed_off = self._runner.run_batch
        return drive(steps, lambda r: handed_off(r.batch, r.turn), stop, self._changes)[0]

    def _cycle(
        self, stopping: Callable[[], bool], carry: Held | None, *, looping: bool
    ) -> Steps[tuple[CycleReport, Held | None]]:
        """One cycle as the requests of :mod:`hexeract_lite.engine`: its report, and
        the settlement it holds for the next claim.

        ``carry``: the previous cycle's settlement, still to write: written with this
        cycle's claim (``store.settle_and_claim``). ``looping`` (a cycle of a loop): the
        sweep only when the pacer says it is due, and a full batch dispatched without
        failure to propagate, interruption or stop is not settled here but returned as
        the next cycle's ``carry`` (the loop settles it if no cycle follows)."""
        counts = Counts()
        batch = yield Call(self._claim, counts, carry, looping)
        if not batch:
            return _report(counts), None
        turn, inflight = functools.partial(take_turn, self.clock, stopping), self._inflight
        try:  # each dispatch's handle (current_dispatch()); settled on its last lease
            results, interruption = yield Dispatch(inflight.track(batch), inflight.turn(turn))
        finally:
            batch, judge = inflight.finish(batch)
        results = judge(results)  # an abort asked for overrules what the sink returned
        planned = self._ledger.plan(batch, results, counts)
        if looping and self._may_carry(batch, planned, interruption, counts, stopping):
            return _report(counts), Held(planned, counts)
        yield Call(self._ledger.write, planned, counts)
        if interruption is not None:
            raise interruption
        if self.propagate_errors and counts.failure is not None:
            self._propagating = counts.failure
            raise counts.failure
        return _report(counts), None

    def _loop(self, stopping: Callable[[], bool], look_every: float) -> Steps[None]:
        """The loop of :meth:`run`, :meth:`start` and :meth:`run_async`, paced by the
        :class:`~hexeract_lite.idle.Pacer`; an idle loop looks at ``stopping`` at
        least every ``look_every`` seconds."""
        pacer, changes = self._pacer, self._changes
        carry: Held | None = None  # a full batch's settlement, written with the next claim
        while True:
            version = changes.version()
            pacer.observe((yield Call(self._data_version)))
            if stopping():
                break
            try:
                held, carry = carry, None
                report, carry = yield from self._cycle(stopping, held, looping=True)
                pause = pacer.after_cycle(report.claimed)
                if pause is not None:
                    if carry is not None and carry.lapses_within(self.clock.now(), pause):
                        held, carry = carry, None  # written now, not after its leases
                        yield Call(self._ledger.write_held, held)
                    if pause > 0:
                        yield Pause(pause)
                    continue
                plan = pacer.idle_plan((yield Call(self.store.next_wakeup)), report.claimed)
                while not stopping():
                    timeout = plan.next_timeout(look_every)
                    if timeout is None or (yield Wait(version, timeout)):
                        break
                    if pacer.committed_since((yield Call(self._data_version))):
                        break
            except Exception as exc:
                yield Pause((yield Call(self._backed_off, exc)))
        if carry is not None:  # no cycle follows: write it on its own
            yield Call(self._ledger.write_held, carry)

    def _may_carry(
        self,
        batch: list[LeasedOccurrence],
        planned: list[Planned],
        interruption: BaseException | None,
        counts: Counts,
        stopping: Callable[[], bool],
    ) -> bool:
        """A full batch, dispatched without interruption, failure to propagate or stop:
        its settlement may wait for the next claim. Not with hooks: they are told of a
        settlement once it is written, and, written with the next claim, that would be
        while the new batch's leases run, so a slow hook could let them run out."""
        return (
            bool(planned)
            and not self.hooks
            and interruption is None
            and len(batch) >= self.config.batch_size
            and not (self.propagate_errors and counts.failure is not None)
            and not stopping()
        )

    def _claim(self, counts: Counts, carry: Held | None, paced: bool) -> list[LeasedOccurrence]:
        """Steps 1 and 2 of the cycle: the sweep, then the claim (with ``carry``, the
        previous cycle's settlement written in the same ``store.settle_and_claim``).
        ``paced`` (the loops): the sweep only when the pacer says it is due."""
        try:
            if self._retention is not None and self._retention.is_due():
                if carry is not None:  # settled first: a long prune must not outlast its leases
                    held, carry = carry, None
                    self._ledger.write(held.planned, held.counts)
                self._retention.run_if_due(self.store)
            if not paced or self._pacer.sweep_due():
                counts.swept = self.store.dead_letter_exhausted()
        except BaseException:
            if carry is not None:  # the claim will not come: settle it now
                self._ledger.write(carry.planned, carry.counts)
            raise
        if counts.swept:
            log.warning("sweep dead-lettered %d occurrence(s) left exhausted", counts.swept)
            call_hooks(self.hooks, [Swept(count=counts.swept)])
        cfg, now = self.config, self.clock.now()
        batch: list[LeasedOccurrence] = []
        try:
            with collecting_malformed() as malformed:
                if carry is None:
                    batch = self.store.claim_due(now, cfg.batch_size, cfg.lease)
                else:
                    planned = carry.planned
                    try:
                        oks, batch = self.store.settle_and_claim(
                            [s for _, s, _ in planned], now, cfg.batch_size, cfg.lease
                        )
                    except BaseException:
                        warn_left_to_expiry(len(planned))
                        raise
                    self._ledger.written(planned, oks, carry.counts)
        finally:
            found: list[WorkerEvent] = [
                MalformedDeadLettered(schedule=s, reason=r) for s, r in malformed
            ]
            if batch:  # told with the batch's settlement, not while its leases run
                counts.events[:0] = found
            else:
                call_hooks(self.hooks, found)
        counts.claimed = len(batch)
        if self._pacer.burst_ended(len(batch)):
            checkpoint_after_burst(self.store)
        return batch

    def _backed_off(self, exc: Exception) -> float:
        """A store error in the loop: re-raise the test mode's failure, else the
        back-off in seconds (told to the hooks)."""
        if exc is self._propagating:
            self._propagating = None
            raise exc
        delay = self._pacer.after_error(exc)
        call_hooks(self.hooks, [StoreErrorBackedOff(error=exc, backoff=timedelta(seconds=delay))])
        return delay

    def _data_version(self) -> int | None:
        """The store's ``data_version()``; None when it cannot tell or fails (then the
        next comparison differs and a cycle runs)."""
        try:
            version = self.store.data_version()
        except Exception:
            return None
        return None if version is None else int(version)

    # -- stopping ------------------------------------------------------------------------

    def abort(self) -> None:
        """Make the running loop stop at once, without waiting for the dispatch in flight.

        Safe from any thread and from a signal handler of the main thread while the loop
        runs on another. Sets the loop's ``stop`` event; the dispatch in flight is
        abandoned and recorded as failed (``DispatchError``: it was handed to the sink,
        so its attempt counts; a sync sink keeps running on its thread until it
        returns, an async one is cancelled); the rest of the batch is released
        undispatched and what finished is settled, then the loop returns. Called
        while no loop runs, it makes the next loop return at once.
        """
        self._aborting.set()
        with self._stop_lock:
            stopper = self._stopper
        if stopper is not None:
            stopper()
        self._runner.interrupt()
        self._changes.notify()  # wake it now if it sleeps; a spurious wake is harmless

    def _enter(self, stopper: Callable[[], None]) -> None:
        if not self._running.acquire(blocking=False):
            raise RuntimeError(f"{self!r} is already running; start another worker instead")
        with self._stop_lock:
            self._stopper = stopper
        if self._aborting.is_set():
            stopper()

    def _leave(self) -> None:
        with self._stop_lock:
            self._stopper = None
        self._aborting.clear()
        self._release()
        self._running.release()

    def _release(self) -> None:
        self._runner.close()
        self._inflight.close()
        if isinstance(self.sink, OccurrenceSink):
            self.sink.close()  # its connection (and its library's claim on the file)

    def close(self) -> None:
        """Release what the worker keeps between cycles: its dispatch thread and a
        :class:`~hexeract_lite.transactional.TransactionalSink`'s own connection. The
        loops (:meth:`run`, :meth:`start`, :meth:`run_async`) do it as they return;
        after :meth:`run_once` calls, call it (or use the worker as a context manager).
        The store is not closed. The worker stays usable: a later cycle opens them
        again. Idempotent; while a loop runs it raises :class:`RuntimeError` (stop the
        loop first).

        .. versionadded:: 0.2.0
        """
        if not self._running.acquire(blocking=False):
            raise RuntimeError(f"{self!r} is running; stop its loop before closing it")
        try:
            self._release()
        finally:
            self._running.release()

    def __enter__(self) -> SchedulerWorker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the loops -----------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Poll until ``stop`` is set (forever without one); returns when the loop ends.

        The loop runs on its own thread (named after the calling one, ``-loop`` added),
        which calls the sink and the hooks; the calling thread watches it (see
        :mod:`hexeract_lite.engine`): it gives up on a call past ``dispatch_timeout``
        and a new loop thread goes on, and it raises what ended the loop.

        After a cycle that claimed a full batch it goes again at once, or after
        ``min_cycle_delay`` while other connections write to the store (see
        :class:`SchedulerWorkerConfig`); after any other cycle it sleeps until the
        store's next due instant, at most ``poll_interval`` at a time, waking at once
        when this process changes the store (``store.changes``; the SQLite store on
        Linux and the PostgreSQL store also signal other processes' commits there) and,
        with a store whose ``data_version()`` tells (SQLite), noticing other processes'
        commits within half of ``poll_interval`` anyway (:mod:`hexeract_lite.idle`). A
        store error is logged and backed off (``poll_interval`` doubling per consecutive
        error, at most :data:`STORE_ERROR_BACKOFF_MAX`), and the loop goes on.

        Stopping: ``stop`` is checked at each occurrence's turn. The occurrence in hand
        is finished and settled first (a hung sync sink holds the stop for up to
        ``dispatch_timeout``; :meth:`abort` does not wait for it); the rest of the
        batch is released (the claim's attempt given back, claimable again at once),
        in the same settlement. A :class:`KeyboardInterrupt` in the calling thread
        abandons the dispatch in flight like :meth:`abort`, settles the batch, then
        propagates.
        """
        stop = stop if stop is not None else threading.Event()
        self._enter(stop.set)
        try:
            steps = self._loop(stop.is_set, STOP_CHECK_S)
            run_watched(steps, self._runner, stop, self._changes, self.abort, self._mark_loop)
        finally:
            self._leave()

    def _mark_loop(self) -> None:
        self._loop_thread.on = True

    def _in_loop_thread(self) -> bool:
        """True on a thread of this worker's thread loop (a sink or hook called by
        :meth:`run` or :meth:`start`): waiting there for the loop to end never ends."""
        return getattr(self._loop_thread, "on", False) is True

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

    async def run_async(self, stop: asyncio.Event | None = None) -> None:
        """The :meth:`run` loop as a coroutine, for asyncio applications.

        Store calls and hooks run off the event loop (``asyncio.to_thread``). An async
        sink is awaited on the loop under ``dispatch_timeout`` (cancelled when it runs
        out); a synchronous sink's batch runs on the worker's dispatch thread, watched
        from a thread (as under :meth:`run_once`).

        Stop it by setting ``stop``, or by cancelling the task: either way the
        occurrence in hand is finished and settled and the rest of the batch released
        before it returns (a cancellation is then re-raised). A sink raising
        :class:`KeyboardInterrupt` or :class:`SystemExit` on the loop fails its
        dispatch, the rest of the batch is released and settled, and the exception
        propagates. ``stop`` must be an :class:`asyncio.Event` (a
        :class:`threading.Event` goes with :meth:`run`): :class:`InvalidArgument` otherwise.
        """
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise InvalidArgument(
                f"run_async's stop must be an asyncio.Event, got {stop!r:.100}"
                " (a threading.Event goes with run())"
            )
        stop = stop if stop is not None else asyncio.Event()
        self._enter(functools.partial(_set_soon, asyncio.get_running_loop(), stop))
        try:
            driver = AsyncDriver(self._runner, stop, self._changes)
            aborting = self._aborting.is_set
            await driver.drive(self._loop(lambda: driver.stopping() or aborting(), math.inf))
        finally:
            self._leave()


class WorkerHandle:
    """A worker running on a daemon thread (from :meth:`SchedulerWorker.start`).

    ``stop(timeout=None)`` asks it to stop and waits; ``is_alive`` tells whether the
    thread still runs; as a context manager it stops the worker on exit.

    .. versionadded:: 0.1.0
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
        released. Returns True when the thread has ended. (``worker.abort()`` stops it
        without waiting for the occurrence in hand.) Called from the worker's own sink
        or hook, it only asks, and returns False: the loop stops once they return.
        """
        if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta | None):
            raise InvalidArgument(
                f"stop's timeout must be seconds or a timedelta (or None), got {timeout!r:.100}"
            )
        self._stop.set()
        self.worker.store.changes.notify()  # wake it now if it sleeps; a spurious wake is harmless
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if self.thread.ident != threading.get_ident() and not self.worker._in_loop_thread():
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
