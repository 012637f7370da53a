"""The run log's part of the store contract, with the defaults of a store without one
(which records nothing).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from .._time import to_utc_ms
from ..errors import InvalidArgument
from ..runlog import RunDraft, RunEntry, RunOutcome, RunRecord, this_worker
from ..settlement import Settlement
from .checks import check_limit, check_schedule_id

SWEEP_ERROR = "attempts exhausted by a crashed worker; dead-lettered by the sweeper"
"""The ``last_error`` the sweep records on the rows it dead-letters that had none."""

SWEEP_KEPT = (
    "attempts exhausted with none in flight (the last one's worker crashed, or max_attempts"
    " was lowered to the attempts made); dead-lettered by the sweeper; the last error:\n"
)
"""What the sweep puts before the ``last_error`` a row it dead-letters had already."""

__all__ = [
    "RunCount",
    "RunLogContract",
    "check_run_counts",
    "check_runs_query",
    "ended_run",
    "hour_of",
    "recorded_runs",
]

RunCount = tuple[datetime, RunOutcome, int]
"""``(hour, outcome, count)``: how many runs with ``outcome`` finished in the hour that
starts at ``hour``."""


def check_runs_query(
    schedule_id: uuid.UUID | None,
    limit: int,
    outcome: RunOutcome | str | None,
    since: datetime | None,
) -> tuple[uuid.UUID | None, int, RunOutcome | None, datetime | None]:
    """The arguments of :meth:`RunLogContract.runs`, checked (:class:`InvalidArgument`)."""
    sid = None if schedule_id is None else check_schedule_id(schedule_id)
    check_limit(limit)
    wanted: RunOutcome | None = None
    if outcome is not None:
        try:
            wanted = RunOutcome(outcome)
        except ValueError:
            known = ", ".join(o.value for o in RunOutcome)
            raise InvalidArgument(
                f"unknown run outcome {outcome!r:.100}; expected one of {known}"
            ) from None
    start = None if since is None else to_utc_ms(since, "since", InvalidArgument)
    return sid, limit, wanted, start


def check_run_counts(since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """The arguments of :meth:`RunLogContract.run_counts`, checked."""
    start = to_utc_ms(since, "since", InvalidArgument)
    end = to_utc_ms(until, "until", InvalidArgument)
    if end < start:
        raise InvalidArgument(f"until ({end.isoformat()}) is before since ({start.isoformat()})")
    return start, end


def recorded_runs(
    checked: Sequence[Settlement], results: Iterable[bool]
) -> list[RunEntry | RunDraft]:
    """The runs a settled batch records; a fenced-out item's as ``lease_lost``."""
    runs: list[RunEntry | RunDraft] = []
    for item, ok in zip(checked, results, strict=True):
        run = item.run
        if run is None:
            continue
        if not ok and run.outcome is not RunOutcome.LEASE_LOST:
            run = run._replace(outcome=RunOutcome.LEASE_LOST)
        runs.append(run)
    return runs


def ended_run(
    schedule_id: uuid.UUID,
    scheduled_for: datetime,
    attempt: int,
    now: datetime,
    outcome: RunOutcome,
    error: str,
) -> RunEntry:
    """The run of a row this process ended at ``now`` without dispatching it (the
    sweep's, a malformed row's)."""
    host, pid = this_worker()
    return RunEntry(
        schedule_id, scheduled_for, attempt, None, now, outcome, now - scheduled_for, None,
        host, pid, error,
    )  # fmt: skip


def hour_of(instant: datetime) -> datetime:
    """The start of the hour of ``instant``."""
    return instant.replace(minute=0, second=0, microsecond=0)


class RunLogContract:
    """The run log's methods of the store contract (see the module)."""

    __slots__ = ()

    @property
    def keeps_runs(self) -> bool:
        """True when the store records runs (the worker attaches none otherwise)."""
        return False

    def runs(
        self,
        schedule_id: uuid.UUID | None = None,
        *,
        limit: int = 50,
        outcome: RunOutcome | str | None = None,
        since: datetime | None = None,
    ) -> list[RunRecord]:
        """The run records, newest first, at most ``limit``, filtered by schedule, outcome
        and ``since`` when given.
        """
        check_runs_query(schedule_id, limit, outcome, since)
        return []

    def run_counts(self, since: datetime, until: datetime) -> list[RunCount]:
        """Runs per (hour, outcome) from the hour of ``since`` to ``until`` (exclusive),
        empty ones left out.
        """
        check_run_counts(since, until)
        return []

    def prune_runs(self, older_than: timedelta, *, dry_run: bool = False) -> int:
        """Delete (``dry_run``: count) the run records that finished more than
        ``older_than`` ago; return how many.
        """
        check_run_age(older_than)
        return 0


def check_run_age(older_than: object) -> timedelta:
    """``older_than`` when it is a positive timedelta; else :class:`InvalidArgument`."""
    if not isinstance(older_than, timedelta) or older_than <= timedelta(0):
        raise InvalidArgument(f"older_than must be a positive timedelta, got {older_than!r:.100}")
    return older_than
