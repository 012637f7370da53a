"""The run log: one record per dispatch attempt and per firing settled without one,
written by the store in the transaction that settles it (``Settlement.run``). A store
without one (``keeps_runs`` False) answers ``runs()`` with an empty list."""

from __future__ import annotations

import enum
import os
import socket
import time
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
    """What became of one run: ``delivered``, ``failed`` (retried after its delay),
    ``timed_out`` (the same, past ``dispatch_timeout``), ``dead_lettered``, ``snoozed``,
    ``aborted``, ``released`` (the worker was stopping), ``skipped`` (a recurring firing
    passed over by its misfire grace or policy; a one-shot missed is ``dead_lettered``),
    ``lease_lost`` (fenced out) and ``swept`` (dead-lettered by a sweep). An occurrence
    whose lease ran out before its turn leaves no record."""

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
    """A run as a worker hands it to a store: :class:`RunRecord`'s fields, at full
    precision."""

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
        """This run."""
        return self


@attrs.frozen(kw_only=True)
class RunRecord:
    """One run of a schedule: a dispatch attempt, or a firing settled without one.

    ``started``: when the sink was called (None: not dispatched); ``finished``: when it
    returned, or when the firing was settled; ``lag``: ``started`` (else ``finished``)
    minus ``scheduled_for``; ``duration``: the sink's time; ``host``/``pid``: the
    worker's; ``error``: the failure's first line (the full text is in ``last_error``).

    .. versionadded:: 0.1.0"""

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
        """The record of ``entry``, cut to the millisecond as the stores keep it."""
        started = None if entry.started is None else _ms(entry.started)
        cut = {"started": started, "finished": _ms(entry.finished), "lag": entry.lag // _MS * _MS}
        return cls(**(entry._asdict() | cut))

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
    """(host name, process id), the pid read at each call (a forked child names itself)."""
    return _HOST, os.getpid()


def _ms(instant: datetime) -> datetime:
    return instant.replace(microsecond=instant.microsecond // 1000 * 1000)


def delivered_run(
    schedule_id: uuid.UUID, scheduled_for: datetime, attempt: int, began: float, now: datetime
) -> RunEntry:
    """The ``delivered`` run of a dispatch that began at ``began`` (monotonic) and ended
    now: a transactional handler's."""
    stamp = RunStamp(now, time.monotonic())
    duration = stamp.mono - began
    return stamp.record(
        schedule_id, scheduled_for, attempt, RunOutcome.DELIVERED, began, duration, None
    ).entry()


class RunStamp:
    """One batch's clocks (``now``, ``mono`` read together; ``now_us``: ``now`` in epoch
    microseconds) and worker identity, from which its runs are made."""

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
        """The run of one occurrence dispatched at ``began`` for ``duration`` seconds, or
        (``began`` None) settled undispatched now."""
        return _new(
            RunDraft, (self, schedule_id, scheduled_for, attempt, outcome, began, duration, error)
        )


class RunDraft(NamedTuple):
    """A run as the worker attaches it to a settlement: its stamp and figures;
    :meth:`entry` makes the :class:`RunEntry`."""

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
        """The :class:`RunEntry`: ``started`` is ``began`` on the wall clock (not before the
        due instant), ``finished`` ``started`` plus ``duration``; undispatched: the stamp's
        ``now``."""
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
