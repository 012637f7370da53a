"""SchedulerWorker: claims due occurrences, dispatches them to a sink, settles them
(docs/concepts/worker.md). Delivery is at least once. Logs to ``hexeract_lite.worker``."""

from __future__ import annotations

import asyncio
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
from .dispatch import SinkRunner, call_soon, take_turn
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
from .ledger import Counts, Held, Ledger, warn_left_to_expiry
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
from .sinks import OccurrenceSink, ScheduleSink, as_sink
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

    ``claimed`` is the sum of the outcome counts (``delivered`` ... ``missed``);
    ``swept``: rows the opening sweep dead-lettered; ``cancelled``: aborted with
    ``cancel=True``; ``missed``: recurring firings not dispatched (misfire grace,
    ``catch_up``, the policy's end or ``max_firings``).

    .. versionadded:: 0.1.0"""

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


class SchedulerWorker:
    """Runs the poll cycle against a store, dispatching to a sink.

    - ``sink``: a :class:`~hexeract_lite.sinks.ScheduleSink`, or a function / coroutine
      function taking the message (wrapped in :class:`CallableSink`).
    - ``clock``: where "now" comes from (default: the store's ``clock``); ``rng``: the
      retry jitter's source, anything with ``uniform(a, b)``.
    - ``hooks``: callables called with every :mod:`~hexeract_lite.hooks` event; a hook
      that raises is logged and changes nothing.
    - ``propagate_errors`` (the test mode): a cycle in which a dispatch failed settles its
      batch, then re-raises the first failure (a timeout as :class:`TimeoutError`, an
      abandoned or bad return as :class:`~hexeract_lite.errors.DispatchError`).
    - ``retention``: a timedelta prunes, at the first cycle and then hourly, delivered and
      cancelled rows and run log records older than that
      (:class:`~hexeract_lite.upkeep.Retention`; dead letters are kept). None: off.
    - ``run_log``: record every dispatch attempt, and every firing settled without one,
      in the store's run log, in the transaction that settles it.

    Raises :class:`InvalidConfiguration` for a bad config, store, sink or rng. Drive it
    with :meth:`run_once`, :meth:`run`, :meth:`start` or :meth:`run_async`, one loop at
    a time. Several workers may share a store: claims never overlap.

    .. versionadded:: 0.1.0"""

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
        checked = as_sink(sink)
        if checked is None:
            raise InvalidConfiguration(
                f"sink must have a dispatch(message) method or be callable, got {sink!r}"
            )
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidConfiguration(f"clock must have a now() method, got clock={clock!r:.100}")
        if rng is not None and not callable(getattr(rng, "uniform", None)):
            raise InvalidConfiguration(f"rng must have a uniform(a, b) method, got rng={rng!r}")
        for flag, value in (("propagate_errors", propagate_errors), ("run_log", run_log)):
            if not isinstance(value, bool):
                raise InvalidConfiguration(f"{flag} must be True or False, got {flag}={value!r}")
        self.hooks: tuple[Hook, ...] = check_hooks(hooks)
        self._retention = None if retention is None else Retention(retention)
        self.propagate_errors = propagate_errors
        self._propagating: BaseException | None = None
        self.store = store
        self.sink: ScheduleSink = checked
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
        beats = not isinstance(self.sink, OccurrenceSink)  # an occurrence sink: no heartbeat
        self._inflight = InFlight(store, self.clock, config, self.hooks, beats=beats)
        self._runner = SinkRunner(self.sink, timeout, self._aborting, self._inflight.handle)
        self._running = threading.Lock()
        self._stop_lock = threading.Lock()
        self._loop_thread = threading.local()  # .on: True on the loop's threads
        self._stopper: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"SchedulerWorker({self.store!r}, {self.sink!r})"

    # -- the retry policy ----------------------------------------------------------------

    @property
    def retry_policy(self) -> RetryPolicy:
        """The :class:`RetryPolicy` of the config's retry fields."""
        return self._retry

    def retry_delay(self, attempts: int) -> timedelta:
        """The wait before retrying after ``attempts``: :meth:`RetryPolicy.next_delay` drawn
        from this worker's ``rng``."""
        return self._retry.next_delay(attempts, self._rng)

    def failure_settlement(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> Settlement:
        """What a failed dispatch of ``occurrence`` records: ``dead_lettered`` with the error
        text when exhausted, else ``failed`` with a fresh :meth:`retry_delay`."""
        result = DispatchResult.failed(error)
        now = self.clock.now()
        stamp = self._ledger.stamp(now)  # its run: not dispatched here, settled now
        settlement = settlement_for(occurrence, result, now, self._retry, self._rng, stamp)
        assert settlement is not None  # a failure always records something
        return settlement

    def on_failure(
        self, occurrence: LeasedOccurrence, error: BaseException | str
    ) -> DispatchOutcome:
        """Settle a failed dispatch of ``occurrence`` with :meth:`failure_settlement`; return
        the outcome (``LEASE_LOST`` when the store fenced it out)."""
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
        """Run one poll cycle (sweep, claim, dispatch, settle); report its counts.

        Store errors propagate. With ``propagate_errors``, a failed dispatch's exception is
        raised once the batch is settled."""
        try:
            return self._run_cycle(self._aborting.is_set)
        finally:
            self._aborting.clear()

    def _run_cycle(self, stopping: Callable[[], bool]) -> CycleReport:
        stop = threading.Event()  # a cycle neither waits nor pauses
        steps = self._cycle(stopping, None, looping=False)
        handed_off = self._runner.run_batch
        return drive(steps, lambda r: handed_off(r.batch, r.turn), stop, self._changes)[0]

    def _cycle(
        self, stopping: Callable[[], bool], carry: Held | None, *, looping: bool
    ) -> Steps[tuple[CycleReport, Held | None]]:
        """One cycle: its report, and (``looping``) a full batch's settlement held for the
        next claim; ``carry`` is written with this claim."""
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
        failure = counts.failure if self.propagate_errors else None
        if (  # a full batch, uninterrupted, without hooks: settled with the next claim
            looping
            and planned
            and not self.hooks
            and interruption is None
            and len(batch) >= self.config.batch_size
            and failure is None
            and not stopping()
        ):
            return _report(counts), Held(planned, counts)
        yield Call(self._ledger.write, planned, counts)
        if interruption is not None:
            raise interruption
        if failure is not None:
            self._propagating = failure
            raise failure
        return _report(counts), None

    def _loop(self, stopping: Callable[[], bool], look_every: float) -> Steps[None]:
        """The loop of :meth:`run` and :meth:`run_async`; idle, it reads ``stopping`` at least
        every ``look_every`` seconds."""
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
                pacer.go_idle((yield Call(self.store.next_wakeup)), report.claimed)
                while not stopping():
                    timeout = pacer.next_timeout(look_every)
                    if timeout is None or (yield Wait(version, timeout)):
                        break
                    if pacer.committed_since((yield Call(self._data_version))):
                        break
            except Exception as exc:
                yield Pause((yield Call(self._backed_off, exc)))
        if carry is not None:  # no cycle follows: write it on its own
            yield Call(self._ledger.write_held, carry)

    def _claim(self, counts: Counts, carry: Held | None, paced: bool) -> list[LeasedOccurrence]:
        """The sweep, then the claim, ``carry`` written in the same ``settle_and_claim``."""
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
        """A store error in the loop: its back-off in seconds."""
        if exc is self._propagating:
            self._propagating = None
            raise exc
        delay = self._pacer.after_error(exc)
        call_hooks(self.hooks, [StoreErrorBackedOff(error=exc, backoff=timedelta(seconds=delay))])
        return delay

    def _data_version(self) -> int | None:
        try:
            version = self.store.data_version()
        except Exception:
            return None
        return None if version is None else int(version)

    # -- stopping ------------------------------------------------------------------------

    def abort(self) -> None:
        """Make the running loop stop now, without waiting for the dispatch in flight.

        Safe from any thread and from a signal handler. The dispatch in flight is abandoned
        and recorded as failed (``DispatchError``; its attempt counts; a sync sink keeps
        running on its thread, an async one is cancelled); the rest of the batch is released,
        what finished is settled, and the loop returns. With no loop running, the next loop
        returns at once."""
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
        """Release the dispatch thread and a
        :class:`~hexeract_lite.transactional.TransactionalSink`'s connection (the loops do
        it as they return; after :meth:`run_once`, call it or use the worker as a context
        manager). The store stays open, the worker usable. Idempotent; while a loop runs:
        :class:`RuntimeError`.

        .. versionadded:: 0.2.0"""
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
        """Poll until ``stop`` is set (forever without one).

        The sink and hooks run on a loop thread (the caller's name plus ``-loop``) that this
        thread watches: a call past ``dispatch_timeout`` is given up and a new loop thread
        goes on; what ended the loop is raised here. After a full batch it goes again at once
        (or after ``min_cycle_delay``); else it sleeps until the store's next due instant, at
        most ``poll_interval``, waking on the store's change signal. A store error is logged
        and backed off (``poll_interval`` doubling, at most :data:`STORE_ERROR_BACKOFF_MAX`).

        ``stop`` is checked at each occurrence's turn: the one in hand is finished and
        settled (a hung sync sink holds the stop for up to ``dispatch_timeout``), the rest of
        the batch released. A :class:`KeyboardInterrupt` abandons the dispatch in flight like
        :meth:`abort`, settles the batch, then propagates."""
        stop = stop if stop is not None else threading.Event()
        self._enter(stop.set)
        try:
            steps = self._loop(stop.is_set, STOP_CHECK_S)
            on_loop = functools.partial(setattr, self._loop_thread, "on", True)
            run_watched(steps, self._runner, stop, self._changes, self.abort, on_loop)
        finally:
            self._leave()

    def start(self, *, name: str = "hexeract-worker") -> WorkerHandle:
        """Run :meth:`run` on a new daemon thread; ``with worker.start(): ...`` stops it (and
        waits for it) on leaving the block."""
        if self._running.locked():
            raise RuntimeError(f"{self!r} is already running; start another worker instead")
        stop = threading.Event()
        thread = threading.Thread(target=self.run, args=(stop,), name=name, daemon=True)
        handle = WorkerHandle(self, thread, stop)
        thread.start()
        return handle

    async def run_async(self, stop: asyncio.Event | None = None) -> None:
        """The :meth:`run` loop as a coroutine.

        Store calls and hooks run off the event loop (``asyncio.to_thread``). An async sink
        is awaited on the loop under ``dispatch_timeout`` (cancelled when it runs out); a sync
        sink runs on the dispatch thread. Set ``stop`` (an :class:`asyncio.Event`, else
        :class:`InvalidArgument`) or cancel the task: the occurrence in hand is settled, the
        rest released, then it returns (a cancellation re-raised). A sink raising
        :class:`KeyboardInterrupt` or :class:`SystemExit` fails its dispatch; the batch is
        settled and the exception propagates."""
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise InvalidArgument(
                f"run_async's stop must be an asyncio.Event, got {stop!r:.100}"
                " (a threading.Event goes with run())"
            )
        stop = stop if stop is not None else asyncio.Event()
        self._enter(functools.partial(call_soon, asyncio.get_running_loop(), stop.set))
        try:
            driver = AsyncDriver(self._runner, stop, self._changes)
            aborting = self._aborting.is_set
            await driver.drive(self._loop(lambda: driver.stopping() or aborting(), math.inf))
        finally:
            self._leave()


class WorkerHandle:
    """A worker running on a daemon thread (:meth:`SchedulerWorker.start`); as a context
    manager it stops the worker on exit.

    .. versionadded:: 0.1.0"""

    def __init__(
        self, worker: SchedulerWorker, thread: threading.Thread, stop_event: threading.Event
    ) -> None:
        self.worker = worker
        self.thread = thread
        self._stop = stop_event

    def stop(self, timeout: float | timedelta | None = None) -> bool:
        """Ask the worker to stop and wait up to ``timeout`` (None: until it has); True when
        the thread has ended.

        The occurrence in hand is settled first, the rest of its batch released. From the
        worker's own sink or hook it only asks, and returns False."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta | None):
            raise InvalidArgument(
                f"stop's timeout must be seconds or a timedelta (or None), got {timeout!r:.100}"
            )
        self._stop.set()
        self.worker.store.changes.notify()  # wake it now if it sleeps; a spurious wake is harmless
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds()
        if self.thread.ident != threading.get_ident() and not getattr(
            self.worker._loop_thread, "on", False
        ):
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
