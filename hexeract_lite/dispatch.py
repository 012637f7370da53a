"""Dispatch: handing claimed occurrences to a sink, one at a time, each under
``dispatch_timeout`` counted from the hand-over. A sync call past it, or interrupted, is
abandoned on its thread; an async one is cancelled. Every occurrence gets one
:class:`~.settle.DispatchResult`."""

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
from .hooks import LoopAbandoned
from .ledger import log_occurrence
from .longrun import DispatchAborted, DispatchHandle, Snooze, current_handle, dispatching
from .message import ScheduledMessage
from .settle import (
    LEASE_EXPIRED,
    NOT_DISPATCHED,
    SUCCEEDED,
    DispatchResult,
    missed_result,
)
from .sinks import OccurrenceSink, ScheduleSink, _bad_return, _discard, is_async_sink
from .snapshot import LeasedOccurrence

__all__ = [
    "BatchRun",
    "SinkRunner",
    "Turn",
    "Wake",
    "take_turn",
]

log = package_logger("hexeract_lite.worker")

Turn = Callable[[LeasedOccurrence], DispatchResult | None]
"""Decides an occurrence's turn: a result without dispatching it, or None: dispatch it."""

Interruption = BaseException | None
"""What stopped a batch part-way and must be raised once it is settled (or None)."""

_ABANDONED_THREAD = "; its thread was abandoned and keeps running until the sink returns"


def take_turn(
    clock: Clock, stopping: Callable[[], bool], occ: LeasedOccurrence
) -> DispatchResult | None:
    """An occurrence's turn: :data:`NOT_DISPATCHED` when stopping, :data:`LEASE_EXPIRED`
    when its lease ran out, a ``MISSED`` result when it is not to be delivered; None:
    dispatch it."""
    if stopping():
        return NOT_DISPATCHED
    now = clock.now()
    if occ.leased_until > now:
        missed = missed_result(occ, now)
        if missed is not None:
            log_occurrence(
                clock, logging.WARNING, "%(reason)s", occ, reason=missed.error, dispatched=False
            )
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


def call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., object], *args: object) -> None:
    """``loop.call_soon_threadsafe(fn, *args)``; nothing once the loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def log_abandoned(why: str, thread: str) -> None:
    log.warning(
        "%s; its thread %r is abandoned and keeps running until the sink returns", why, thread
    )


def abandoned_error() -> DispatchError:
    return DispatchError("the worker was aborted while the sink ran; the dispatch was abandoned")


# -- calling the sink --------------------------------------------------------------------


def _expire(budget: asyncio.Timeout, loop: asyncio.AbstractEventLoop) -> None:
    """On ``loop``: make ``budget`` run out now (a cancellation of what it bounds)."""
    if not budget.expired():
        with contextlib.suppress(RuntimeError):  # already left
            budget.reschedule(loop.time())


async def _cancellable(
    value: Awaitable[object], run: BatchRun, handle: DispatchHandle | None
) -> object:
    """Await ``value`` until it completes, or until ``run`` is given up on or an abort is
    asked for through ``handle``: then it is cancelled."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as budget:
        stop = functools.partial(call_soon, loop, _expire, budget, loop)
        run.cancel = stop
        if handle is not None:
            handle.on_abort(stop)
        try:
            if run.given_up is not None:
                stop()
            return await value
        finally:
            run.cancel = None
            if handle is not None:
                handle.on_abort(None)


def _call_blocking(
    sink: ScheduleSink, message: ScheduledMessage, run: BatchRun, handle: DispatchHandle | None
) -> None:
    """Dispatch on this thread; an awaitable it returns runs here on a private loop,
    cancelled if ``run`` is given up on or an abort is asked for."""
    result: object = sink.dispatch(message)
    if result is not None and inspect.isawaitable(result):
        result = asyncio.run(_cancellable(result, run, handle))
    if isinstance(result, Snooze):
        raise result
    if result is not None:
        raise _bad_return("sink", sink, result)


# -- the synchronous way -----------------------------------------------------------------


class Wake:
    """A signal one thread waits for and any thread gives (on a bare lock, so that an
    interruption while waiting carries no frame outside hexeract_lite)."""

    __slots__ = ("_guard", "_signal")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._signal = threading.Lock()
        self._signal.acquire()

    def set(self) -> None:
        """Give the signal (from any thread)."""
        with self._guard:
            if self._signal.locked():
                self._signal.release()

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds; True when set (the signal is used up)."""
        return self._signal.acquire(timeout=min(max(timeout, 0.0), threading.TIMEOUT_MAX))


class GivenUp(enum.Enum):
    """Why a watcher gave up on a :class:`BatchRun`."""

    TIMED_OUT = "timed out"
    INTERRUPTED = "interrupted"


class BatchRun:
    """Sink calls for ``items``, made in order on one thread (:meth:`run`), watched from
    another (:meth:`give_up`). Once given up on, the dispatching thread hands nothing more
    to the sink and records nothing. It holds no reference to the worker."""

    def __init__(
        self,
        runner: SinkRunner,
        items: Sequence[LeasedOccurrence],
        turn: Turn,
        wake: Wake,
        *,
        wake_at_end: bool,
        context: object = None,
        raise_exits: bool = False,
    ) -> None:
        self._sink, self._acks = runner.sink, runner.acks
        self._handle_of = runner.handle_of
        self.items = items
        self._turn = turn
        self.wake = wake
        self._wake_at_end = wake_at_end
        self.context = context
        self._lock = threading.Lock()
        self._interrupted = False
        self.call_started = 0.0
        self.in_flight = False
        self.given_up: GivenUp | None = None
        self.results: list[DispatchResult] = []
        self.cancel: Callable[[], None] | None = None
        """Cancels the awaitable of the call in flight (None: no awaitable runs)."""
        self._raise_exits = raise_exits
        self.raised: KeyboardInterrupt | SystemExit | None = None
        """With ``raise_exits``: what a sink raised that ended the run, to propagate."""

    def run(self) -> None:
        """On the dispatching thread: every item, until done or given up."""
        sink, acks, turn, lock, results = (
            self._sink,
            self._acks,
            self._turn,
            self._lock,
            self.results,
        )
        exit_exc: KeyboardInterrupt | SystemExit | None = None
        for occ in self.items:
            try:
                result = turn(occ)
            except BaseException as exc:  # e.g. a clock that fails: this item fails
                result = DispatchResult.failed(exc)
            if result is None:
                began = time.monotonic()
                with lock:
                    if self.given_up is not None:
                        return  # given up before this item was handed to the sink
                    self.in_flight = True
                    self.call_started = began
                handle = self._handle_of(occ)
                try:
                    with dispatching(handle):
                        if acks is not None:
                            result = acks.dispatch_occurrence(occ)
                        else:
                            _call_blocking(sink, occ.message, self, handle)
                            result = SUCCEEDED
                except BaseException as exc:  # a sink's SystemExit is a failed dispatch too
                    result = DispatchResult.failed(exc)
                    if self._raise_exits and isinstance(exc, KeyboardInterrupt | SystemExit):
                        exit_exc = exc
                result = result.took(time.monotonic() - began, began)
            with lock:
                if self.given_up is not None:
                    return  # the watcher gave up on this call and took the rest elsewhere
                results.append(result)
                self.in_flight = False
                self.raised = exit_exc
            if exit_exc is not None:
                break  # the rest is released; the exception propagates once settled
        if self._wake_at_end:
            self.wake.set()

    @property
    def finished(self) -> bool:
        """Every item has its result, or a sink's exit ended the run (:attr:`raised`)."""
        return len(self.results) == len(self.items) or self.raised is not None

    @property
    def left(self) -> int:
        """How many items have no result yet."""
        return len(self.items) - len(self.results)

    def interrupt(self) -> None:
        """From any thread or a signal handler (so without the lock): make the watcher give up
        at its next look, and wake it."""
        self._interrupted = True
        self.wake.set()

    def give_up(self, timeout: float) -> float | None:
        """From the watcher: give up now if interrupted while unfinished, or if the call in
        flight ran past ``timeout`` (None once given up on); else the seconds to sleep on
        ``wake`` before looking again."""
        with self._lock:
            if self.given_up is not None:
                return None
            if self.finished:
                return timeout
            if self._interrupted:
                self.given_up = GivenUp.INTERRUPTED
                return None
            if not self.in_flight:  # the thread's own code (a turn, a log handler) is slow
                return timeout
            left = self.call_started + timeout - time.monotonic()
            if left > 0:
                return left
            self.given_up = GivenUp.TIMED_OUT
            return None


def _helper_main(jobs: queue.SimpleQueue[BatchRun | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        job.run()
        del job


class _Dispatcher:
    def __init__(self, owner: object, name: str) -> None:
        self._jobs: queue.SimpleQueue[BatchRun | None] = queue.SimpleQueue()
        self.thread = threading.Thread(
            target=_helper_main, args=(self._jobs,), name=name, daemon=True
        )
        self.thread.start()
        # When the owner goes away the thread ends too (the finalizer holds no owner).
        self._close = weakref.finalize(owner, self._jobs.put, None)

    def submit(self, job: BatchRun) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        self._close()


# -- the runner --------------------------------------------------------------------------


class SinkRunner:
    """Dispatches batches to ``sink``, each call under ``timeout`` seconds; nothing is
    handed to the sink while ``aborting`` is set. Owns at most one dispatch thread."""

    def __init__(
        self,
        sink: ScheduleSink,
        timeout: float,
        aborting: threading.Event,
        handle_of: Callable[[LeasedOccurrence], DispatchHandle | None],
    ) -> None:
        self.sink = sink
        self.acks = sink if isinstance(sink, OccurrenceSink) else None
        self.is_async = is_async_sink(sink)
        self.timeout = min(timeout, threading.TIMEOUT_MAX)
        """``dispatch_timeout`` in seconds (the transactional grace included)."""
        self._aborting = aborting
        self._lock = threading.Lock()
        self._dispatcher: _Dispatcher | None = None
        self.current: BatchRun | None = None
        """The synchronous run in flight, if any (what :meth:`interrupt` gives up on)."""
        self._budget: asyncio.Timeout | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.handle_of = handle_of
        """The handle of an occurrence's dispatch (the worker's in-flight registry)."""

    # -- the dispatch thread

    def _get_dispatcher(self) -> _Dispatcher:
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = _Dispatcher(self, f"hexeract-sink-{id(self):x}")
            return self._dispatcher

    def close(self, why: str | None = None) -> None:
        """End the dispatch thread once its call returns; with ``why`` it is left to a call it
        is stuck in (logged), and the next batch gets a fresh one."""
        with self._lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()
            if why is not None:
                log_abandoned(why, dispatcher.thread.name)

    def _timed_out(self, how: str = "") -> TimeoutError:
        return TimeoutError(
            f"the sink did not return within dispatch_timeout ({self.timeout:g} s){how}"
        )

    def interrupt(self) -> None:
        """From any thread or a signal handler: give up on the dispatch in flight."""
        run, budget, loop = self.current, self._budget, self._loop
        if run is not None:
            run.interrupt()
        if budget is not None and loop is not None:
            call_soon(loop, self._expire, budget, loop)

    def _expire(self, budget: asyncio.Timeout, loop: asyncio.AbstractEventLoop) -> None:
        if budget is self._budget:
            _expire(budget, loop)

    # -- the synchronous way

    def run_batch(
        self, batch: Sequence[LeasedOccurrence], turn: Turn, raise_exits: bool = False
    ) -> tuple[list[DispatchResult], Interruption]:
        """Dispatch ``batch`` on the dispatch thread, watched from this one: the results, and
        what interrupted this thread, to raise once the batch is settled (``raise_exits``:
        or a ``KeyboardInterrupt``/``SystemExit`` the sink raised, the rest released)."""
        results: list[DispatchResult] = []
        interruption: Interruption = None
        while len(results) < len(batch):
            run = BatchRun(
                self,
                batch[len(results) :],
                turn,
                Wake(),
                wake_at_end=True,
                raise_exits=raise_exits,
            )
            try:
                self.current = run
                if self._aborting.is_set():
                    run.interrupt()  # nothing of it is handed to the sink
                else:
                    self._get_dispatcher().submit(run)
                while not run.finished and (left := run.give_up(self.timeout)) is not None:
                    run.wake.wait(left)
            except BaseException as exc:  # e.g. KeyboardInterrupt in this thread
                run.interrupt()
                run.give_up(self.timeout)  # unless finished
                interruption = exc
            finally:
                self.current = None
            results += run.results
            if run.raised is not None:
                results += [NOT_DISPATCHED] * run.left
                interruption = interruption or run.raised
            if run.given_up is None:
                break
            tail, why = self.given_up(run, interruption)
            if why is not None:
                self.close(why)
            results += tail
        return results, interruption

    def run_here(
        self, batch: Sequence[LeasedOccurrence], turn: Turn, wake: Wake, context: object
    ) -> list[DispatchResult]:
        """Dispatch ``batch`` on this thread, watched from another (woken by ``wake``). Raises
        :class:`LoopAbandoned` when the watcher gave up on the run: it then owns the rest."""
        run = BatchRun(self, batch, turn, wake, wake_at_end=False, context=context)
        self.current = run
        try:
            if not self._aborting.is_set():  # else nothing of it is handed to the sink
                run.run()
        finally:
            if self.current is run:
                self.current = None
        if run.given_up is not None:
            raise LoopAbandoned
        return run.results + [NOT_DISPATCHED] * run.left

    def given_up(
        self, run: BatchRun, interruption: Interruption
    ) -> tuple[list[DispatchResult], str | None]:
        """Once ``run`` was given up on: the handle of its call in flight ended (the handler
        sees ``should_abort()``); the results after ``run.results`` (after a timeout the late
        call failed; after an interruption the call in flight failed, the rest released);
        and why its thread is left behind (None: it is free)."""
        if not run.in_flight:  # interrupted between two calls
            return [NOT_DISPATCHED] * run.left, None
        handle = self.handle_of(run.items[len(run.results)])
        if handle is not None:
            handle.close()
        cancel = run.cancel
        if cancel is not None:  # an async sink's awaitable, on the dispatching thread's loop
            cancel()
        why = f"a sink did not return within dispatch_timeout ({self.timeout:g} s)"
        if run.given_up is GivenUp.TIMED_OUT:
            late = self._timed_out(_ABANDONED_THREAD if cancel is None else "; it was cancelled")
            return [DispatchResult.timeout(late).took(self.timeout, run.call_started)], why
        if self._aborting.is_set():
            why = "a dispatch was abandoned: the worker is aborting"
        error = interruption if interruption is not None else abandoned_error()
        began = run.call_started  # the sink was called: the attempt has its start and length
        failed = DispatchResult.failed(error).took(time.monotonic() - began, began)
        return [failed] + [NOT_DISPATCHED] * (run.left - 1), why

    # -- the asyncio way

    async def run_batch_async(
        self, batch: Sequence[LeasedOccurrence], turn: Turn
    ) -> tuple[list[DispatchResult], Interruption]:
        """Dispatch ``batch`` from the running loop: the results, and what to raise once the
        batch is settled (``KeyboardInterrupt``/``SystemExit`` from the sink, or this task's
        cancellation). A sync sink's batch goes to :meth:`run_batch` in a thread."""
        if not self.is_async:
            return await asyncio.to_thread(self.run_batch, batch, turn, True)
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
                with dispatching(self.handle_of(occ)):
                    result, interruption = await self._dispatch_async(occ.message)
                result = result.took(time.monotonic() - began, began)
            results.append(result)
        return results, interruption

    async def _dispatch_async(
        self, message: ScheduledMessage
    ) -> tuple[DispatchResult, Interruption]:
        started = time.monotonic()  # the loop's time() is time.monotonic() too
        budget = asyncio.timeout_at(started + self.timeout)
        result: object = None
        handle = current_handle()
        try:
            async with budget:
                self._budget, self._loop = budget, (loop := asyncio.get_running_loop())
                if handle is not None:  # an abort asked for cancels it, as a timeout does
                    handle.on_abort(functools.partial(call_soon, loop, self._expire, budget, loop))
                if self._aborting.is_set():
                    return NOT_DISPATCHED, None
                result = self.sink.dispatch(message)
                if result is not None and inspect.isawaitable(result):
                    pending: Awaitable[object] = result
                    result = await pending
        except TimeoutError as exc:
            if not budget.expired():
                return DispatchResult.failed(exc), None  # the sink's own TimeoutError
            if self._aborting.is_set():
                return DispatchResult.failed(abandoned_error()), None
            if handle is not None and handle.abort_requested is not None:
                how = handle.abort_requested
                return DispatchResult.failed(DispatchAborted(how == "cancel")), None
            log.warning(
                "an async sink did not finish within dispatch_timeout (%g s); it was cancelled",
                self.timeout,
            )
            return DispatchResult.timeout(self._timed_out("; it was cancelled")), None
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
            self._budget = None
            if handle is not None:
                handle.on_abort(None)
        if isinstance(result, Snooze):
            return DispatchResult.failed(result), None
        if result is not None:
            _discard(result)
            return DispatchResult.failed(_bad_return("sink", self.sink, result)), None
        over = time.monotonic() - started - self.timeout
        if over > 0:
            log.warning(
                "a sink blocked the event loop %.3f s past dispatch_timeout (%g s)",
                over,
                self.timeout,
            )
            error = TimeoutError(
                f"the sink blocked the event loop for {over:.3f} s past dispatch_timeout"
                f" ({self.timeout:g} s), so it could not be cancelled in time; not counted as"
                " delivered"
            )
            return DispatchResult.timeout(error), None
        return SUCCEEDED, None
