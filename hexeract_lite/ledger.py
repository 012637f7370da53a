"""The ledger of a batch: each occurrence's settlement planned, written in one store
call, logged, counted and told to the hooks. A fenced-out item counts as
``lease_lost``; if the store raises, nothing of the batch was recorded."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import NamedTuple

from ._log import package_logger
from .clock import Clock
from .hooks import Hook, WorkerEvent, call_hooks, settlement_event
from .retry import RandomSource, RetryPolicy
from .runlog import RunStamp
from .settle import (
    Acknowledged,
    DispatchOutcome,
    DispatchResult,
    ResultKind,
    error_summary,
    error_text,
    outcome_of,
    settlement_for,
)
from .settlement import Settlement
from .snapshot import LeasedOccurrence
from .store.base import ScheduleStore

__all__ = ["Counts", "Held", "Ledger", "Planned", "log_occurrence", "warn_left_to_expiry"]

log = package_logger("hexeract_lite.worker")

_EXTRA = ("schedule_id", "occurrence_id", "attempt", "lag")


def log_occurrence(
    clock: Clock,
    level: int,
    template: str,
    occ: LeasedOccurrence,
    *,
    exc_info: BaseException | None = None,
    dispatched: bool = True,
    **fields: object,
) -> None:
    """Log about one occurrence: ids, attempt and lag in the text and as ``extra``
    (not ``dispatched``: no attempt in the text)."""
    if not log.isEnabledFor(level):
        return
    msg = occ.message
    lag = (clock.now() - msg.scheduled_for).total_seconds()
    data: dict[str, object] = {
        "schedule_id": str(msg.schedule_id),
        "occurrence_id": str(msg.occurrence_id()),
        "attempt": occ.attempts,
        "max_attempts": occ.max_attempts,
        "lag": lag,
        "event_type": msg.event_type,
        **fields,
    }
    text = template % data if "%(" in template else template
    ids = (data["schedule_id"], data["occurrence_id"])
    extra = {k: data[k] for k in _EXTRA}
    if dispatched:
        line = "schedule %s occurrence %s attempt %d lag %.3fs: %s"
        log.log(level, line, *ids, occ.attempts, lag, text, extra=extra, exc_info=exc_info)
    else:
        line = "schedule %s occurrence %s lag %.3fs: %s"
        log.log(level, line, *ids, lag, text, extra=extra, exc_info=exc_info)


_LOGGED = {
    DispatchOutcome.RELEASED: (logging.INFO, "released undispatched: the worker is stopping"),
    DispatchOutcome.RETRIED: (
        logging.WARNING,
        "dispatch failed (attempt %(attempt)d/%(max_attempts)d), retrying in"
        " %(retry_in).3f s: %(error)s",
    ),
    DispatchOutcome.DEAD_LETTERED: (
        logging.ERROR,
        "dead-lettered after %(attempt)d/%(max_attempts)d attempts: %(error)s",
    ),
    DispatchOutcome.SNOOZED: (logging.INFO, "snoozed for %(retry_in).3f s"),
    DispatchOutcome.CANCELLED: (
        logging.WARNING,
        "aborted by request; the schedule is cancelled",
    ),
}
"""The log line of each recorded outcome but a delivery, a miss and a lost lease."""
_FAILURES = (DispatchOutcome.RETRIED, DispatchOutcome.DEAD_LETTERED)
_QUIET = (DispatchOutcome.DELIVERED, DispatchOutcome.RESCHEDULED, DispatchOutcome.MISSED)
"""Logged at DEBUG only (a miss was logged with its reason at its turn)."""


class Counts:
    """What one cycle found: the sweep's and claim's counts, each outcome's, the hook
    events to tell, and the first failed dispatch's exception."""

    __slots__ = ("claimed", "events", "failure", "outcomes", "swept")

    def __init__(self) -> None:
        self.swept = 0
        self.claimed = 0
        self.outcomes: dict[DispatchOutcome, int] = dict.fromkeys(DispatchOutcome, 0)
        self.events: list[WorkerEvent] = []
        self.failure: BaseException | None = None


Planned = tuple[LeasedOccurrence, Settlement, DispatchResult]
"""One occurrence's settlement to write, with the dispatch result it came from."""


class Held(NamedTuple):
    """A full batch's settlement, not yet written: written with the next cycle's claim, or
    on its own when no cycle follows."""

    planned: list[Planned]
    counts: Counts

    def lapses_within(self, now: datetime, pause: float) -> bool:
        """A held lease ends within ``2 * pause`` seconds of ``now``."""
        first = min(occ.leased_until for occ, _, _ in self.planned)
        return now + timedelta(seconds=2 * pause) >= first


def warn_left_to_expiry(left: int) -> None:
    """A settlement of ``left`` occurrences failed: they wait out their leases."""
    log.warning("%d claimed occurrence(s) left to lease expiry", left)


class Ledger:
    """Plans, writes and records the settlements of a worker's batches."""

    __slots__ = ("_clock", "_hooks", "_max_snoozes", "_retry", "_rng", "_run_log", "_store")

    def __init__(
        self,
        store: ScheduleStore,
        clock: Clock,
        retry: RetryPolicy,
        rng: RandomSource,
        hooks: tuple[Hook, ...],
        *,
        run_log: bool,
        max_snoozes: int,
    ) -> None:
        self._store, self._clock, self._retry, self._rng = store, clock, retry, rng
        self._max_snoozes = max_snoozes
        self._hooks = hooks
        self._run_log = run_log and store.keeps_runs

    def plan(
        self, batch: list[LeasedOccurrence], results: list[DispatchResult], counts: Counts
    ) -> list[Planned]:
        """The settlement of each result (each carrying its run with the run log on); an
        occurrence sink's acknowledgements and skipped ones are counted here instead."""
        now = self._clock.now()
        stamp = self.stamp(now)
        planned: list[Planned] = []
        for occ, result in zip(batch, results, strict=True):
            if result.kind is ResultKind.FAILED and counts.failure is None:
                counts.failure = result.exception()
            if isinstance(result, Acknowledged):  # recorded with the handler's writes
                self.record(occ, result.settlement, result.applied, result, counts)
                continue
            settlement = settlement_for(
                occ, result, now, self._retry, self._rng, stamp, self._max_snoozes
            )
            if settlement is None:
                counts.outcomes[DispatchOutcome.SKIPPED] += 1
            else:
                planned.append((occ, settlement, result))
        return planned

    def stamp(self, now: datetime) -> RunStamp | None:
        """The run stamp of settlements made at ``now``; None with the run log off."""
        return RunStamp(now, time.monotonic()) if self._run_log else None

    def write(self, planned: list[Planned], counts: Counts) -> None:
        """Write ``planned`` in one ``store.settle(...)``, then record it."""
        if not planned:
            if counts.events:  # malformed rows, acknowledgements of an occurrence sink
                call_hooks(self._hooks, counts.events)
            return
        try:
            oks = self._store.settle([settlement for _, settlement, _ in planned])
        except BaseException:
            warn_left_to_expiry(len(planned))
            call_hooks(self._hooks, counts.events)  # what was recorded before the settlement
            raise
        self.written(planned, oks, counts)

    def write_held(self, held: Held) -> None:
        """Write a held batch's settlement on its own (a failure is logged; the batch then
        waits out its lease)."""
        try:
            self.write(held.planned, held.counts)
        except Exception as exc:
            log.warning("settling the held batch failed: %s", error_summary(error_text(exc)))

    def written(self, planned: list[Planned], oks: list[bool], counts: Counts) -> None:
        """A recorded settlement: each item logged and counted, then the hooks told."""
        for (occ, settlement, result), ok in zip(planned, oks, strict=True):
            self.record(occ, settlement, ok, result, counts)
        call_hooks(self._hooks, counts.events)

    def record(
        self,
        occ: LeasedOccurrence,
        settlement: Settlement,
        ok: bool,
        result: DispatchResult,
        counts: Counts,
    ) -> DispatchOutcome:
        """Log one recorded settlement, count it, note its hook event; its outcome."""
        outcome = outcome_of(settlement, ok, result)
        counts.outcomes[outcome] += 1
        if self._hooks:
            counts.events.append(
                settlement_event(occ, settlement, outcome, result, self._clock.now())
            )
        if outcome is DispatchOutcome.LEASE_LOST:
            log_occurrence(
                self._clock,
                logging.WARNING,
                "lease lost: could not record %(wanted)s; another worker owns the occurrence now",
                occ,
                wanted=outcome_of(settlement).value,
            )
        elif outcome in _QUIET:
            if log.isEnabledFor(logging.DEBUG):
                note = "" if settlement.next is None else f", next at {settlement.next.isoformat()}"
                log_occurrence(self._clock, logging.DEBUG, f"{outcome.value}{note}", occ)
        else:
            level, template = _LOGGED[outcome]
            missed = result.kind is ResultKind.MISSED  # a one-shot past its misfire grace
            if missed:
                template = "dead-lettered, never dispatched: %(error)s"
            raised = result.error if outcome in _FAILURES else None
            if not isinstance(raised, BaseException) or raised.__traceback__ is None:
                raised = None  # a text, or made by the worker (a timeout, say): no traceback
            retry_in = settlement.retry_in
            log_occurrence(
                self._clock,
                level,
                template,
                occ,
                exc_info=raised,
                dispatched=not missed,
                error=error_summary(settlement.error),
                retry_in=None if retry_in is None else retry_in.total_seconds(),
            )
        return outcome
