"""What the transactions shared with the application have in common: the savepoint, and
the transaction runners' state, fenced acknowledgement and delivery run."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from ...errors import StoreError
from ...runlog import delivered_run
from ...settle import SUCCEEDED, Acknowledged, DispatchResult, settlement_for
from ..deadline import Watchdog

if TYPE_CHECKING:
    from ...clock import Clock
    from ...message import ScheduledMessage
    from ...retry import RetryPolicy
    from ...settlement import Settlement
    from ...snapshot import LeasedOccurrence
    from .runs import RunStatements

__all__ = ["Fenced", "TransactionRunner", "savepoint"]

_SAVEPOINT = "hexeract_lite_insert"


def _no_mapping(exc: BaseException) -> Exception | None:
    return None


@contextmanager
def savepoint(
    run: Callable[[str], object],
    errors: tuple[type[Exception], ...],
    what: str,
    where: object,
    mapped: Callable[[BaseException], Exception | None] = _no_mapping,
) -> Iterator[None]:
    """The body in a savepoint of the caller's transaction (``run`` executes a
    statement on it): released when it ends, rolled back to when it raises. The error
    raised is ``mapped(exc)`` when not None, else a driver error (``errors``) as
    :class:`StoreError` naming ``what`` and ``where``, else ``exc``."""

    def failed(exc: BaseException) -> StoreError:
        return StoreError(f"{what} on {where} failed: {type(exc).__name__}: {exc}")

    try:
        run(f"SAVEPOINT {_SAVEPOINT}")
    except errors as exc:
        raise failed(exc) from exc
    try:
        yield
        run(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    except BaseException as exc:
        with suppress(*errors):
            # gone with a broken connection, or rolled back by the engine: nothing left
            run(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            run(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        error = mapped(exc)
        if error is not None:
            raise error from exc
        if isinstance(exc, errors):
            raise failed(exc) from exc
        raise


class Fenced(Exception):
    """The acknowledgement matched no lease: roll back, do not call the handler."""


class TransactionRunner:
    """Runs a transactional handler for one occurrence at a time, on a connection of its own.

    ``run(occurrence)``: in one transaction, the occurrence's success acknowledgement
    (``delivered``, or ``reschedule`` for a recurring schedule) fenced on its lease;
    when the fence holds, ``handler(message, connection)``; the commit. The result is an
    :class:`~hexeract_lite.transactional.Acknowledged` (committed, or fenced out: the
    handler did not run), or a failed :class:`DispatchResult` (the handler raised,
    returned something other than None, or ran past ``timeout``; or the database
    failed), after which nothing of the transaction remains. At ``timeout`` a watchdog
    ends the connection, even while the handler sleeps in Python.
    """

    def __init__(
        self,
        store: Any,
        handler: Callable[[ScheduledMessage, Any], object],
        clock: Clock,
        policy: RetryPolicy,
        timeout: float,
        *,
        runs: RunStatements | None = None,
    ) -> None:
        self._store = store
        self._handler = handler
        self._clock = clock
        self._policy = policy
        self._timeout = timeout
        self._runs = runs
        self._conn: Any = None
        self._pid = os.getpid()
        self._watchdog = Watchdog()

    def close(self) -> None:
        """Close the runner's own connection (a later run opens another); a forked
        child leaves its parent's alone."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with suppress(Exception):
                conn.close()

    def _acknowledgement(self, occ: LeasedOccurrence) -> tuple[Settlement, Any, Any] | Acknowledged:
        """``occ``'s success settlement with its fenced statement and parameters, or an
        :class:`Acknowledged` not applied when no stored lease can equal its lease."""
        settlement = settlement_for(occ, SUCCEEDED, self._clock.now(), self._policy)
        assert settlement is not None
        plan = self._store._settle_plan([settlement])
        if not plan:
            return Acknowledged(settlement=settlement, applied=False)
        [(_, kind, params)] = plan
        return settlement, self._store._settle_statement(kind), params

    def _cannot_connect(self, exc: Exception) -> DispatchResult:
        error = StoreError(f"transactional dispatch on {self._store._where}: cannot connect: {exc}")
        error.__cause__ = exc
        return DispatchResult.failed(error)

    def _run_row(self, occ: LeasedOccurrence, began: float) -> tuple[Any, ...]:
        """The run-log row of ``occ``'s delivery, the handler called at ``began``."""
        assert self._runs is not None
        msg = occ.message
        entry = delivered_run(
            msg.schedule_id, msg.scheduled_for, occ.attempts, began, self._clock.now()
        )
        return self._runs.row(entry)
