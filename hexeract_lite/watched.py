"""The thread loop's own thread, watched from the thread that called ``run()``.

:meth:`~hexeract_lite.worker.SchedulerWorker.run` runs its loop on a
:class:`LoopThread` that calls the sink itself, so a batch costs no hand-off between
threads (on a machine whose idle cores sleep, waking another thread for every batch
cost as much as the batch's own Python). The calling thread watches it: it sleeps until
the deadline of the call in flight (``dispatch_timeout`` after the previous call ended),
and is woken only when the loop ends or is interrupted. When a call runs past its
deadline, or the worker is interrupted while one runs, the watcher gives up on the loop
thread (Python cannot stop it: it keeps running until the sink returns, then ends
without recording anything) and a new loop thread goes on with the rest of the batch
(:class:`Resume`), then with the loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .dispatch import LoopAbandoned
from .settle import DispatchResult
from .snapshot import LeasedOccurrence

__all__ = ["LoopThread", "Resume", "Wake"]


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


class LoopThread:
    """A daemon thread running ``target`` (the loop); ``wake`` is set when it ends.

    ``error``: what ended it, if anything did (re-raised by the watcher). A thread whose
    batch the watcher took over (:class:`~.dispatch.LoopAbandoned`) ends silently and
    does not set ``wake``: the watcher has moved on to its successor.
    """

    __slots__ = ("ended", "error", "thread", "wake")

    def __init__(self, target: Callable[[], None], name: str, wake: Wake) -> None:
        self.ended = False
        self.error: BaseException | None = None
        self.wake = wake
        self.thread = threading.Thread(target=self._main, args=(target,), name=name, daemon=True)
        self.thread.start()

    def _main(self, target: Callable[[], None]) -> None:
        try:
            target()
        except LoopAbandoned:
            return
        except BaseException as exc:  # handed to the watcher, which raises it
            self.error = exc
        self.ended = True
        self.wake.set()
