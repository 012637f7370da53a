"""What the transaction runners share: their state, the occurrence's fenced success
acknowledgement and the delivery's run."""

from __future__ import annotations

import os
from collections.abc import Callable
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

__all__ = ["Fenced", "TransactionRunner"]


class Fenced(Exception):
    """The acknowledgement matched no lease: roll back, do not call the handler."""


class TransactionRunner:
    """A runner of transactional handlers on a connection of its own (see
    :class:`~hexeract_lite.store.sqlite.transaction.SqliteTransactionRunner` for what
    ``run`` returns)."""

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
        self._runs = runs  # the run log's statements: the delivery's run goes in too
        self._conn: Any = None
        self._pid = os.getpid()
        self._watchdog = Watchdog()

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
        """The failed dispatch of a runner that could not connect."""
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
