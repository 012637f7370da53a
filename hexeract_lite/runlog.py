"""The run log: one record per dispatch attempt and per firing settled without one,
written by the store in the transaction that settles it.

A worker attaches a :class:`RunDraft` or :class:`RunEntry` to each settlement
(``Settlement.run``); a store with a run log (``store.keeps_runs``) records it
(``lease_lost`` when fenced out) and adds ``swept`` records for its sweep. A store
without one answers ``runs()`` with an empty list.
"""

from __future__ import annotations

import enum
import os
import socket
import uuid
from datetime import datetime, timedelta
from typing import NamedTuple

import attrs

from ._time import EPOCH, rfc3339
from .occurrence import OccurrenceId

__all__ = [
    "RunDraft",
    "RunEntry",
    "RunOutcome",
    "RunRecord",
    "RunStamp",
    "delivered_run",
    "this_worker",
]


class RunOutcome(enum.StrEnum):
    """What became of one run: ``delivered`` (the sink succeeded), ``failed`` (it
    failed; the occurrence waits out its retry delay), ``timed_out`` (the same, for a
    call past ``dispatch_timeout``), ``dead_lettered`` (the last attempt failed),
    ``snoozed``, ``aborted`` (stopped by ``SchedulerControl.abort``), ``released`` (not
    dispatched: the worker was stopping), ``skipped`` (not dispatched: later than its
    misfire grace, or missed under its policy), ``lease_lost`` (the settlement was
    fenced out: another worker owns the occurrence) and ``swept`` (dead-lettered by a
    sweep). An occurrence whose lease ran out before its turn leaves no record."""

    DELIVERED = "delivered"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    DEAD_LETTERED = "dead_lettered"
    RELEASED = "released"
    SKIPPED = "skipped"
    LEASE_LOST = "lease_lost"
    SWEPT = "swept"
    SNOOZED = "snoozed"
    ABORTED = "aborted"


class RunEntry(NamedTuple):
    """A run as a worker hands it to a store with a settlement; the fields are
    :class:`RunRecord`'s (instants and ``lag`` may be finer than the millisecond)."""

    schedule_id: uuid.UUID
    scheduled_for: datetime
    attempt: int
    started: datetime | None
    finished: datetime
    outcome: RunOutcome
    lag: timedelta
    duration: timedelta | None
    host: str
    pid: int
    error: str | None

    def entry(self) -> RunEntry:
        """This run (a :class:`RunDraft` makes its entry here)."""
        return self


@attrs.frozen(kw_only=True)
class RunRecord:
    """One run of a schedule: a dispatch attempt, or a firing settled without one.

    - ``schedule_id``, ``scheduled_for`` and ``attempt``: the occurrence and which of
      its attempts this was (:attr:`occurrence_id` is derived from the first two);
    - ``started``: when the sink was called (None: not dispatched); ``finished``: when
      the call returned, or when the firing was settled without one;
    - ``lag``: ``started`` (else ``finished``) minus ``scheduled_for``; ``duration``:
      how long the sink took (None: not dispatched);
    - ``host`` and ``pid``: the worker's;
    - ``error``: the first line of the failure (the full text stays in the schedule's
      ``last_error``), None for a delivery.

    .. versionadded:: 0.1.0
    """

    schedule_id: uuid.UUID
    scheduled_for: datetime
    attempt: int
    started: datetime | None
    finished: datetime
    outcome: RunOutcome
    lag: timedelta
    duration: timedelta | None
    host: str
    pid: int
    error: str | None = None

    @classmethod
    def of(cls, entry: RunEntry) -> RunRecord:
        """The record of ``entry``, its instants and lag cut to the millisecond as the
        stores keep them."""
        started = entry.started
        return cls(
            schedule_id=entry.schedule_id,
            scheduled_for=entry.scheduled_for,
            attempt=entry.attempt,
            started=None if started is None else _ms(started),
            finished=_ms(entry.finished),
            outcome=entry.outcome,
            lag=entry.lag // _MS * _MS,
            duration=entry.duration,
            host=entry.host,
            pid=entry.pid,
            error=entry.error,
        )

    @property
    def occurrence_id(self) -> OccurrenceId:
        """The occurrence's id: ``OccurrenceId.derive(schedule_id, scheduled_for)``."""
        return OccurrenceId.derive(self.schedule_id, self.scheduled_for)

    def as_json(self) -> dict[str, object]:
        """The record as JSON values (instants RFC 3339, durations in seconds)."""
        return {
            "schedule_id": str(self.schedule_id),
            "occurrence_id": str(self.occurrence_id),
            "scheduled_for": rfc3339(self.scheduled_for),
            "attempt": self.attempt,
            "started": None if self.started is None else rfc3339(self.started),
            "finished": rfc3339(self.finished),
            "outcome": self.outcome.value,
            "lag_s": self.lag.total_seconds(),
            "duration_s": None if self.duration is None else self.duration.total_seconds(),
            "host": self.host,
            "pid": self.pid,
            "error": self.error,
        }


_HOST = socket.gethostname()
_MS = timedelta(milliseconds=1)


def this_worker() -> tuple[str, int]:
    """(host name, process id) of the calling process (the pid read at each call, so a
    forked child names itself)."""
    return _HOST, os.getpid()


def _ms(instant: datetime) -> datetime:
    """``instant`` cut to the millisecond, as the stores keep instants."""
    return instant.replace(microsecond=instant.microsecond // 1000 * 1000)


def delivered_run(
    schedule_id: uuid.UUID, scheduled_for: datetime, attempt: int, began: float, now: datetime
) -> RunEntry:
    """The ``delivered`` run of a dispatch that began at ``began`` (monotonic) and
    ended now (``now`` on the wall clock): a transactional handler's, recorded in its
    own transaction."""
    import time

    stamp = RunStamp(now, time.monotonic())
    duration = stamp.mono - began
    return stamp.record(
        schedule_id, scheduled_for, attempt, RunOutcome.DELIVERED, began, duration, None
    ).entry()


class RunStamp:
    """One batch's reading of the clocks and the worker's identity, from which each of
    its runs is made: ``now`` (the wall clock) and ``mono`` (``time.monotonic()``)
    read together once the batch's turns are over; ``now_us``: ``now`` in microseconds
    since the epoch, for a store that encodes a :class:`RunDraft` without datetimes."""

    __slots__ = ("host", "mono", "now", "now_us", "pid")

    def __init__(self, now: datetime, mono: float) -> None:
        self.now = now
        self.mono = mono
        self.now_us = (now - EPOCH) // _US
        self.host, self.pid = this_worker()

    def record(
        self,
        schedule_id: uuid.UUID,
        scheduled_for: datetime,
        attempt: int,
        outcome: RunOutcome,
        began: float | None,
        duration: float | None,
        error: str | None,
    ) -> RunDraft:
        """The run of one occurrence: dispatched at ``began`` (monotonic) for
        ``duration`` seconds, or (``began`` None) settled without a dispatch now."""
        return _new(
            RunDraft, (self, schedule_id, scheduled_for, attempt, outcome, began, duration, error)
        )


class RunDraft(NamedTuple):
    """A run as the worker attaches it to a settlement: the batch's :class:`RunStamp`
    and the occurrence's figures, from which :meth:`entry` computes the
    :class:`RunEntry`; a store may encode it from the figures directly."""

    stamp: RunStamp
    schedule_id: uuid.UUID
    scheduled_for: datetime
    attempt: int
    outcome: RunOutcome
    began: float | None
    """When the sink was called (``time.monotonic()``); None: not dispatched."""
    duration: float | None
    """How long the sink took, in seconds; None: not dispatched."""
    error: str | None

    def entry(self) -> RunEntry:
        """The :class:`RunEntry` of this run: ``started`` is ``began`` on the wall
        clock (the stamp's ``now`` less the monotonic time since, and not before the
        due instant when that is past), ``finished`` ``started`` plus ``duration``; the
        stamp's ``now`` when not dispatched."""
        stamp, schedule_id, scheduled_for, attempt, outcome, began, duration, error = self
        now = stamp.now
        if began is None or duration is None:
            return RunEntry(
                schedule_id, scheduled_for, attempt, None, now, outcome, now - scheduled_for,
                None, stamp.host, stamp.pid, error,
            )  # fmt: skip
        took = timedelta(seconds=duration)
        # never before the due instant it was claimed at (a frozen clock would make it so)
        started = max(now - timedelta(seconds=stamp.mono - began), min(scheduled_for, now))
        return RunEntry(
            schedule_id, scheduled_for, attempt, started, started + took, outcome,
            started - scheduled_for, took, stamp.host, stamp.pid, error,
        )  # fmt: skip


_new = tuple.__new__
_US = timedelta(microseconds=1)
