"""Dispatch: handing claimed occurrences to a sink, one at a time, each under a timeout.

:class:`SinkRunner` is the worker's dispatcher, for both of its ways of running:

- :meth:`SinkRunner.run_batch` (``run_once``): a whole batch is handed to a helper
  thread at once (one hand-off per batch, not one per occurrence), which calls
  ``dispatch`` for each occurrence in order; an awaitable it returns is run to
  completion on a private event loop on that thread. Each call has its own
  ``dispatch_timeout``, counted from the end of the call before it.
- :meth:`SinkRunner.run_batch_here` (the thread loop, :mod:`hexeract_lite.watched`):
  the same calls on the loop's own thread, which another thread watches
  (:meth:`SinkRunner.give_up`), so a batch costs no hand-off between threads; each
  call's ``dispatch_timeout`` counts from when it is handed to the sink (the loop's own
  code before it is never a timed-out dispatch); a call given up on leaves its loop
  thread behind instead.
- :meth:`SinkRunner.run_batch_async` (``run_async``): an async sink is awaited on the
  running loop under the timeout (cancelled when it runs out); a sync one runs on the
  helper thread, and an awaitable it returns is awaited on the loop within the same
  timeout.

Python cannot kill a thread: a sync sink still running at the timeout is
**abandoned**. It keeps running in the background until it returns on its own (its
result is discarded) and the batch goes on on a fresh helper thread, so a sink that
can hang must tolerate one call overlapping the next.

Before each call, the occurrence's *turn* (:func:`take_turn`) decides whether it is
dispatched at all: not when the worker is stopping (:data:`~.settle.NOT_DISPATCHED`)
nor when its lease has run out (:data:`~.settle.LEASE_EXPIRED`). Every occurrence gets
one :class:`~.settle.DispatchResult`; a sink's exception, whatever its type, is a
failed dispatch. A ``KeyboardInterrupt`` or ``SystemExit`` raised on the event loop,
or in the thread waiting for a batch, is also handed back to the caller, to raise once
the batch is settled; nothing more of the batch is dispatched.

:meth:`SinkRunner.interrupt` (from any thread) gives up on the call in flight: it is
recorded as failed, and the rest of the batch is not dispatched.
(Over 700 lines: the three ways of dispatching share one runner's lock, timeout, helper
thread and the run in flight that an interruption gives up on.)
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import logging
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence

from ._log import package_logger
from .clock import Clock
from .errors import DispatchError
from .message import ScheduledMessage
from .settle import LEASE_EXPIRED, NOT_DISPATCHED, SUCCEEDED, DispatchResult, missed_result
from .sinks import ScheduleSink, _bad_return, _discard, is_async_sink
from .snapshot import LeasedOccurrence

__all__ = ["LoopAbandoned", "SinkRunner", "Turn", "log_occurrence", "take_turn"]

log = package_logger("hexeract_lite.worker")

Turn = Callable[[LeasedOccurrence], DispatchResult | None]
"""Decides an occurrence's turn: a result without dispatching it, or None: dispatch it."""

Interruption = BaseException | None
"""What stopped a batch part-way and must be raised once it is settled (or None)."""

_ABANDONED_THREAD = "; its thread was abandoned and keeps running until the sink returns"
_ABANDONED_LOG = "%s; its thread %r is abandoned and keeps running until the sink returns"


class LoopAbandoned(BaseException):
    """Raised on a loop thread whose batch its watcher took over (see
    :meth:`SinkRunner.run_batch_here`): the thread ends without recording anything.
    A BaseException, so that no ``except Exception`` on the way stops it."""


_EXTRA = ("schedule_id", "occurrence_id", "attempt", "lag")


def log_occurrence(
    clock: Clock,
    level: int,
    template: str,
    occ: LeasedOccurrence,
    *,
    exc_info: BaseException | None = None,
    **fields: object,
) -> None:
    """Log about one occurrence: ids, attempt and lag in the text and as ``extra``, and
    the traceback of ``exc_info`` when given. The occurrence id (a SHA-1) is only
    derived when the level is enabled."""
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
        exc_info=exc_info,
    )


def take_turn(
    clock: Clock, stopping: Callable[[], bool], occ: LeasedOccurrence
) -> DispatchResult | None:
    """An occurrence's turn in its batch: :data:`NOT_DISPATCHED` when ``stopping()``,
    :data:`LEASE_EXPIRED` when its lease has run out, a ``MISSED`` result when it is
    found, at its first attempt, later than its schedule's misfire grace, else None
    (dispatch it)."""
    if stopping():
        return NOT_DISPATCHED
    now = clock.now()
    if occ.leased_until > now:
        missed = missed_result(occ, now)
        if missed is not None:
            log_occurrence(clock, logging.WARNING, "%(reason)s", occ, reason=missed.error)
            return missed
        log_occurrence(
            clock, logging.DEBUG, "dispatching attempt %(attempt)d/%(max_attempts)d", occ
        )
        return None
    log_occurrence(
        clock,
        logging.WARNING,
        "skipped: its lease ran out at %(leased_until)s before its turn in the batch",
        occ,
        leased_until=occ.leased_until.isoformat(),
    )
    return LEASE_EXPIRED


def abandoned_error() -> DispatchError:
    """The failure recorded for a dispatch given up by :meth:`SinkRunner.interrupt`."""
    return DispatchError("the worker was aborted while the sink ran; the dispatch was abandoned")


# -- calling the sink --------------------------------------------------------------------


async def _await_value(value: Awaitable[object]) -> object:
    return await value


def _call_blocking(sink: ScheduleSink, message: ScheduledMessage) -> None:
    """On a helper thread, for :meth:`SinkRunner.run_batch`: dispatch, await if need be."""
    result: object = sink.dispatch(message)
    if result is not None and inspect.isawaitable(result):
        # A coroutine from a sync run: run it to completion here, on a private loop.
        result = asyncio.run(_await_value(result))
    if result is not None:
        raise _bad_return("sink", sink, result)


def _call_raw(sink: ScheduleSink, message: ScheduledMessage) -> object:
    """On a helper thread, for the asyncio path: an awaitable goes back to the loop."""
    return sink.dispatch(message)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _notify_loop(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(_resolve, fut)


# -- the helper thread -------------------------------------------------------------------

_PENDING, _COMPLETED, _ABANDONED = 0, 1, 2


class _Job:
    """One sink call handed to a helper thread (the asyncio path); ``on_done`` tells
    the loop when it finished."""

    __slots__ = ("_fn", "_on_done", "_state", "_state_lock", "error", "result")

    def __init__(self, fn: Callable[[], object], on_done: Callable[[], None]) -> None:
        self._fn = fn
        self._on_done = on_done
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
        self._on_done()

    def abandon(self) -> bool:
        """Give up on the call unless it already finished; True when abandoned."""
        with self._state_lock:
            if self._state == _COMPLETED:
                return False
            self._state = _ABANDONED
            return True


class _Wait(enum.Enum):
    """How :meth:`_BatchRun.wait` ended."""

    FINISHED = "finished"
    TIMED_OUT = "timed out"
    INTERRUPTED = "interrupted"


class _BatchRun:
    """A batch of sink calls handed to a helper thread at once.

    The helper thread takes each item's turn and calls the sink for those to
    dispatch; the waiting thread sleeps until all are done. :meth:`wait` wakes when the
    call in flight would run out of time and gives up on it (and on the rest of this
    run) only if that very call has not finished by then. ``results`` gets one
    :class:`DispatchResult` per finished item. It holds no reference to the worker, so
    a run left behind by a hung sink does not keep the worker alive.
    """

    __slots__ = (
        "_abandoned",
        "_call_started",
        "_done",
        "_interrupted",
        "_items",
        "_lock",
        "_released",
        "_sink",
        "_started",
        "_turn",
        "_watcher",
        "context",
        "given_up",
        "in_flight",
        "results",
    )

    def __init__(
        self,
        sink: ScheduleSink,
        items: Sequence[LeasedOccurrence],
        turn: Turn,
        watcher: Callable[[], None] | None = None,
        context: object = None,
    ) -> None:
        self._sink = sink
        self._items = items
        self._turn = turn
        self._watcher = watcher
        """Run on the thread that calls :meth:`run` (a watched loop): wakes the watcher
        on :meth:`interrupt` (nothing else: it sleeps until the call's deadline)."""
        self.context = context
        """What the watcher needs to take the rest of the cycle over (the worker's)."""
        self._lock = threading.Lock()
        self._done = threading.Lock()
        self._done.acquire()
        self._released = False
        self._abandoned = False
        self._interrupted = False
        self._started = time.monotonic()
        self._call_started = self._started
        """When the call in flight was handed to the sink (its deadline, watched)."""
        self.in_flight = False
        """True while an item has been handed to the sink and has not returned."""
        self.given_up: _Wait | None = None
        """How :meth:`give_up` abandoned the run (set with the abandonment, under the
        lock), so that a watcher interrupted right after can still take it over."""
        self.results: list[DispatchResult] = []

    def run(self) -> None:
        """On the helper thread: every item, in order, until done or abandoned."""
        sink, turn, lock, results = self._sink, self._turn, self._lock, self.results
        in_transaction = getattr(sink, "dispatch_occurrence", None)
        for occ in self._items:
            try:
                result = turn(occ)
            except BaseException as exc:  # e.g. a clock that fails: this item fails
                result = DispatchResult.failed(exc)
            if result is None:
                began = time.monotonic()
                with lock:
                    if self._abandoned:
                        return  # given up before this item was handed to the sink
                    self.in_flight = True
                    self._call_started = began
                try:
                    if in_transaction is not None:  # a transactional sink acknowledges itself
                        result = in_transaction(occ)
                    else:
                        _call_blocking(sink, occ.message)
                        result = SUCCEEDED
                except BaseException as exc:  # a sink's SystemExit is a failed dispatch too
                    result = DispatchResult.failed(exc)
                result = result.took(time.monotonic() - began)
            with lock:
                if self._abandoned:
                    return  # the worker gave up on this call and took the rest elsewhere
                results.append(result)
                self.in_flight = False
                self._started = time.monotonic()
        if self._watcher is None:
            self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._done.release()

    def interrupt(self) -> None:
        """From any thread: make :meth:`wait` return :data:`_Wait.INTERRUPTED` now (or
        the watcher's :meth:`give_up`). A watched run's flag is set without its lock:
        from a signal handler, the watching thread may hold it (in :meth:`give_up`),
        which then sees the flag at its next look, woken by ``watcher``."""
        if self._watcher is not None:
            self._interrupted = True
            self._watcher()
            return
        with self._lock:
            self._interrupted = True
        self._wake()

    def give_up(self, timeout: float) -> tuple[_Wait | None, float]:
        """From the watcher of a run on a loop thread: abandon the run now if it was
        interrupted while unfinished (:data:`_Wait.INTERRUPTED`) or if the call in
        flight has not returned within ``timeout`` seconds of being handed to the sink
        (:data:`_Wait.TIMED_OUT`); else ``(None, seconds until that deadline)`` (with
        no call in flight, ``timeout``: a call handed over meanwhile ends later). Once
        abandoned, the loop thread hands nothing more to the sink and records nothing:
        the watcher owns the rest of the batch (``results`` is final)."""
        with self._lock:
            if self._abandoned or len(self.results) == len(self._items):
                return None, timeout
            if self._interrupted:
                self._abandoned = True
                self.given_up = _Wait.INTERRUPTED
                return _Wait.INTERRUPTED, 0.0
            if not self.in_flight:  # the loop's own code (a turn, a log handler) is slow
                return None, timeout
            left = self._call_started + timeout - time.monotonic()
            if left <= 0:
                self._abandoned = True
                self.given_up = _Wait.TIMED_OUT
                return _Wait.TIMED_OUT, 0.0
            return None, left

    @property
    def abandoned(self) -> bool:
        with self._lock:
            return self._abandoned

    def wait(self, timeout: float) -> _Wait:
        """Block until every item finished, until one call ran past ``timeout`` seconds,
        or until :meth:`interrupt`. Unless every item finished, the run is abandoned:
        ``results`` keeps the items finished before, ``in_flight`` tells whether the
        next one was handed to the sink."""
        while True:
            with self._lock:
                finished, started = len(self.results), self._started
            remaining = started + timeout - time.monotonic()
            if remaining > 0:
                self._done.acquire(timeout=min(remaining, threading.TIMEOUT_MAX))
            with self._lock:
                if len(self.results) == len(self._items):
                    return _Wait.FINISHED
                if self._interrupted:
                    self._abandoned = True
                    return _Wait.INTERRUPTED
                if len(self.results) == finished and time.monotonic() >= started + timeout:
                    self._abandoned = True
                    return _Wait.TIMED_OUT
            # another call finished meanwhile: wait on for the one now in flight

    def abandon(self) -> None:
        """Give up on the run (the waiting thread was interrupted): the helper thread
        stops after its call, and hands nothing more to the sink."""
        with self._lock:
            self._abandoned = True


def _helper_main(jobs: queue.SimpleQueue[_Job | _BatchRun | None]) -> None:
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
            target=_helper_main, args=(self._jobs,), name=name, daemon=True
        )
        self.thread.start()
        # When the owner goes away the thread ends too (the finalizer holds no owner).
        self._close = weakref.finalize(owner, self._jobs.put, None)

    def submit(self, job: _Job | _BatchRun) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        """End the thread once its current call (if any) returns."""
        self._close()


# -- the runner --------------------------------------------------------------------------


class SinkRunner:
    """Dispatches batches to ``sink``, each call under ``timeout`` seconds.

    ``aborting`` is the event :meth:`interrupt` is paired with: while it is set, an
    asyncio dispatch that starts is given up at once. The runner owns at most one
    helper thread at a time; :meth:`close` ends it.
    """

    def __init__(self, sink: ScheduleSink, timeout: float, aborting: threading.Event) -> None:
        self.sink = sink
        self.is_async = is_async_sink(sink)
        self._timeout = min(timeout, threading.TIMEOUT_MAX)
        self._aborting = aborting
        self._lock = threading.Lock()
        self._dispatcher: _Dispatcher | None = None
        self._current: _BatchRun | None = None
        self._budget: asyncio.Timeout | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the helper thread

    def _get_dispatcher(self) -> _Dispatcher:
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = _Dispatcher(self, f"hexeract-sink-{id(self):x}")
            return self._dispatcher

    def _drop_dispatcher(self, why: str) -> None:
        """Leave the helper thread to the call it is stuck in; the next call gets a
        fresh one."""
        with self._lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()
            log.warning(_ABANDONED_LOG, why, dispatcher.thread.name)

    def close(self) -> None:
        """End the helper thread once its current call (if any) returns."""
        with self._lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()

    def _timed_out(self, how: str = "") -> TimeoutError:
        return TimeoutError(
            f"the sink did not return within dispatch_timeout ({self._timeout:g} s){how}"
        )

    # -- interrupting

    def interrupt(self) -> None:
        """From any thread: give up on the dispatch in flight, if any (see the module
        docstring). Set ``aborting`` first."""
        with self._lock:
            run, budget, loop = self._current, self._budget, self._loop
        if run is not None:
            run.interrupt()
        if budget is not None and loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing in flight
                loop.call_soon_threadsafe(self._expire, budget, loop)

    def _expire(self, budget: asyncio.Timeout, loop: asyncio.AbstractEventLoop) -> None:
        if budget is self._budget and not budget.expired():
            with contextlib.suppress(RuntimeError):  # already left
                budget.reschedule(loop.time())

    # -- the thread way

    def run_batch(
        self, batch: Sequence[LeasedOccurrence], turn: Turn
    ) -> tuple[list[DispatchResult], Interruption]:
        """Dispatch ``batch`` on the helper thread: one result per occurrence, and the
        exception (e.g. :class:`KeyboardInterrupt`) that interrupted the waiting thread,
        to be raised once the batch is settled. A call past the timeout is a failed
        dispatch (:class:`TimeoutError`) and the rest goes on on a fresh thread."""
        results: list[DispatchResult] = []
        interruption: Interruption = None
        while len(results) < len(batch):
            run = _BatchRun(self.sink, batch[len(results) :], turn)
            with self._lock:
                self._current = run
            try:
                if self._aborting.is_set():
                    run.interrupt()  # nothing of it is handed to the sink
                else:
                    self._get_dispatcher().submit(run)
                state = run.wait(self._timeout)
            except BaseException as exc:  # e.g. KeyboardInterrupt in this thread
                run.abandon()
                interruption, state = exc, _Wait.INTERRUPTED
            finally:
                with self._lock:
                    self._current = None
            results += run.results
            if state is _Wait.FINISHED:
                break
            why = self._thread_lost(run, state)
            if why is not None:
                self._drop_dispatcher(why)
            results += self._given_up_tail(run, state, interruption)
        return results, interruption

    def _thread_lost(self, run: _BatchRun, state: _Wait) -> str | None:
        """Why the thread running ``run`` is left behind now that it was given up on
        (``state``): a call ran past the timeout, or one was in flight at the
        interruption; None when no call was in flight (the thread is free)."""
        if state is _Wait.TIMED_OUT:
            return self._why_abandoned(timed_out=True)
        return self._why_abandoned() if run.in_flight else None

    def _given_up_tail(
        self, run: _BatchRun, state: _Wait, interruption: Interruption
    ) -> list[DispatchResult]:
        """The results that follow ``run.results`` once ``run`` was given up on
        (``state``): after a timeout, the call that ran past it, failed (the rest of
        its items is still to dispatch); after an interruption, the call in flight,
        failed, then every item left, released undispatched."""
        if state is _Wait.TIMED_OUT:
            return [DispatchResult.failed(self._timed_out(_ABANDONED_THREAD), self._timeout)]
        tail: list[DispatchResult] = []
        if run.in_flight:
            error = interruption if interruption is not None else abandoned_error()
            tail.append(DispatchResult.failed(error))
        return tail + [NOT_DISPATCHED] * (len(run._items) - len(run.results) - len(tail))

    # -- the watched way (the thread loop)

    def run_batch_here(
        self,
        batch: Sequence[LeasedOccurrence],
        turn: Turn,
        watcher: Callable[[], None],
        context: object,
    ) -> list[DispatchResult]:
        """Dispatch ``batch`` on this thread, a loop thread watched from another by
        :meth:`give_up` (no hand-off per batch): one result per occurrence.
        ``watcher`` wakes the watching thread (on :meth:`interrupt`); ``context`` is
        kept for it. Raises :class:`LoopAbandoned` when the watcher gave up on the run
        (a call past the timeout, or an interruption): the watcher then owns the rest
        of the batch, and this thread must end without recording anything."""
        run = _BatchRun(self.sink, batch, turn, watcher, context)
        with self._lock:
            self._current = run
        try:
            if not self._aborting.is_set():  # else nothing of it is handed to the sink
                run.run()
        finally:
            with self._lock:
                if self._current is run:
                    self._current = None
        if run.abandoned:
            raise LoopAbandoned
        return run.results + [NOT_DISPATCHED] * (len(batch) - len(run.results))

    def watched_run(self) -> _BatchRun | None:
        """For the thread watching a loop thread: the run in flight on a loop thread
        (:meth:`run_batch_here`), if any; :meth:`give_up` on it says whether to take it
        over now."""
        run = self._current
        return run if run is not None and run._watcher is not None else None

    def give_up(self, run: _BatchRun) -> float | None:
        """Abandon ``run`` now if it was interrupted while unfinished or its call in
        flight ran past the timeout (then None: ``run.given_up`` says how), else the
        seconds until its deadline: look again then (or when woken)."""
        state, left = run.give_up(self._timeout)
        return None if state is not None else left

    @property
    def timeout(self) -> float:
        """``dispatch_timeout`` in seconds (the transactional grace included)."""
        return self._timeout

    def given_up_results(self, run: _BatchRun, interruption: Interruption) -> list[DispatchResult]:
        """The results of a run abandoned by :meth:`give_up` (``run.given_up`` set):
        after a timeout, up to the call that timed out (the rest is still to
        dispatch); after an interruption, one per item (the rest released). Writes
        nothing: the watcher may compute it again."""
        assert run.given_up is not None
        return run.results + self._given_up_tail(run, run.given_up, interruption)

    def log_given_up(self, run: _BatchRun, thread: str) -> None:
        """Log a call in flight that :meth:`give_up` abandoned (as :meth:`run_batch`
        logs it)."""
        assert run.given_up is not None
        why = self._thread_lost(run, run.given_up)
        if why is not None:
            log.warning(_ABANDONED_LOG, why, thread)

    # -- the asyncio way

    async def run_batch_async(
        self, batch: Sequence[LeasedOccurrence], turn: Turn
    ) -> tuple[list[DispatchResult], Interruption]:
        """Dispatch ``batch`` from the running loop: one result per occurrence, and the
        exception to raise once the batch is settled (:class:`KeyboardInterrupt` or
        :class:`SystemExit` from the sink, or the cancellation of this task), after
        which nothing more is dispatched."""
        results: list[DispatchResult] = []
        interruption: Interruption = None
        for occ in batch:
            if interruption is not None:
                result: DispatchResult | None = NOT_DISPATCHED
            else:
                try:
                    result = turn(occ)
                except Exception as exc:  # e.g. a clock that fails: this item fails
                    result = DispatchResult.failed(exc)
            if result is None:
                began = time.monotonic()
                in_transaction = getattr(self.sink, "dispatch_occurrence", None)
                if in_transaction is not None:  # bounded by the sink itself
                    try:
                        done: DispatchResult = await asyncio.to_thread(in_transaction, occ)
                        result = done
                    except asyncio.CancelledError as exc:
                        result, interruption = DispatchResult.failed(exc), exc
                else:
                    result, interruption = await self._dispatch_async(occ.message)
                result = result.took(time.monotonic() - began)
            results.append(result)
        return results, interruption

    async def _dispatch_async(
        self, message: ScheduledMessage
    ) -> tuple[DispatchResult, Interruption]:
        loop = asyncio.get_running_loop()
        started = time.monotonic()  # the loop's time() is time.monotonic() too
        budget = asyncio.timeout_at(started + self._timeout)
        on_loop = self.is_async
        result: object = None
        try:
            async with budget:
                with self._lock:
                    self._budget, self._loop = budget, loop
                if self._aborting.is_set():
                    return NOT_DISPATCHED, None
                if self.is_async:
                    result = self.sink.dispatch(message)
                else:
                    error, result = await self._call_in_thread(loop, message)
                    if error is not None:
                        return DispatchResult.failed(error), None  # raised on the helper thread
                if result is not None and inspect.isawaitable(result):
                    on_loop = True
                    result = await result
        except TimeoutError as exc:
            if not budget.expired():
                return DispatchResult.failed(exc), None  # the sink's own TimeoutError
            if self._aborting.is_set():
                return DispatchResult.failed(abandoned_error()), None
            if on_loop:  # (a call abandoned on the helper thread was logged as such)
                log.warning(
                    "an async sink did not finish within dispatch_timeout (%g s); it was cancelled",
                    self._timeout,
                )
                return DispatchResult.failed(self._timed_out("; it was cancelled")), None
            return DispatchResult.failed(self._timed_out(_ABANDONED_THREAD)), None
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return DispatchResult.failed(exc), exc  # this task is being cancelled
            return DispatchResult.failed(exc), None  # the sink's own CancelledError
        except (KeyboardInterrupt, SystemExit) as exc:
            return DispatchResult.failed(exc), exc
        except BaseException as exc:
            return DispatchResult.failed(exc), None
        finally:
            with self._lock:
                self._budget = None
        if result is not None:
            _discard(result)
            return DispatchResult.failed(_bad_return("sink", self.sink, result)), None
        over = time.monotonic() - started - self._timeout
        if on_loop and over > 0:
            return DispatchResult.failed(self._blocked(over)), None
        return SUCCEEDED, None

    def _blocked(self, over: float) -> TimeoutError:
        log.warning(
            "a sink blocked the event loop %.3f s past dispatch_timeout (%g s)", over, self._timeout
        )
        return TimeoutError(
            f"the sink blocked the event loop for {over:.3f} s past dispatch_timeout"
            f" ({self._timeout:g} s), so it could not be cancelled in time; not counted as"
            " delivered"
        )

    async def _call_in_thread(
        self, loop: asyncio.AbstractEventLoop, message: ScheduledMessage
    ) -> tuple[BaseException | None, object]:
        """Run a sync sink on the helper thread: ``(what it raised, None)`` or ``(None,
        what it returned)``. Cancelled (at the timeout): the call is abandoned."""
        fut: asyncio.Future[None] = loop.create_future()
        job = _Job(
            functools.partial(_call_raw, self.sink, message),
            on_done=functools.partial(_notify_loop, loop, fut),
        )
        self._get_dispatcher().submit(job)
        try:
            await fut
        except asyncio.CancelledError:
            if job.abandon():
                self._drop_dispatcher(self._why_abandoned())
            else:
                _discard(job.result)
            raise
        return job.error, job.result

    def _why_abandoned(self, *, timed_out: bool = False) -> str:
        if not timed_out and self._aborting.is_set():
            return "a dispatch was abandoned: the worker is aborting"
        return f"a sink did not return within dispatch_timeout ({self._timeout:g} s)"
