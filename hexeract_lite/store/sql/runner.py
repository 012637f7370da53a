"""What the transactions shared with the application have in common: the savepoint, and
the transaction runners' state, fenced acknowledgement and delivery run."""

from __future__ import annotations

import os
import time
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

__all__ = ["Fenced", "ServerRunner", "TransactionRunner", "savepoint"]

_SAVEPOINT = "hexeract_lite_insert"


@contextmanager
def savepoint(
    run: Callable[[str], object],
    errors: tuple[type[Exception], ...],
    what: str,
    where: object,
    mapped: Callable[[BaseException], Exception | None] | None = None,
) -> Iterator[None]:
    """The body in a savepoint of the caller's transaction (``run`` executes a
    statement on it): released when it ends, rolled back to when it raises. The error
    raised is ``mapped(exc)`` when that is not None, else a driver error (``errors``) as
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
        error = None if mapped is None else mapped(exc)
        if error is not None:
            raise error from exc
        if isinstance(exc, errors):
            raise failed(exc) from exc
        raise


class Fenced(Exception):
    """The acknowledgement matched no lease: roll back, do not call the handler."""


class TransactionRunner:
    """Runs a transactional handler, one occurrence at a time, on a connection of its own:
    the fenced success acknowledgement, then (when it held) ``handler(message, conn)``,
    in one transaction. The result: :class:`Acknowledged` (committed, or fenced out
    without the handler), or a failed :class:`DispatchResult` with nothing kept. At
    ``timeout`` a watchdog ends the connection."""

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


class ServerRunner(TransactionRunner):
    """:class:`TransactionRunner` on a database server, in the store's ``_transaction``:
    at the deadline the watchdog calls ``_ender(conn)`` (ending the session); a handler
    returning late is rolled back. The dialect's hooks: ``_connection()``, the runner's
    own; ``_opened(conn)``, first in the transaction, given to ``_check_after`` (did the
    handler end it?); ``_settled(conn, fired, failed)`` after it; ``_timed_out(exc,
    deadline)``, the database's own timeout. A wake-up tells other processes through
    the dialect's ``notify``."""

    _errors: tuple[type[Exception], ...]
    _connection: Callable[[], Any]
    _ender: Callable[[Any], Callable[[], None]]
    _settled: Callable[[Any, bool, bool], None]

    def _opened(self, conn: Any) -> Any:
        return None

    def _check_after(self, conn: Any, opened: Any) -> None:
        pass

    def _timed_out(self, exc: BaseException, deadline: float) -> bool:
        return False

    def run(self, occ: LeasedOccurrence) -> DispatchResult:
        """The handler and ``occ``'s acknowledgement in one transaction (see the class)."""
        from ...transactional import bad_return, timed_out

        planned = self._acknowledgement(occ)
        if isinstance(planned, Acknowledged):
            return planned
        settlement, statement, params = planned
        deadline = time.monotonic() + self._timeout
        if self._pid != os.getpid():
            self._conn, self._pid = None, os.getpid()  # the parent's: never used here
        try:
            conn = self._connection()
        except self._errors as exc:
            return self._cannot_connect(exc)
        self._watchdog.arm(self._timeout, self._ender(conn))
        session = self._store._session(conn)
        try:
            with self._store._transaction(conn, True, False):
                opened = self._opened(conn)
                if session.execute(statement, params) != 1:
                    raise Fenced()
                began = time.monotonic()
                returned = self._handler(occ.message, conn)
                if returned is not None:
                    raise bad_return(self._handler, returned)
                self._check_after(conn, opened)
                if time.monotonic() > deadline:
                    raise timed_out(self._timeout, None)
                if self._runs is not None:
                    session.execute(self._runs.insert, self._run_row(occ, began))
                if settlement.wakes:
                    self._store._shared().notify(conn, self._store)
        except BaseException as exc:
            fired = self._watchdog.disarm()
            self._settled(conn, fired, True)
            if isinstance(exc, Fenced):
                return Acknowledged(settlement=settlement, applied=False)
            if fired or self._timed_out(exc, deadline):
                return DispatchResult.failed(timed_out(self._timeout, exc))
            return DispatchResult.failed(exc)
        self._settled(conn, self._watchdog.disarm(), False)
        return Acknowledged(settlement=settlement, applied=True)
