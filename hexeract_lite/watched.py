"""The thread loop's own thread, watched from the thread that called ``run()``.

:meth:`~hexeract_lite.worker.SchedulerWorker.run` runs its loop on a
:class:`LoopThread` that calls the sink itself, so a batch costs no hand-off between
threads (on a machine whose idle cores sleep, waking another thread for every batch
cost as much as the batch's own Python). The calling thread watches it: it sleeps until
the deadline of the call in flight (``dispatch_timeout`` after it was handed to the sink),
and is woken only when the loop ends or is interrupted. When a call runs past its
deadline, or the worker is interrupted while one runs, the watcher gives up on the loop
thread (Python cannot stop it: it keeps running until the sink returns, then ends
without recording anything) and a new loop thread goes on with the rest of the batch
(:class:`Resume`), then with the loop.

The watcher may be interrupted anywhere (a :class:`KeyboardInterrupt` lands between
any two lines of it): everything it hands over is recorded before it acts on it, so
that, called again, it carries on where it was. The rest of the loop is a
:class:`Handover` that exactly one loop thread takes, so a thread started twice for it
(the first start interrupted) runs it once.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .dispatch import LoopAbandoned
from .settle import DispatchResult
from .snapshot import LeasedOccurrence

__all__ = ["Handover", "LoopThread", "Resume", "Wake"]


class Resume:
    """A cycle part-way through its batch: the claimed ``batch``, the ``results`` of
    its first items (the rest is still to dispatch), the cycle's counts (the
    worker's)."""

    __slots__ = ("batch", "counts", "results")

    def __init__(
        self, batch: Sequence[LeasedOccurrence], results: list[DispatchResult], counts: Any
    ) -> None:
        self.batch = batch
        self.results = results
        self.counts = counts


class Wake:
    """A signal one thread waits for and any thread gives: :meth:`set` makes the
    pending (or next) :meth:`wait` return True at once. On a bare lock, so that an
    interruption raised while waiting (a :class:`KeyboardInterrupt`) carries no frame
    outside hexeract_lite (``last_error`` then shows its line alone, as for the
    helper thread's wait)."""

    __slots__ = ("_guard", "_signal")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._signal = threading.Lock()
        self._signal.acquire()

    def set(self) -> None:
        """Give the signal (from any thread; once given, more calls add nothing)."""
        with self._guard:
            if self._signal.locked():
                self._signal.release()

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds; True when set (the signal is used up)."""
        return self._signal.acquire(timeout=min(max(timeout, 0.0), threading.TIMEOUT_MAX))


class Handover:
    """The rest of the loop for the next loop thread: ``resume`` (None: a fresh loop),
    taken by exactly one :class:`LoopThread` (``owner``). ``source``: the abandoned run
    it came from; ``launched``: a loop thread's start returned."""

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
    """A daemon thread running ``target(resume)`` (the loop) once it has taken
    ``handover``, in a copy of ``context`` (that of the thread that called ``run()``,
    as ``asyncio.to_thread`` does for ``run_async``'s hooks); ``wake`` is set when it
    has taken it and when it ends.

    ``error``: what ended it, if anything did (re-raised by the watcher). A thread whose
    batch the watcher took over (:class:`~.dispatch.LoopAbandoned`) ends silently and
    does not set ``wake``: the watcher has moved on to its successor. A thread that
    finds ``handover`` taken ends at once.
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

    def start(self) -> None:
        """Start the thread (a second LoopThread for the same handover is harmless)."""
        self.thread.start()

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
