"""The run log's statements over ``<table>_runs``, once for every SQL dialect.

The table's columns: ``run_id`` (the order recorded), then :data:`RUN_COLUMNS`
(``started`` and ``duration_ms`` NULL when not dispatched, ``error`` the first line).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..._time import EPOCH
from ...runlog import RunDraft, RunEntry, RunOutcome, RunRecord
from ..runs import ended_run

__all__ = ["RUN_COLUMNS", "RunStatements"]

RUN_COLUMNS = (
    "schedule_id",
    "scheduled_for",
    "attempt",
    "started",
    "finished",
    "outcome",
    "lag_ms",
    "duration_ms",
    "host",
    "pid",
    "error",
)
"""The columns a run writes and reads, in order (``run_id`` is the table's own)."""

_MS = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)
_COLUMNS = ", ".join(RUN_COLUMNS)


class RunStatements:
    """One store's run-log statements and row encoding: ``runs`` the table as SQL names
    it, ``ph`` and ``param`` the positional and named placeholders, ``hour`` the SQL of
    the hour ``finished`` falls in; ``ms_instants``: the table's instants are integer
    epoch milliseconds (a draft's row is then computed from its figures);
    ``decode_row_instant``: the schedules table's instant decoder, when not the runs
    table's."""

    __slots__ = (
        "_decode_id",
        "_decode_instant",
        "_decode_row_instant",
        "_encode_id",
        "_encode_instant",
        "_ms_instants",
        "_param",
        "_runs",
        "counts",
        "insert",
        "prune_count",
        "prune_delete",
    )

    def __init__(
        self,
        runs: str,
        *,
        hour: str,
        encode_id: Callable[[uuid.UUID], Any],
        encode_instant: Callable[[datetime], Any],
        decode_id: Callable[[Any], uuid.UUID],
        decode_instant: Callable[[Any], datetime],
        ph: str = "%s",
        param: Callable[[str], str] = "%({})s".format,
        ms_instants: bool = False,
        decode_row_instant: Callable[[Any], datetime] | None = None,
    ) -> None:
        self._runs, self._param = runs, param
        self._ms_instants = ms_instants
        self._encode_id, self._encode_instant = encode_id, encode_instant
        self._decode_id, self._decode_instant = decode_id, decode_instant
        self._decode_row_instant = decode_row_instant or decode_instant
        marks = ", ".join([ph] * len(RUN_COLUMNS))
        self.insert = f"INSERT INTO {runs} ({_COLUMNS}) VALUES ({marks})"
        self.counts = (
            f"SELECT {hour}, outcome, count(*) FROM {runs}"
            f" WHERE finished >= {param('since')} AND finished < {param('until')}"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        )
        self.prune_count = f"SELECT count(*) FROM {runs} WHERE finished < {param('cut')}"
        self.prune_delete = (
            f"DELETE FROM {runs} WHERE run_id IN (SELECT run_id FROM {runs}"
            f" WHERE finished < {param('cut')} LIMIT {param('n')})"
        )

    def select(
        self,
        schedule_id: uuid.UUID | None,
        outcome: RunOutcome | None,
        since: datetime | None,
        limit: int,
    ) -> tuple[str, dict[str, Any]]:
        """The statement and parameters of ``runs()``: newest first."""
        p = self._param
        where: list[str] = []
        params: dict[str, Any] = {"limit": limit}
        if schedule_id is not None:
            where.append(f"schedule_id = {p('id')}")
            params["id"] = self._encode_id(schedule_id)
        if outcome is not None:
            where.append(f"outcome = {p('outcome')}")
            params["outcome"] = outcome.value
        if since is not None:
            where.append(f"finished >= {p('since')}")
            params["since"] = self._encode_instant(since)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        statement = (
            f"SELECT {_COLUMNS} FROM {self._runs}{clause}"
            f" ORDER BY finished DESC, run_id DESC LIMIT {p('limit')}"
        )
        return statement, params

    def row(self, run: RunEntry | RunDraft) -> tuple[Any, ...]:
        """The values :attr:`insert` binds for ``run``."""
        if type(run) is RunDraft and self._ms_instants:
            return self._draft_row(run)
        sid, scheduled, attempt, started, finished, outcome, lag, took, host, pid, error = (
            run.entry()
        )
        instant = self._encode_instant
        return (
            self._encode_id(sid),
            instant(scheduled),
            attempt,
            None if started is None else instant(started),
            instant(finished),
            outcome.value,
            lag // _MS,
            None if took is None else took / _MS,
            host,
            pid,
            error,
        )

    def _draft_row(self, run: RunDraft) -> tuple[Any, ...]:
        """:meth:`row` of a draft, from its figures in whole microseconds (the values
        of ``row(run.entry())``, without making the entry's datetimes)."""
        stamp, sid, scheduled, attempt, outcome, began, duration, error = run
        due = (scheduled - EPOCH) // _US
        now = stamp.now_us
        if began is None or duration is None:
            return (
                self._encode_id(sid), due // 1000, attempt, None, now // 1000, outcome._value_,
                (now - due) // 1000, None, stamp.host, stamp.pid, error,
            )  # fmt: skip
        started = max(now - round((stamp.mono - began) * 1e6), min(due, now))
        took = round(duration * 1e6)
        return (
            self._encode_id(sid), due // 1000, attempt, started // 1000, (started + took) // 1000,
            outcome._value_, (started - due) // 1000, took / 1000, stamp.host, stamp.pid, error,
        )  # fmt: skip

    def malformed(
        self, sid: Any, scheduled: Any, attempts: Any, now: datetime, error: str
    ) -> RunEntry | None:
        """The ``dead_lettered`` run of a claimed row that did not decode, from its raw
        id, ``scheduled_for`` and ``attempts``; None when those do not decode either
        (the row is dead-lettered all the same, without a run)."""
        try:
            schedule_id = self._decode_id(sid)
            scheduled_for = self._decode_row_instant(scheduled)
            attempt = int(attempts)
        except Exception:
            return None
        return ended_run(
            schedule_id,
            scheduled_for,
            attempt,
            now,
            RunOutcome.DEAD_LETTERED,
            error.split("\n", 1)[0],
        )

    def decode(self, row: Any) -> RunRecord:
        """A row of :meth:`select` as a record."""
        sid, scheduled, attempt, started, finished, outcome, lag, took, host, pid, error = row
        instant = self._decode_instant
        return RunRecord(
            schedule_id=self._decode_id(sid),
            scheduled_for=instant(scheduled),
            attempt=int(attempt),
            started=None if started is None else instant(started),
            finished=instant(finished),
            outcome=RunOutcome(outcome),
            lag=timedelta(milliseconds=int(lag)),
            duration=None if took is None else timedelta(milliseconds=float(took)),
            host=str(host),
            pid=int(pid),
            error=None if error is None else str(error),
        )

    def count_params(self, since: datetime, until: datetime) -> dict[str, Any]:
        """The parameters of :attr:`counts`."""
        return {"since": self._encode_instant(since), "until": self._encode_instant(until)}

    def prune_params(self, cut: datetime) -> dict[str, Any]:
        """The parameters of :attr:`prune_count` (and, with ``n``, :attr:`prune_delete`)."""
        return {"cut": self._encode_instant(cut)}

    def decode_count(self, row: Any) -> tuple[datetime, RunOutcome, int]:
        """A row of :attr:`counts`."""
        hour, outcome, count = row
        return self._decode_instant(hour), RunOutcome(outcome), int(count)
