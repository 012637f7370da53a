"""The loop engine: a worker's loop as a generator of requests (:data:`Steps`) that does
no I/O, and its drivers: :func:`drive` on this thread, :func:`run_watched` on loop
threads watched from this one (a call past its deadline is given up and the
generator goes on on a new loop thread), :class:`AsyncDriver` from an event loop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from .dispatch import Interruption, SinkRunner, Turn, Wake, log_abandoned
from .hooks import LoopAbandoned, abandon_hooks, hooks_running_since
from .idle import STOP_CHECK_S
from .settle import DispatchResult
from .snapshot import LeasedOccurrence
from .store.base import ChangeSignal

__all__ = [
    "AsyncDriver",
    "Call",
    "Dispatch",
    "Handover",
    "LoopThread",
    "Pause",
    "Steps",
    "Wait",
    "drive",
    "run_watched",
]

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
    """Carry out ``steps``' requests on this thread, ``value`` sent first; return its value.
    A :class:`~.dispatch.LoopAbandoned` from ``dispatch`` leaves ``steps`` suspended,
    for another thread to drive on."""
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


Resume = tuple[Dispatch, list[DispatchResult]]
"""A batch part-way: its request, and the results of its first items."""


class Handover:
    """The rest of the loop (``resume``, None: from its start) for the next loop thread,
    taken by exactly one (``owner``); ``source``: the run given up on it came from."""

    __slots__ = ("_lock", "launched", "owner", "resume", "source")

    def __init__(self, resume: Resume | None = None, source: object = None) -> None:
        self._lock = threading.Lock()
        self.resume = resume
        self.source = source
        self.launched = False
        self.owner: LoopThread | None = None

    def take(self, loop: LoopThread) -> bool:
        """Make ``loop`` the owner unless another took it first."""
        with self._lock:
            if self.owner is not None:
                return False
            self.owner = loop
            return True


class LoopThread:
    """A daemon thread running ``target(resume)`` once it has taken ``handover``, in a copy
    of ``context``; sets ``wake`` when it has taken it and when it ends (``error``: what
    ended it). Given up on (:class:`~.dispatch.LoopAbandoned`), it ends without a wake."""

    __slots__ = ("context", "ended", "error", "handover", "thread", "wake")

    def __init__(
        self,
        target: Callable[[Resume | None], None],
        name: str,
        wake: Wake,
        handover: Handover,
        context: contextvars.Context,
    ) -> None:
        self.ended = False
        self.error: BaseException | None = None
        self.wake = wake
        self.handover = handover
        self.context = context.copy()  # a context runs on one thread at a time
        self.thread = threading.Thread(target=self._main, args=(target,), name=name, daemon=True)

    def _main(self, target: Callable[[Resume | None], None]) -> None:
        if not self.handover.take(self):
            return
        self.wake.set()
        try:
            self.context.run(target, self.handover.resume)
        except LoopAbandoned:
            return
        except BaseException as exc:  # handed to the watcher, which raises it
            self.error = exc
        self.ended = True
        self.wake.set()


def run_watched(
    steps: Steps[None],
    runner: SinkRunner,
    stop: threading.Event,
    changes: ChangeSignal,
    abort: Callable[[], None],
    on_loop_thread: Callable[[], None],
) -> None:
    """Drive ``steps`` on loop threads watched from this one until the loop ends; raise
    what ended it, or an interruption of this thread (after ``abort()``).
    ``on_loop_thread`` runs first on each loop thread."""
    wake = Wake()

    def dispatch(request: Dispatch, done: list[DispatchResult] | None = None) -> Any:
        done = done or []
        rest = request.batch[len(done) :]
        if rest:
            done = done + runner.run_here(rest, request.turn, wake, (request, done))
        return done, None

    def target(resume: Resume | None) -> None:
        on_loop_thread()
        drive(steps, dispatch, stop, changes, None if resume is None else dispatch(*resume))

    name = f"{threading.current_thread().name}-loop"
    context = contextvars.copy_context()  # hooks run in this thread's context
    handover, run = Handover(), None  # what was handed over, and the run last looked at
    interruption: Interruption = None
    stopped: float | None = None  # when the stop was first seen
    while True:
        try:
            if run is not None and run.given_up is not None and handover.source is not run:
                resume: Resume = run.context  # type: ignore[assignment]  # as run_here had it
                request, done = resume  # given up on: the rest to a new thread
                tail, why = runner.given_up(run, interruption)
                handover, gone = Handover((request, done + run.results + tail), run), handover.owner
                if why is not None:
                    log_abandoned(why, name if gone is None else gone.thread.name)
                continue
            loop = handover.owner
            if loop is None:  # not started, or not yet running
                if not handover.launched:
                    LoopThread(target, name, wake, handover, context).thread.start()
                    handover.launched = True
                wake.wait(STOP_CHECK_S)  # set when it has taken the handover
                continue
            if loop.ended:
                break
            run, left = runner.current, runner.timeout
            if run is not None and run.given_up is None:
                given = run.give_up(runner.timeout)
                if given is None:
                    continue  # given up on: handed over above
                left = given
            elif stop.is_set():
                stopped = time.monotonic() if stopped is None else stopped
                hook_left = _hooks_left(loop, stopped, runner.timeout)
                if hook_left is None:
                    log_abandoned(
                        f"a hook did not return within dispatch_timeout ({runner.timeout:g} s)"
                        " of the stop",
                        loop.thread.name,
                    )
                    return  # everything was recorded before the hooks were told
                left = min(left, hook_left)
            wake.wait(left)
        except BaseException as exc:  # e.g. KeyboardInterrupt: as abort(), then raised
            abort()
            if interruption is not None:
                raise  # a second one: stop waiting for the loop
            interruption = exc
    if interruption is not None:
        raise interruption
    if loop.error is not None:
        raise loop.error


def _hooks_left(loop: LoopThread, stopped: float, timeout: float) -> float | None:
    """Seconds until the hooks ``loop`` calls are given up on (``timeout`` after the later
    of their start and the stop); None once given up on."""
    since = hooks_running_since(loop.thread)
    if since is None:
        return timeout
    left = max(since, stopped) + timeout - time.monotonic()
    if left > 0:
        return left
    return None if abandon_hooks(loop.thread) else timeout


class AsyncDriver:
    """Carries out a loop's requests from the event loop: a :class:`Call` in a thread, a
    :class:`Dispatch` by :meth:`~.dispatch.SinkRunner.run_batch_async`, both finished even
    when the task is cancelled meanwhile. A cancellation sets ``halted``, ends a
    :class:`Wait` or :class:`Pause` at once, and is raised once the steps have returned."""

    __slots__ = ("_cancelled", "_changes", "_runner", "_stop", "halted")

    def __init__(self, runner: SinkRunner, stop: asyncio.Event, changes: ChangeSignal) -> None:
        self._runner = runner
        self._stop = stop
        self._changes = changes
        self._cancelled: asyncio.CancelledError | None = None
        self.halted = False

    def stopping(self) -> bool:
        """Cancelled, or ``stop`` set."""
        return self.halted or self._stop.is_set()

    async def drive(self, steps: Steps[None]) -> None:
        """Carry out ``steps``' requests until it returns."""
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
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), request.seconds)
            except asyncio.CancelledError as exc:  # in a wait: stop
                self._cancelled, self.halted, value = exc, True, False
            except BaseException as exc:  # thrown into the steps, as if raised there
                error = exc
        if self._cancelled is not None:
            raise self._cancelled

    async def _finish(self, work: Awaitable[_T]) -> _T:
        task = asyncio.ensure_future(work)
        while True:
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError as exc:
                if task.done() and task.cancelled():
                    raise
                self._cancelled, self.halted = exc, True


async def _wait_change_or_stop(
    changes: ChangeSignal, stop: asyncio.Event, version: int, timeout: float
) -> bool:
    """Up to ``timeout`` seconds for ``changes`` to move past ``version`` (True) or for
    ``stop`` (False)."""
    waiter = asyncio.ensure_future(asyncio.to_thread(changes.wait, version, timeout))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not waiter.done():
            changes.notify()  # let the waiting thread go now; a spurious wake is harmless
    return waiter.done() and not waiter.cancelled() and waiter.result() is True
