"""Transactional sink: the handler's writes and the acknowledgement commit together
(docs/howto/transactions.md)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .clock import Clock
from .errors import DispatchError, InvalidConfiguration
from .message import ScheduledMessage
from .retry import RetryPolicy
from .settle import Acknowledged, DispatchResult
from .sinks import OccurrenceSink
from .snapshot import LeasedOccurrence
from .store.base import ScheduleStore
from .store.signal import ChangeSignal

__all__ = ["Acknowledged", "BoundTransactionalSink", "TransactionalSink"]

TRANSACTIONAL_GRACE_S = 5.0
"""How long past ``dispatch_timeout`` the worker waits for a transactional dispatch
that stops itself at the timeout before it abandons the thread."""

Handler = Callable[[ScheduledMessage, Any], object]


def bad_return(handler: object, value: object) -> DispatchError:
    """The failure of a handler that returned something other than None."""
    return DispatchError(
        f"transactional handler {handler!r:.80} returned {value!r:.80}; it must return"
        " None and raise to signal a failure"
    )


def timed_out(timeout: float, error: BaseException | None) -> TimeoutError:
    """The failure of a handler stopped at ``dispatch_timeout``."""
    exc = TimeoutError(
        f"the transactional handler did not finish within dispatch_timeout ({timeout:g} s);"
        " its writes and the acknowledgement were rolled back"
    )
    exc.__cause__ = error
    return exc


class TransactionalSink:
    """A sink whose ``handler(message, connection)`` runs inside the write transaction
    that records the occurrence's acknowledgement, fenced on its lease, on a SQLite,
    PostgreSQL or MySQL store (``connection``: an ``apsw.Connection``, a
    ``sqlite3.Connection`` with ``driver="sqlite3"``, a ``psycopg.Connection`` or a
    ``pymysql.Connection``).

    Returning None commits its writes with the acknowledgement, so an effect in the same
    database happens exactly once; raising, returning something else or running past
    ``dispatch_timeout`` rolls both back and retries. A lost lease: the handler is not
    called. The write lock is held meanwhile: keep it short and local; never commit, roll
    back or keep the connection. A handler that is not a plain callable (a coroutine
    function among them): :class:`InvalidConfiguration`.

    .. versionadded:: 0.2.0"""

    is_async = False

    def __init__(self, handler: Handler) -> None:
        if not callable(handler) or inspect.iscoroutinefunction(handler):
            raise InvalidConfiguration(
                f"TransactionalSink needs a plain function handler(message, connection),"
                f" got {handler!r}"
            )
        try:
            inspect.signature(handler).bind(None, None)
        except TypeError as exc:
            raise InvalidConfiguration(
                f"TransactionalSink's handler is called as handler(message, connection);"
                f" {handler!r} cannot take those two arguments: {exc}"
            ) from None
        except ValueError:  # no signature to read (some builtins): it is called as is
            pass
        self.handler = handler

    def dispatch(self, message: ScheduledMessage) -> None:
        """Not used: a worker runs the handler inside its transaction (:meth:`bind`)."""
        raise DispatchError(
            "a TransactionalSink runs only under a SchedulerWorker on a SQLite,"
            " PostgreSQL or MySQL store (it needs the occurrence's lease)"
        )

    def bind(
        self,
        store: ScheduleStore,
        clock: Clock,
        policy: RetryPolicy,
        timeout: float,
        *,
        run_log: bool = True,
    ) -> BoundTransactionalSink:
        """The sink as a worker on ``store`` runs it (``run_log``: each delivery's run in the
        handler's transaction); a store without shared transactions:
        :class:`InvalidConfiguration`."""
        runner = store.transaction_runner(self.handler, clock, policy, timeout, run_log=run_log)
        return BoundTransactionalSink(self, runner, store.changes)

    def __repr__(self) -> str:
        return f"TransactionalSink({self.handler!r})"


class BoundTransactionalSink(OccurrenceSink):
    """A :class:`TransactionalSink` bound to one worker's store: the worker calls
    :meth:`dispatch_occurrence` for each occurrence, from a thread; an applied
    acknowledgement that :attr:`~hexeract_lite.settlement.Settlement.wakes` notifies
    ``changes``, the store's change signal."""

    def __init__(self, sink: TransactionalSink, runner: Any, changes: ChangeSignal) -> None:
        self.sink = sink
        self._runner = runner
        self._changes = changes

    def dispatch(self, message: ScheduledMessage) -> None:
        """Not used: raises :class:`DispatchError` (see :meth:`TransactionalSink.dispatch`)."""
        self.sink.dispatch(message)

    def dispatch_occurrence(self, occurrence: LeasedOccurrence) -> DispatchResult:
        """Run the handler and the acknowledgement in one transaction (never raises)."""
        try:
            result: DispatchResult = self._runner.run(occurrence)
        except BaseException as exc:
            return DispatchResult.failed(exc)
        if isinstance(result, Acknowledged) and result.applied and result.settlement.wakes:
            self._changes.notify()
        return result

    def close(self) -> None:
        """Close the sink's own connection (a later dispatch opens another)."""
        self._runner.close()

    def __repr__(self) -> str:
        return repr(self.sink)
