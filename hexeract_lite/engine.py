"""The loop engine: a worker's cycles as a generator of requests, and its two drivers.

The worker writes its loop (and :meth:`~hexeract_lite.SchedulerWorker.run_once`'s
single cycle) once, as a generator (:data:`Steps`) that decides everything and does no
I/O itself: it yields a request for each thing to do and is sent back what came of it.

- :class:`Call`: run ``fn(*args)`` (a store call, the hooks) and send back its result,
  or throw its exception into the generator;
- :class:`Dispatch`: dispatch a claimed batch; send back ``(results, interruption)``;
- :class:`Wait`: sleep up to ``timeout`` seconds for ``store.changes`` to move past
  ``version`` or the loop to stop; send back True when the store changed;
- :class:`Pause`: sleep ``seconds``, or until the loop stops.

:func:`drive` carries the requests out on the calling thread (``run()``'s loop thread,
``start()``'s, ``run_once()``'s caller); :class:`AsyncDriver` from an event loop
(``run_async()``): calls in a thread, the sink awaited, and a cancellation of its task
turned into a stop (the cycle in hand finishes and is settled, then the cancellation
is raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from .dispatch import Interruption, LoopAbandoned, SinkRunner, Turn
from .settle import DispatchResult
from .snapshot import LeasedOccurrence
from .store.base import ChangeSignal

__all__ = ["AsyncDriver", "Call", "Dispatch", "Pause", "Steps", "Wait", "drive"]

_T = TypeVar("_T")


class Call:
    """Run ``fn(*args)``; its result is sent back, its exception thrown in."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn, self.args = fn, args


class Dispatch(NamedTuple):
    """Dispatch ``batch``, each occurrence at its ``turn``; ``(results, interruption)``
    is sent back."""

    batch: Sequence[LeasedOccurrence]
    turn: Turn


class Wait(NamedTuple):
    """Sleep up to ``timeout`` seconds for ``store.changes`` to move past ``version``
    (True is sent back) or for the loop to stop (False)."""

    version: int
    timeout: float


class Pause(NamedTuple):
    """Sleep ``seconds``, or until the loop stops."""

    seconds: float


Request = Call | Dispatch | Wait | Pause
Steps = Generator[Request, Any, _T]
"""A worker's loop or cycle: the requests it yields, what it returns."""

Dispatcher = Callable[[Dispatch], tuple[list[DispatchResult], Interruption]]


def drive(
    steps: Steps[_T],
    dispatch: Dispatcher,
    stop: threading.Event,
    changes: ChangeSignal,
    value: object = None,
) -> _T:
    """Carry out ``steps``' requests on this thread, ``value`` sent first, until it
    returns (its value) or raises. ``dispatch`` runs a :class:`Dispatch`. A
    :class:`~.dispatch.LoopAbandoned` from it ends the drive and leaves ``steps``
    suspended, for another thread to drive on."""
    error: BaseException | None = None
    while True:
        try:
            request = steps.send(value) if error is None else steps.throw(error)
        except StopIteration as end:
            result: _T = end.value
            return result
        value = error = None
        try:
            if type(request) is Call:
                value = request.fn(*request.args)
            elif type(request) is Dispatch:
                value = dispatch(request)
            elif type(request) is Wait:
                value = changes.wait(request.version, request.timeout)
            else:
                assert type(request) is Pause
                stop.wait(request.seconds)
        except LoopAbandoned:
            raise
        except BaseException as exc:  # thrown into the steps, as if raised there
            error = exc


class AsyncDriver:
    """Carries out a loop's requests from the running event loop (:meth:`drive`).

    A :class:`Call` runs in a thread (``asyncio.to_thread``, so in a copy of the
    task's context) and a :class:`Dispatch` by
    :meth:`~.dispatch.SinkRunner.run_batch_async`; both are finished even when the
    task is cancelled meanwhile. A cancellation sets ``halted`` (which the loop's
    ``stopping`` reads), ends a :class:`Wait` or :class:`Pause` at once, and is raised
    once the steps have returned.
    """

    __slots__ = ("_cancelled", "_changes", "_runner", "_stop", "halted")

    def __init__(self, runner: SinkRunner, stop: asyncio.Event, changes: ChangeSignal) -> None:
        self._runner = runner
        self._stop = stop
        self._changes = changes
        self._cancelled: asyncio.CancelledError | None = None
        self.halted = False

    def stopping(self) -> bool:
        """True once the loop should stop: cancelled, or ``stop`` set."""
        return self.halted or self._stop.is_set()

    async def drive(self, steps: Steps[None]) -> None:
        """Carry out ``steps``' requests until it returns; then raise a cancellation
        that came meanwhile."""
        value: object = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(value) if error is None else steps.throw(error)
            except StopIteration:
                break
            value = error = None
            try:
                if type(request) is Call:
                    value = await self._finish(asyncio.to_thread(request.fn, *request.args))
                elif type(request) is Dispatch:
                    value = await self._finish(
                        self._runner.run_batch_async(request.batch, request.turn)
                    )
                elif self.halted:
                    value = False
                elif type(request) is Wait:
                    value = await _wait_change_or_stop(
                        self._changes, self._stop, request.version, request.timeout
                    )
                else:
                    assert type(request) is Pause
                    await _wait_event(self._stop, request.seconds)
            except asyncio.CancelledError as exc:  # in a wait: stop
                self._cancelled, self.halted, value = exc, True, False
            except BaseException as exc:  # thrown into the steps, as if raised there
                error = exc
        if self._cancelled is not None:
            raise self._cancelled

    async def _finish(self, work: Awaitable[_T]) -> _T:
        """Await ``work`` to its end, however often this task is cancelled meanwhile."""
        task = asyncio.ensure_future(work)
        while True:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError as exc:
                if task.done() and task.cancelled():
                    raise
                self._cancelled, self.halted = exc, True


async def _wait_event(event: asyncio.Event, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)


async def _wait_change_or_stop(
    changes: ChangeSignal, stop: asyncio.Event, version: int, timeout: float
) -> bool:
    """Up to ``timeout`` seconds for ``changes`` to move past ``version`` (True) or for
    ``stop`` (False), without blocking the loop."""
    waiter = asyncio.ensure_future(asyncio.to_thread(changes.wait, version, timeout))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not waiter.done():
            changes.notify()  # let the waiting thread go now; a spurious wake is harmless
    return waiter.done() and not waiter.cancelled() and waiter.result() is True
