"""``run()``'s loop on a thread of its own, watched from the thread that called it.

:func:`run_watched` drives a worker's loop (:mod:`hexeract_lite.engine`) on a
:class:`LoopThread` that calls the sink itself (:meth:`~.dispatch.SinkRunner.run_here`),
so a batch costs no hand-off between threads. The calling thread watches it: it
sleeps until the deadline of the call in flight (``dispatch_timeout`` after the
hand-over of the occurrence to the sink), and is woken only when the loop ends or is
interrupted. When a call runs past its deadline, or the worker is interrupted while
one runs, the watcher gives up on the loop thread (it keeps running until the sink
returns, then ends without recording anything) and a new loop thread carries the rest
of the batch on, then the loop: the loop is a suspended generator, which any thread
can drive on.

The watcher may be interrupted anywhere (a :class:`KeyboardInterrupt` lands between
any two lines of it): it interrupts the loop like ``abort()``, waits for it to settle
and end, then raises the interruption (a second one is raised at once). Everything it
hands over is recorded before it acts on it, so that, called again, it carries on
where it was: the rest of the loop is a :class:`Handover` that exactly one loop thread
takes, so a thread started twice for it (the first start interrupted) runs it once.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

from .dispatch import BatchRun, Interruption, LoopAbandoned, SinkRunner, Wake
from .engine import Dispatch, Steps, drive
from .idle import STOP_CHECK_S
from .settle import DispatchResult
from .store.base import ChangeSignal

__all__ = ["Handover", "LoopThread", "run_watched"]

Resume = tuple[Dispatch, list[DispatchResult]]
"""A batch part-way: its request, and the results of its first items."""


class Handover:
    """The rest of the loop for the next loop thread: ``resume`` (None: from its
    start), taken by exactly one :class:`LoopThread` (``owner``). ``source``: the run
    given up on that it came from; ``launched``: a loop thread's start returned."""

    __slots__ = ("_lock", "launched", "owner", "resume", "source")

    def __init__(self, resume: Resume | None = None, source: object = None) -> None:
        self._lock = threading.Lock()
        self.resume = resume
        self.source = source
        self.launched = False
        self.owner: LoopThread | None = None

    def take(self, loop: LoopThread) -> bool:
        """Make ``loop`` the owner unless another thread took it first."""
        with self._lock:
            if self.owner is not None:
                return False
            self.owner = loop
            return True


class LoopThread:
    """A daemon thread running ``target(resume)`` once it has taken ``handover``, in a
    copy of ``context`` (that of the thread that called ``run()``); ``wake`` is set
    when it has taken it and when it ends.

    ``error``: what ended it, if anything did (raised by the watcher). A thread given
    up on (:class:`~.dispatch.LoopAbandoned`) ends silently without setting ``wake``;
    one that finds ``handover`` taken ends at once.
    """

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
    """Drive ``steps`` on loop threads watched from this one (see the module
    docstring) until the loop ends; raise what ended it, or an interruption of this
    thread (after ``abort()``, once the loop has ended). ``on_loop_thread`` is called
    first on each loop thread."""
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
    while True:
        try:
            if run is not None and run.given_up is not None and handover.source is not run:
                request, done = _resume_of(run)  # given up on: the rest to a new thread
                results = done + run.results + runner.given_up_results(run, interruption)
                handover, gone = Handover((request, results), run), handover.owner
                why = runner.thread_lost(run)
                if why is not None:
                    runner.log_abandoned(why, name if gone is None else gone.thread.name)
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


def _resume_of(run: BatchRun) -> Resume:
    resume: Resume = run.context  # type: ignore[assignment]  # as run_here was given it
    return resume
