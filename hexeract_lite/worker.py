"""SchedulerWorker: claims due occurrences, dispatches them to a sink, settles them.

One poll cycle (:meth:`SchedulerWorker.run_once`; :meth:`~SchedulerWorker.run`,
:meth:`~SchedulerWorker.start` and :meth:`~SchedulerWorker.run_async` run the same one
in a loop):

1. ``store.dead_letter_exhausted()``: dead-letter what a crashed worker left on its
   last attempt (in the loops, at most once per ``poll_interval``).
2. ``store.claim_due(now, batch_size, lease)``: claim up to ``batch_size`` due
   occurrences; each claim spends one attempt and holds the occurrence until
   ``now + lease``.
3. Each claimed occurrence, in order, at its turn (:mod:`hexeract_lite.dispatch`): its
   lease has already run out (earlier dispatches took that long): **skipped**, another
   worker may own it now; the worker is stopping: not dispatched; else dispatched to
   the sink under ``dispatch_timeout``.
4. The whole batch is settled in one ``store.settle(...)`` (one transaction), by the
   rule of :func:`hexeract_lite.settle.settlement_for`: delivered, rescheduled (cron, interval),
   retried after the :class:`~hexeract_lite.retry.RetryPolicy` delay, dead-lettered
   (exhausted), or **released** when it was not dispatched (the claim's attempt given
   back, claimable again at once). Each item is fenced by the claim's
   ``leased_until``; an item the store answers False for (another worker owns the
   occurrence now) is logged and counted as ``lease_lost``, never retried.

In the loops (:meth:`~SchedulerWorker.run`, :meth:`~SchedulerWorker.start`,
:meth:`~SchedulerWorker.run_async`; not :meth:`~SchedulerWorker.run_once`), the
settlement of a full batch is written with the next cycle's claim, in one
``store.settle_and_claim(...)`` (one transaction, one commit, on a store whose
``fuses_settle_and_claim`` is True; not for a worker with hooks, which are told only
while no claimed lease runs); fenced and counted as above. If that call fails (nothing
of it recorded), the settlement is written on its own and the claim made on its own;
when the loop stops (or its task is cancelled), a settlement still held is written on
its own before it returns.

Delivery is at least once: a crash between a dispatch and the batch's settlement (or
a settlement that fails) records nothing of the batch, and every occurrence of it is
delivered again (same occurrence id) once its lease runs out.

A sink that raises (whatever the exception, ``CancelledError`` included), does not
return within ``dispatch_timeout``, returns anything but ``None`` (see
:mod:`hexeract_lite.sinks`), or, as an async sink, blocks the event loop past
``dispatch_timeout``, is a failed dispatch, never a dead worker; only a
``KeyboardInterrupt`` or ``SystemExit`` raised on the event loop then also ends
:meth:`~SchedulerWorker.run_async`, once the batch is settled. ``last_error`` records
``"<ExceptionType>: <message>"`` and a bounded traceback
(:func:`~hexeract_lite.settle.error_text`), and the log record carries the traceback.
A sync sink still running at the timeout is abandoned on its thread (Python cannot
kill a thread; see :mod:`hexeract_lite.dispatch`); an async sink is cancelled.

Hooks (:mod:`hexeract_lite.hooks`) hear of every settlement once its batch is settled.
(Over 700 lines: the four ways of running a cycle share the
stop/abort state, which splitting would spread over modules.)

Logging goes to the ``hexeract_lite.worker`` logger (schedule id, occurrence id,
attempt and lag in every record, also as ``extra`` fields); nothing is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

import attrs

from ._log import package_logger
from .clock import Clock
from .config import SchedulerWorkerConfig
from .dispatch import Interruption, SinkRunner, log_occurrence, take_turn
from .errors import InvalidArgument, InvalidConfiguration
from .hooks import (
    Hook,
    MalformedDeadLettered,
    StoreErrorBackedOff,
    Swept,
    WorkerEvent,
    call_hooks,
    check_hooks,
    settlement_event,
)
from .idle import (
    STOP_CHECK_S,
    STORE_ERROR_BACKOFF_MAX,
    Pacer,
    wait_change_or_stop,
    wait_event,
)
from .message import ScheduledMessage
from .retry import RandomSource, RetryPolicy
from .settle import (
    MAX_ERROR_CHARS,
    Acknowledged,
    DispatchOutcome,
    DispatchResult,
    ResultKind,
    error_summary,
    error_text,
    outcome_of,
    settlement_for,
)
from .settlement import Settlement
from .sinks import CallableSink, ScheduleSink
from .snapshot import LeasedOccurrence
from .store.base import ChangeSignal, ScheduleStore
from .store.notices import collecting_malformed
from .transactional import TRANSACTIONAL_GRACE_S, BoundTransactionalSink, TransactionalSink
from .upkeep import Retention, checkpoint_after_burst
from .watched import Handover, LoopThread, Resume, Wake

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
    skipped + released``; ``swept`` counts rows the opening sweep dead-lettered.

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


class _Counts:
    __slots__ = ("claimed", "events", "failure", "outcomes", "swept")

    def __init__(self) -> None:
        self.swept = 0
        self.claimed = 0
        self.outcomes: dict[DispatchOutcome, int] = dict.fromkeys(DispatchOutcome, 0)
        self.events: list[WorkerEvent] = []
        self.failure: BaseException | None = None
        """The first failed dispatch's exception (re-raised with ``propagate_errors``)."""

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


_Planned = tuple[LeasedOccurrence, Settlement, DispatchResult]
"""One occurrence's settlement to write, with the dispatch result it came from."""


class _Carry:
    """A full batch's settlement, not yet written: the loop writes it with the next
    cycle's claim (one transaction), or on its own when no cycle follows."""

    __slots__ = ("counts", "planned")

    def __init__(self, planned: list[_Planned], counts: _Counts) -> None:
        self.planned = planned
        self.counts = counts

    def lapses_within(self, now: datetime, pause: float) -> bool:
        """True when a held lease ends less than ``pause`` seconds after a pause of
        ``pause`` seconds from ``now``: holding the settlement over that pause would
        leave it unwritten while the leases run out."""
        if not self.planned:
            return False
        first = min(occ.leased_until for occ, _, _ in self.planned)
        return now + timedelta(seconds=2 * pause) >= first


def _warn_left_to_expiry(left: int) -> None:
    """A cycle broke off (a store error while settling): the rest waits out its lease."""
    if left:
        log.warning("%d claimed occurrence(s) left to lease expiry", left)


_DEFAULT_CONFIG = SchedulerWorkerConfig()


def _moved(before: int | None, seen: int | None) -> bool:
    """Another connection committed between two readings of ``data_version()`` (an
    unknown reading counts as none)."""
    return before is not None and seen is not None and before != seen


def _set_soon(loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: the loop ended anyway
        loop.call_soon_threadsafe(event.set)


class _Watch:
    """What the watcher of a thread loop has handed over so far (kept across an
    interruption of the watcher): the current :class:`~.watched.Handover` and the
    run in flight it last looked at."""

    __slots__ = ("handover", "run")

    def __init__(self) -> None:
        self.handover = Handover()
        self.run: Any = None


class SchedulerWorker:
    """Runs the poll cycle of the reference against a store, dispatching to a sink.

    ``SchedulerWorker(store, sink, config=SchedulerWorkerConfig(), *, clock=None,
    rng=None)``

    - ``store``: any :class:`~hexeract_lite.store.ScheduleStore`.
    - ``sink``: a :class:`~hexeract_lite.sinks.ScheduleSink`, or a plain function /
      coroutine function taking the message (wrapped in :class:`CallableSink`).
    - ``clock``: where "now" comes from for claims, lease checks and cron instants;
      by default the store's own ``clock`` (the system clock for a store without one).
    - ``rng``: the random source of the retry jitter, anything with
      ``uniform(a, b)`` (default: a fresh :class:`random.Random`); pass a seeded one
      for reproducible delays.
    - ``hooks``: callables each called with every :mod:`~hexeract_lite.hooks` event
      (delivered, failed, dead-lettered, released, lease lost, swept, malformed row
      dead-lettered, store error backed off) once the batch is settled; a hook that
      raises is logged and never changes what is delivered or settled.
    - ``propagate_errors`` (the test mode): when True, a cycle in which a dispatch
      failed settles the whole batch as usual (retry or dead letter), then re-raises
      the first failure's exception from :meth:`run_once`, :meth:`run` and
      :meth:`run_async` (a timeout as :class:`TimeoutError`, an abandoned or bad
      return as :class:`~hexeract_lite.errors.DispatchError`), so a failing assertion
      in a handler fails the test.
    - ``retention``: off (None) by default; a timedelta prunes delivered and cancelled
      rows that ended longer ago than that, at the first cycle and then hourly
      (:class:`~hexeract_lite.upkeep.Retention`; dead letters are kept).

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
        self.hooks: tuple[Hook, ...] = check_hooks(hooks)
        self._retention = None if retention is None else Retention(retention)
        self._busy = False
        self._next_sweep = -math.inf  # monotonic: the loops' next sweep (_sweep_due)
        self.propagate_errors = propagate_errors
        self._propagating: BaseException | None = None
        self.store = store
        self.sink: ScheduleSink = sink  # type: ignore[assignment]
        self.config = config
        self.clock: Clock = clock if clock is not None else store.clock
        self._rng: RandomSource = rng if rng is not None else random.Random()
        self._retry = RetryPolicy.from_config(config)
        self._data_version: Callable[[], int | None] | None = (
            store.data_version
            if type(store).data_version is not ScheduleStore.data_version
            else None
        )
        self._changes: ChangeSignal = store.changes
        self._aborting = threading.Event()
        timeout = config.dispatch_timeout.total_seconds()
        if isinstance(self.sink, TransactionalSink):
            self.sink = self.sink.bind(store, self.clock, self._retry, timeout)
            # the sink stops its own handler at the timeout; this is the backstop
            timeout += TRANSACTIONAL_GRACE_S
        self._runner = SinkRunner(self.sink, timeout, self._aborting)
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
        settlement = settlement_for(occurrence, result, self.clock.now(), self._retry, self._rng)
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
        counts = _Counts()
        outcome = self._settled(occurrence, settlement, ok, DispatchResult.failed(error), counts)
        call_hooks(self.hooks, counts.events)
        return outcome

    # -- one cycle -----------------------------------------------------------------------

    def run_once(self) -> CycleReport:
        """Run exactly one poll cycle (see the module docstring) and report its counts.

        Store errors propagate (nothing is retried here); :meth:`run` is the loop that
        backs off and carries on. With ``propagate_errors``, a failed dispatch's
        exception is raised once the batch is settled.
        """
        try:
            return self._cycle(self._aborting.is_set)
        finally:
            self._aborting.clear()

    def _cycle(self, stopping: Callable[[], bool]) -> CycleReport:
        """The cycle of :meth:`run_once`; ``stopping`` is checked at each occurrence's
        turn, on the helper thread."""
        return self._carried_cycle(stopping)[0]

    def _carried_cycle(
        self,
        stopping: Callable[[], bool],
        carry: _Carry | None = None,
        keep: bool = False,
        watcher: Callable[[], None] | None = None,
        resume: Resume | None = None,
    ) -> tuple[CycleReport, _Carry | None]:
        """The cycle of the thread loop (and of :meth:`run_once`, with neither ``carry``
        nor ``keep``).

        ``carry``: the previous cycle's settlement, still to write: written with this
        cycle's claim (:meth:`_settle_and_claim`). ``keep``: a full batch dispatched
        without failure to propagate, interruption or stop is not settled here but
        returned as the next cycle's ``carry`` (the loop settles it if no cycle
        follows). ``watcher``: dispatch on this thread, a watched loop thread
        (:mod:`hexeract_lite.watched`; else on the helper thread). ``resume``: no claim,
        but the rest of a batch the watcher took over from an abandoned loop thread."""
        if resume is None:
            counts = _Counts()
            batch = self._claim(counts, carry, paced=watcher is not None)
            done: list[DispatchResult] = []
        else:
            batch, done, counts = list(resume.batch), resume.results, resume.counts
        if batch:
            results, interruption = self._dispatch(batch, done, counts, stopping, watcher)
            planned = self._plan_settlement(batch, results, counts)
            if keep and self._may_carry(batch, planned, interruption, counts, stopping):
                return counts.report(), _Carry(planned, counts)
            self._settle_planned(planned, counts)
            if interruption is not None:
                raise interruption
            self._propagate(counts)
        return counts.report(), None

    def _dispatch(
        self,
        batch: list[LeasedOccurrence],
        done: list[DispatchResult],
        counts: _Counts,
        stopping: Callable[[], bool],
        watcher: Callable[[], None] | None,
    ) -> tuple[list[DispatchResult], Interruption]:
        """Step 3 for the items of ``batch`` after the ``done`` ones: on the helper
        thread, or on this one when it is a watched loop thread (``watcher``)."""
        rest = batch[len(done) :]
        if not rest:
            return done, None
        turn = functools.partial(take_turn, self.clock, stopping)
        if watcher is None:
            results, interruption = self._runner.run_batch(rest, turn)
        else:
            context = Resume(batch, done, counts)
            results, interruption = self._runner.run_batch_here(rest, turn, watcher, context), None
        return (done + results if done else results), interruption

    def _may_carry(
        self,
        batch: list[LeasedOccurrence],
        planned: list[_Planned],
        interruption: BaseException | None,
        counts: _Counts,
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

    def _propagate(self, counts: _Counts) -> None:
        """The test mode: raise the cycle's first dispatch failure (already settled)."""
        if self.propagate_errors and counts.failure is not None:
            self._propagating = counts.failure
            raise counts.failure

    async def _cycle_async(
        self, stopping: Callable[[], bool], carry: _Carry | None, keep: bool
    ) -> tuple[CycleReport, _Carry | None]:
        """The same cycle on an event loop: store calls in a thread, the sink awaited;
        ``carry`` and ``keep`` as for :meth:`_carried_cycle`."""
        counts = _Counts()
        batch = await asyncio.to_thread(self._claim, counts, carry, True)
        if batch:
            turn = functools.partial(take_turn, self.clock, stopping)
            results, interruption = await self._runner.run_batch_async(batch, turn)
            planned = self._plan_settlement(batch, results, counts)
            if keep and self._may_carry(batch, planned, interruption, counts, stopping):
                return counts.report(), _Carry(planned, counts)
            await asyncio.to_thread(self._settle_planned, planned, counts)
            if interruption is not None:
                raise interruption
            self._propagate(counts)
        return counts.report(), None

    def _claim(
        self, counts: _Counts, carry: _Carry | None = None, paced: bool = False
    ) -> list[LeasedOccurrence]:
        """Steps 1 and 2 of the cycle: the sweep, then the claim (with ``carry``, the
        previous cycle's settlement written in the same transaction). ``paced`` (the
        loops): the sweep only when :meth:`_sweep_due`."""
        try:
            if self._retention is not None and self._retention.is_due():
                if carry is not None:  # settled first: a long prune must not outlast its leases
                    held, carry = carry, None
                    self._settle_planned(held.planned, held.counts)
                self._retention.run_if_due(self.store)
            if not paced or self._sweep_due():
                counts.swept = self.store.dead_letter_exhausted()
        except BaseException:
            if carry is not None:  # settle it on its own, as an unfused cycle would have
                self._settle_planned(carry.planned, carry.counts)
            raise
        if counts.swept:
            log.warning("sweep dead-lettered %d occurrence(s) left exhausted", counts.swept)
            call_hooks(self.hooks, [Swept(count=counts.swept)])
        cfg = self.config
        batch: list[LeasedOccurrence] = []
        try:
            with collecting_malformed() as malformed:
                if carry is None:
                    batch = self.store.claim_due(self.clock.now(), cfg.batch_size, cfg.lease)
                else:
                    batch = self._settle_and_claim(carry)
        finally:
            found: list[WorkerEvent] = [
                MalformedDeadLettered(schedule=s, reason=r) for s, r in malformed
            ]
            if batch:  # told with the batch's settlement, not while its leases run
                counts.events[:0] = found
            else:
                call_hooks(self.hooks, found)
        counts.claimed = len(batch)
        if self._busy and not batch:
            checkpoint_after_burst(self.store)
        self._busy = bool(batch)
        return batch

    def _sweep_due(self) -> bool:
        """In the loops, the sweep runs at most once per ``poll_interval``: a busy loop
        claims every millisecond or so, and what it sweeps (occurrences a crashed
        worker left on their last attempt, found once their lease has run out) can
        wait that long."""
        now = time.monotonic()
        if now < self._next_sweep:
            return False
        self._next_sweep = now + self.config.poll_interval.total_seconds()
        return True

    def _settle_and_claim(self, carry: _Carry) -> list[LeasedOccurrence]:
        """The previous batch's settlement and this cycle's claim in one store call.

        If that call fails, nothing of it was recorded (a store that fuses them
        applies all or nothing): the settlement is written on its own (as an unfused
        cycle writes it; if that fails too, the batch waits out its lease), then the
        claim is made on its own."""
        planned, cfg = carry.planned, self.config
        settlements = [settlement for _, settlement, _ in planned]
        try:
            oks, batch = self.store.settle_and_claim(
                settlements, self.clock.now(), cfg.batch_size, cfg.lease
            )
        except Exception as exc:
            log.warning(
                "settling %d occurrence(s) with the next claim failed; settling them alone: %s",
                len(planned),
                error_summary(error_text(exc)),
            )
            self._settle_planned(planned, carry.counts)
            return self.store.claim_due(self.clock.now(), cfg.batch_size, cfg.lease)
        except BaseException:
            _warn_left_to_expiry(len(planned))
            raise
        self._settled_batch(planned, oks, carry.counts)
        return batch

    def _plan_settlement(
        self, batch: list[LeasedOccurrence], results: list[DispatchResult], counts: _Counts
    ) -> list[_Planned]:
        """Step 4's plan: the settlement of each dispatch result (those a transactional
        sink acknowledged itself, and skipped ones, are counted here instead)."""
        now = self.clock.now()
        planned: list[_Planned] = []
        for occ, result in zip(batch, results, strict=True):
            if result.kind is ResultKind.FAILED and counts.failure is None:
                counts.failure = result.exception()
            if isinstance(result, Acknowledged):  # recorded with the handler's writes
                counts.add(self._settled(occ, result.settlement, result.applied, result, counts))
                continue
            settlement = settlement_for(occ, result, now, self._retry, self._rng)
            if settlement is None:
                counts.add(DispatchOutcome.SKIPPED)
            else:
                planned.append((occ, settlement, result))
        return planned

    def _settle_planned(self, planned: list[_Planned], counts: _Counts) -> None:
        """Step 4: the batch settled in one :meth:`~ScheduleStore.settle`. If the store
        raises, nothing of the batch was recorded: every occurrence waits out its lease
        and is delivered again (at-least-once)."""
        if not planned:
            if counts.events:  # malformed rows, transactional acknowledgements
                call_hooks(self.hooks, counts.events)
            return
        try:
            oks = self.store.settle([settlement for _, settlement, _ in planned])
        except BaseException:
            _warn_left_to_expiry(len(planned))
            call_hooks(self.hooks, counts.events)  # what was recorded before the settlement
            raise
        self._settled_batch(planned, oks, counts)

    def _settled_batch(self, planned: list[_Planned], oks: list[bool], counts: _Counts) -> None:
        """A recorded settlement: each item logged and counted, then the hooks told."""
        for (occ, settlement, result), ok in zip(planned, oks, strict=True):
            counts.add(self._settled(occ, settlement, ok, result, counts))
        call_hooks(self.hooks, counts.events)

    def _settled(
        self,
        occ: LeasedOccurrence,
        settlement: Settlement,
        ok: bool,
        result: DispatchResult,
        counts: _Counts,
    ) -> DispatchOutcome:
        """Log one recorded settlement, note its hook event and return its outcome."""
        outcome = outcome_of(settlement, ok)
        if self.hooks:
            counts.events.append(
                settlement_event(occ, settlement, outcome, result, self.clock.now())
            )
        raised = result.error if isinstance(result.error, BaseException) else None
        if raised is not None and raised.__traceback__ is None:
            raised = None  # made by the worker (a timeout, say): no traceback to show
        if outcome is DispatchOutcome.LEASE_LOST:
            self._log(
                logging.WARNING,
                "lease lost: could not record %(wanted)s; another worker owns the occurrence now",
                occ,
                wanted=outcome_of(settlement).value,
            )
        elif outcome is DispatchOutcome.DELIVERED or outcome is DispatchOutcome.RESCHEDULED:
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
                exc_info=raised,
                error=error_summary(settlement.error),
                retry_in=settlement.retry_in.total_seconds(),
            )
        elif outcome is DispatchOutcome.DEAD_LETTERED:
            self._log(
                logging.ERROR,
                "dead-lettered after %(attempt)d/%(max_attempts)d attempts: %(error)s",
                occ,
                exc_info=raised,
                error=error_summary(settlement.error),
            )
        else:
            self._log(logging.INFO, "released undispatched: the worker is stopping", occ)
        return outcome

    def _backed_off(self, pacer: Pacer, exc: Exception) -> float:
        """A store error in the loop: re-raise the test mode's failure, else the
        back-off in seconds (told to the hooks)."""
        if exc is self._propagating:
            self._propagating = None
            raise exc
        delay = pacer.after_error(exc)
        call_hooks(self.hooks, [StoreErrorBackedOff(error=exc, backoff=timedelta(seconds=delay))])
        return delay

    def _log(
        self,
        level: int,
        template: str,
        occ: LeasedOccurrence,
        *,
        exc_info: BaseException | None = None,
        **fields: object,
    ) -> None:
        log_occurrence(self.clock, level, template, occ, exc_info=exc_info, **fields)

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
        if self._changes is not None:
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
        if isinstance(self.sink, BoundTransactionalSink):
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

    # -- the thread loop -----------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        """Poll until ``stop`` is set (forever without one); returns when the loop ends.

        The loop runs on its own thread (named after the calling one, ``-loop`` added),
        which calls the sink and the hooks; the calling thread watches it (see
        :mod:`hexeract_lite.watched`): it gives up on a call past ``dispatch_timeout``
        and a new loop thread goes on, and it raises what ended the loop.

        After a cycle that claimed a full batch it goes again at once, or after
        ``min_cycle_delay`` while other connections write to the store (see
        :class:`SchedulerWorkerConfig`); after any other cycle it sleeps until the
        store's next due instant, at most ``poll_interval`` at a time, waking at once
        when this process changes the store (``store.changes``; the SQLite store on
        Linux and the PostgreSQL store also signal other processes' commits there) and,
        with a store that has ``data_version()`` (SQLite), noticing other processes'
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
            self._watched_loop(stop)
        finally:
            self._leave()

    def _watched_loop(self, stop: threading.Event) -> None:
        """:meth:`_loop` on a :class:`~.watched.LoopThread`, watched from this thread:
        a call past its ``dispatch_timeout``, or one in flight when the worker is
        interrupted (:meth:`abort`, or any exception raised in this thread, such as a
        :class:`KeyboardInterrupt`, wherever it lands), is given up on, and a new loop
        thread goes on with the rest of its batch. After an interruption it still
        waits for the loop to settle and end, then raises it; a second one is raised
        at once (the loop, aborted, ends on its own)."""
        wake = Wake()
        name = f"{threading.current_thread().name}-loop"
        target = functools.partial(self._loop, stop, wake.set)
        context = contextvars.copy_context()  # hooks ran in this thread's context
        watch = _Watch()
        interruption: Interruption = None
        while True:
            try:
                loop = self._watch(watch, (target, name, wake, context), interruption)
                break
            except BaseException as exc:  # e.g. KeyboardInterrupt: as abort(), then raised
                if interruption is not None:
                    self.abort()
                    raise  # a second one: stop waiting for the loop
                interruption = exc
                self.abort()
        if interruption is not None:
            raise interruption
        if loop.error is not None:
            raise loop.error

    def _watch(
        self,
        watch: _Watch,
        loops: tuple[Callable[[Resume | None], None], str, Wake, contextvars.Context],
        interruption: Interruption,
    ) -> LoopThread:
        """Until the loop ends (returned): start the loop thread of the current
        handover, sleep until the deadline of its call in flight, and take its batch
        over (a new :class:`~.watched.Handover`) when that call ran past it or was
        interrupted. Interrupted anywhere, it carries on from ``watch`` when called
        again."""
        runner, (target, name, wake, context) = self._runner, loops
        while True:
            handover, run = watch.handover, watch.run
            if run is not None and run.given_up is not None and handover.source is not run:
                taken = run.context  # abandoned: the rest of its batch goes to a new thread
                assert isinstance(taken, Resume)
                results = taken.results + runner.given_up_results(run, interruption)
                watch.handover = Handover(Resume(taken.batch, results, taken.counts), run)
                abandoned = handover.owner
                runner.log_given_up(run, name if abandoned is None else abandoned.thread.name)
                continue
            loop = handover.owner
            if loop is None:  # not started, or not yet running
                if not handover.launched:
                    LoopThread(target, name, wake, handover, context).start()
                    handover.launched = True
                wake.wait(STOP_CHECK_S)  # set when it has taken the handover
                continue
            if loop.ended:
                return loop
            left = runner.timeout
            run = runner.watched_run()
            if run is not None:
                watch.run = run
                given = runner.give_up(run)
                if given is None:
                    continue  # abandoned: taken over above
                left = given
            wake.wait(left)

    def _loop(
        self,
        stop: threading.Event,
        watcher: Callable[[], None] | None = None,
        resume: Resume | None = None,
    ) -> None:
        self._loop_thread.on = True
        changes = self._changes
        pacer = Pacer(self.clock, self.config, self._data_version is not None)
        fuse = self.store.fuses_settle_and_claim
        carry: _Carry | None = None  # a full batch's settlement, written with the next claim
        seen: int | None = None
        try:
            while not stop.is_set() or resume is not None:
                version = changes.version() if changes is not None else 0
                seen, before = self._read_data_version(), seen
                try:
                    pending, carry, resumed, resume = carry, None, resume, None
                    report, carry = self._carried_cycle(
                        stop.is_set, pending, fuse, watcher, resumed
                    )
                    pause = pacer.after_cycle(report.claimed, _moved(before, seen))
                    if pause is not None:
                        if pause > 0:
                            carry = self._before_pause(carry, pause)
                            stop.wait(pause)
                        continue
                    plan = pacer.idle_plan(self._next_wakeup(), report.claimed)
                    while not stop.is_set():
                        timeout = plan.next_timeout(STOP_CHECK_S)
                        if timeout is None:
                            break
                        if changes is not None:
                            if changes.wait(version, timeout):
                                break
                        elif stop.wait(timeout):
                            break
                        if self._committed_since(seen):
                            break
                except Exception as exc:
                    stop.wait(self._backed_off(pacer, exc))
        finally:
            if carry is not None:  # no cycle follows: write it on its own
                self._settle_left(carry)

    def _before_pause(self, carry: _Carry | None, pause: float) -> _Carry | None:
        """The settlement to hold over a ``min_cycle_delay`` pause: None (written now, on
        its own) when the held batch's leases would run out during or soon after it."""
        if carry is not None and carry.lapses_within(self.clock.now(), pause):
            self._settle_left(carry)
            return None
        return carry

    def _settle_left(self, carry: _Carry) -> None:
        """Write a held full batch's settlement on its own, when no cycle follows or a
        pause comes first (a failure is logged; the batch then waits out its lease)."""
        try:
            self._settle_planned(carry.planned, carry.counts)
        except Exception as exc:
            log.warning("settling the held batch failed: %s", error_summary(error_text(exc)))

    def _next_wakeup(self) -> datetime | None:
        return self.store.next_wakeup()

    def _read_data_version(self) -> int | None:
        if self._data_version is None:
            return None
        try:
            version = self._data_version()
            return None if version is None else int(version)
        except Exception:  # unknown: the next comparison differs and a cycle runs
            return None

    def _committed_since(self, seen: int | None) -> bool:
        """With a ``data_version()`` store: did any connection commit since ``seen``."""
        return self._data_version is not None and self._read_data_version() != seen

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

    # -- asyncio -------------------------------------------------------------------------

    async def run_async(self, stop: asyncio.Event | None = None) -> None:
        """The :meth:`run` loop as a coroutine, for asyncio applications.

        Store calls run off the event loop (``asyncio.to_thread``). An async sink is
        awaited on the loop under ``dispatch_timeout`` (cancelled when it runs out); a
        synchronous sink runs on the worker's helper thread (as under :meth:`run_once`), and an
        awaitable it returns is awaited on the loop within the same timeout.

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
            await self._loop_async(stop)
        finally:
            self._leave()

    async def _loop_async(self, stop: asyncio.Event) -> None:
        changes = self._changes
        pacer = Pacer(self.clock, self.config, self._data_version is not None)
        fuse = self.store.fuses_settle_and_claim
        carry: _Carry | None = None  # a full batch's settlement, written with the next claim
        seen: int | None = None
        try:
            while not stop.is_set():
                version = changes.version() if changes is not None else 0
                seen, before = await asyncio.to_thread(self._read_data_version), seen
                try:
                    pending, carry = carry, None
                    report, carry = await self._cycle_to_the_end(stop, pending, fuse)
                    pause = pacer.after_cycle(report.claimed, _moved(before, seen))
                    if pause is not None:
                        if pause > 0:
                            carry = await asyncio.to_thread(self._before_pause, carry, pause)
                            await wait_event(stop, pause)
                        continue
                    hint = await asyncio.to_thread(self._next_wakeup)
                    plan = pacer.idle_plan(hint, report.claimed)
                    while not stop.is_set():
                        timeout = plan.next_timeout(math.inf)
                        if timeout is None:
                            break
                        if await wait_change_or_stop(changes, stop, version, timeout):
                            break
                        if await asyncio.to_thread(self._committed_since, seen):
                            break
                except Exception as exc:  # the hooks are told off the event loop
                    await wait_event(stop, await asyncio.to_thread(self._backed_off, pacer, exc))
        finally:
            if carry is not None:  # no cycle follows (the thread finishes it if cancelled)
                await asyncio.to_thread(self._settle_left, carry)

    async def _cycle_to_the_end(
        self, stop: asyncio.Event, carry: _Carry | None, keep: bool
    ) -> tuple[CycleReport, _Carry | None]:
        """One cycle that, once it has claimed, finishes even if we are cancelled (and
        then settles what it would have carried)."""
        halted = False

        def stopping() -> bool:
            return halted or stop.is_set() or self._aborting.is_set()

        cycle = asyncio.ensure_future(self._cycle_async(stopping, carry, keep))
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
            error = None if cycle.cancelled() else cycle.exception()
            if isinstance(error, Exception):  # a KeyboardInterrupt propagates on its own
                log.warning("cycle interrupted by cancellation failed", exc_info=error)
            elif error is None and not cycle.cancelled():
                left = cycle.result()[1]
                if left is not None:  # the thread finishes it even if cancelled again
                    await asyncio.to_thread(self._settle_left, left)
            raise


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
