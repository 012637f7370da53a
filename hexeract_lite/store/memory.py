"""InMemoryScheduleStore: the reference implementation of the store contract."""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from .._time import to_utc_ms
from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (
    NotReplayable,
    ScheduleNotFound,
)
from ..message import ScheduledMessage
from ..runlog import RunEntry, RunOutcome, RunRecord
from ..settlement import Settlement, SettlementKind
from ..snapshot import LeasedOccurrence, MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from .base import SWEEP_ERROR, SWEEP_KEPT, SettlingStore
from .changes import Plan
from .checks import (
    check_claim,
    check_export,
    check_extension,
    check_flag,
    check_limit,
    check_max_attempts,
    check_messages,
    check_prefix,
    check_records,
    check_schedule_id,
    check_settlements,
    first_duplicate,
    no_transactions,
    retry_deadline,
)
from .fork import hold, start_afresh_after_fork
from .listing import (
    PRUNE_COLUMN,
    check_batch_size,
    check_listing,
    check_prune,
    matches,
    prune_cut,
)
from .longrun import check_abort_kind
from .record import ScheduleRecord
from .runs import (
    RunCount,
    check_run_age,
    check_run_counts,
    check_runs_query,
    ended_run,
    hour_of,
    recorded_runs,
)
from .settle_plan import HELD_KINDS
from .stats import StoreStats, stats_of_records

_T = TypeVar("_T")

__all__ = ["InMemoryScheduleStore"]


_MS = timedelta(milliseconds=1)


def _sort_key(record: ScheduleRecord) -> tuple[datetime, bytes]:
    return (record.scheduled_for, record.schedule_id.bytes)


def _idle(row: ScheduleRecord, now: datetime) -> bool:
    """Live, not paused and not leased: a row a claim or the sweep may take."""
    return not row.is_terminal and not row.paused and row.live_lease(now) is None


def _replayed(row: ScheduleRecord, now: datetime) -> None:
    row.scheduled_for = now
    row.jitter_offset_ms = None
    row.attempts = 0
    row.leased_until = None
    row.last_error = None
    row.paused = False
    row.dead_lettered_at = None
    row.next_after_lease = None


class InMemoryScheduleStore(SettlingStore):
    """Schedules in a dict, guarded by one lock: the executable specification of
    :class:`ScheduleStore`, for tests and schedules that need not outlive the process.
    Its run log keeps the newest ``run_log_size`` (>= 1) records.

    .. versionadded:: 0.1.0
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, run_log_size: int = 200) -> None:
        super().__init__()
        check_limit(run_log_size, "run_log_size")
        self._clock = clock
        self._rows: dict[uuid.UUID, ScheduleRecord] = {}
        self._runs: deque[RunEntry] = deque(maxlen=run_log_size)
        self._lock = threading.Lock()
        start_afresh_after_fork(self)

    def _before_fork(self) -> bool:
        return hold(self._lock, 10)

    def _after_fork_in_parent(self) -> None:
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()

    def _get(self, schedule_id: uuid.UUID) -> ScheduleRecord:
        row = self._rows.get(check_schedule_id(schedule_id))
        if row is None:
            raise ScheduleNotFound(schedule_id)
        return row

    # -- writing ---------------------------------------------------------------

    def insert_many(
        self, messages: Sequence[ScheduledMessage], max_attempts: int, *, connection: object = None
    ) -> None:
        if connection is not None:
            raise no_transactions(self, connection)
        check_max_attempts(max_attempts)
        now = self._now()
        messages = check_messages(messages, now)
        with self._lock:
            duplicate = first_duplicate(messages, self._rows.__contains__)
            if duplicate is not None:
                raise duplicate
            for message in messages:
                self._rows[message.schedule_id] = ScheduleRecord.new(message, max_attempts, now)
        if messages:
            self.changes.notify()

    # -- worker ----------------------------------------------------------------

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        now = check_claim(now, batch_size, lease)
        until = to_utc_ms(now + lease, "lease deadline")
        with self._lock:
            return self._claim(now, batch_size, until)

    def _claim(self, now: datetime, batch_size: int, until: datetime) -> list[LeasedOccurrence]:
        due = sorted(
            (
                row
                for row in self._rows.values()
                if row.scheduled_for <= now and row.attempts < row.max_attempts and _idle(row, now)
            ),
            key=_sort_key,
        )[:batch_size]
        for row in due:
            row.attempts += 1
            row.leased_until = until
            row.abort_requested = None
        return [row.leased() for row in due]

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        now = check_claim(now, batch_size, lease)
        until = to_utc_ms(now + lease, "lease deadline")
        checked = check_settlements(outcomes)
        with self._lock:
            results, woke = self._settle(checked)
            claimed = self._claim(now, batch_size, until)
        if woke:
            self.changes.notify()
        return results, claimed

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        checked = check_settlements(outcomes)
        with self._lock:
            results, woke = self._settle(checked)
        if woke:
            self.changes.notify()
        return results

    def _settle(self, checked: list[Settlement]) -> tuple[list[bool], bool]:
        """Under the lock: the answers, and whether one that applied wakes workers."""
        if not checked:
            return [], False
        results: list[bool] = []
        woke = False
        now = self._now()
        # every retry deadline first: one out of range fails the batch, unwritten
        deadlines = [
            retry_deadline(now, item.retry_in)
            if item.retry_in is not None and item.kind in HELD_KINDS
            else None
            for item in checked
        ]
        for item, deadline in zip(checked, deadlines, strict=True):
            row = self._rows.get(item.schedule_id)
            if row is None or row.is_terminal or row.leased_until != item.lease:
                results.append(False)
                continue
            kind = item.kind
            row.leased_until = deadline  # a held kind's retry deadline; else cleared
            if kind is SettlementKind.DELIVERED or kind is SettlementKind.RESCHEDULE:
                # a change made during the lease set the next firing: it wins
                nxt = row.next_after_lease or item.next
                until = row.backfill_until  # a backfill ends past its window
                if until is not None and (nxt is None or nxt > until):
                    row.backfill_until = None
                if item.counted:
                    row.firings = (row.firings or 0) + 1
                if nxt is None:
                    row.delivered_at = now
                else:
                    row.jitter_offset_ms = (
                        None if row.next_after_lease or item.offset is None else item.offset // _MS
                    )
                    row.scheduled_for = nxt
                    row.attempts = 0
                    row.last_error = None
                    row.next_after_lease = None
                    row.snoozes = None
            elif kind is SettlementKind.FAILED:
                row.last_error = item.error
            elif kind is SettlementKind.RELEASED or kind is SettlementKind.SNOOZED:
                row.attempts = max(row.attempts - 1, 0)
                if kind is SettlementKind.SNOOZED:
                    row.snoozes = (row.snoozes or 0) + 1
            elif kind is SettlementKind.CANCELLED:
                row.cancelled_at = now
            else:
                row.dead_lettered_at = now
                row.last_error = item.error
            woke = woke or item.wakes
            results.append(True)
        self._runs.extend(run.entry() for run in recorded_runs(checked, results))
        return results, woke

    def extend_lease(self, schedule_id: uuid.UUID, lease: datetime, until: datetime) -> bool:
        sid = check_schedule_id(schedule_id)
        until = check_extension(lease, until)
        with self._lock:
            row = self._rows.get(sid)
            if row is None or row.is_terminal or row.leased_until != lease:
                return False
            row.leased_until = until
            return True

    def request_abort(self, schedule_id: uuid.UUID, how: str) -> bool:
        sid = check_schedule_id(schedule_id)
        how = check_abort_kind(how)
        with self._lock:
            row = self._get(sid)
            if row.is_terminal or row.leased_until is None:
                return False
            row.abort_requested = how
            return True

    def abort_requests(self, schedule_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        with self._lock:
            rows = [self._rows.get(check_schedule_id(sid)) for sid in schedule_ids]
            return {r.schedule_id: r.abort_requested for r in rows if r and r.abort_requested}

    def dead_letter_exhausted(self) -> int:
        with self._lock:
            now = self._now()
            count = 0
            for row in self._rows.values():
                if row.attempts >= row.max_attempts and _idle(row, now):
                    row.dead_lettered_at = now
                    last = row.last_error
                    row.last_error = SWEEP_ERROR if last is None else SWEEP_KEPT + last
                    row.leased_until = None
                    count += 1
                    self._runs.append(
                        ended_run(
                            row.schedule_id,
                            row.scheduled_for,
                            row.attempts,
                            now,
                            RunOutcome.SWEPT,
                            SWEEP_ERROR,
                        )
                    )
            return count

    # -- the run log -------------------------------------------------------------

    @property
    def keeps_runs(self) -> bool:
        return True

    def runs(
        self,
        schedule_id: uuid.UUID | None = None,
        *,
        limit: int = 50,
        outcome: RunOutcome | str | None = None,
        since: datetime | None = None,
    ) -> list[RunRecord]:
        sid, limit, wanted, start = check_runs_query(schedule_id, limit, outcome, since)
        with self._lock:
            order = [(RunRecord.of(run), index) for index, run in enumerate(self._runs)]
        order.sort(key=lambda p: (p[0].finished, p[1]), reverse=True)
        found = [
            run
            for run, _ in order
            if (sid is None or run.schedule_id == sid)
            and (wanted is None or run.outcome is wanted)
            and (start is None or run.finished >= start)
        ]
        return found[:limit]

    def run_counts(self, since: datetime, until: datetime) -> list[RunCount]:
        start, end = check_run_counts(since, until)
        start = hour_of(start)
        counts: dict[tuple[datetime, RunOutcome], int] = {}
        with self._lock:
            for run in self._runs:
                finished = RunRecord.of(run).finished
                if start <= finished < end:
                    key = (hour_of(finished), run.outcome)
                    counts[key] = counts.get(key, 0) + 1
        return [(hour, outcome, n) for (hour, outcome), n in sorted(counts.items())]

    def prune_runs(self, older_than: timedelta, *, dry_run: bool = False) -> int:
        check_run_age(older_than)
        check_flag("dry_run", dry_run)
        with self._lock:
            cut = prune_cut(self._now(), older_than)
            kept = [run for run in self._runs if RunRecord.of(run).finished >= cut]
            count = len(self._runs) - len(kept)
            if not dry_run:
                self._runs = deque(kept, maxlen=self._runs.maxlen)
        return count

    # -- control ---------------------------------------------------------------

    def cancel(self, schedule_id: uuid.UUID) -> bool:
        with self._lock:
            row = self._get(schedule_id)
            if row.is_terminal:
                return False
            row.cancelled_at = self._now()
            row.leased_until = None
            return True

    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        check_flag("paused", paused)
        with self._lock:
            row = self._get(schedule_id)
            if row.is_terminal or row.paused == paused:
                return False
            row.paused = paused
            row.pause_note = None
        self.changes.notify()
        return True

    def next_wakeup(self) -> datetime | None:
        with self._lock:
            return min(
                (
                    row.scheduled_for
                    if row.leased_until is None
                    else max(row.scheduled_for, row.leased_until)
                    for row in self._rows.values()
                    if not row.is_terminal and not row.paused
                ),
                default=None,
            )

    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        with self._lock:
            row = self._rows.get(check_schedule_id(schedule_id))
            return None if row is None else row.snapshot()

    # -- admin -----------------------------------------------------------------

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        check_limit(limit)
        with self._lock:
            rows = sorted((r for r in self._rows.values() if not r.is_terminal), key=_sort_key)
            return [row.snapshot() for row in rows[:limit]]

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        check_limit(limit)
        with self._lock:
            rows = [r for r in self._rows.values() if r.dead_lettered_at is not None]
            rows.sort(key=lambda r: r.schedule_id.bytes)
            rows.sort(key=lambda r: r.dead_lettered_at, reverse=True)  # type: ignore[arg-type,return-value]
            return [row.snapshot() for row in rows[:limit]]

    def list_schedules(
        self,
        *,
        status: ScheduleStatus | str | None = None,
        event_type: str | None = None,
        after: uuid.UUID | None = None,
        limit: int = 50,
        name: str | None = None,
    ) -> list[ScheduleSnapshot | MalformedSchedule]:
        wanted, glob, named, after, limit = check_listing(status, event_type, name, after, limit)
        with self._lock:
            rows = sorted(
                (
                    r
                    for r in self._rows.values()
                    if (after is None or r.schedule_id.bytes > after.bytes)
                    and (wanted is None or r.status() is wanted)
                    and matches(glob, r.event_type)
                    and (named is None or (r.name is not None and matches(named, r.name)))
                ),
                key=lambda r: r.schedule_id.bytes,
            )
            return [row.snapshot() for row in rows[:limit]]

    def replay_dead_letters(self, ids: Sequence[uuid.UUID]) -> int:
        checked = [check_schedule_id(sid) for sid in ids]
        count = 0
        with self._lock:
            now = self._now()
            for sid in checked:
                row = self._rows.get(sid)
                if row is None or row.dead_lettered_at is None:
                    continue
                _replayed(row, now)
                count += 1
        if count:
            self.changes.notify()
        return count

    def prune(
        self,
        older_than: timedelta,
        *,
        statuses: Iterable[ScheduleStatus | str] = ("delivered", "cancelled"),
        batch_size: int = 500,
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        older_than, wanted = check_prune(older_than, statuses)
        check_batch_size(batch_size)
        check_flag("dry_run", dry_run)
        with self._lock:
            cut = prune_cut(self._now(), older_than)
            doomed = [
                sid
                for sid, row in self._rows.items()
                if any(
                    (ended := getattr(row, PRUNE_COLUMN[status])) is not None and ended < cut
                    for status in wanted
                )
            ]
            if not dry_run:
                for sid in doomed:
                    del self._rows[sid]
        if progress is not None:
            progress(len(doomed))
        return len(doomed)

    def stats(self) -> StoreStats:
        wakeup = self.next_wakeup()
        with self._lock:
            return stats_of_records(self._rows.values(), self._now(), wakeup)

    def replay(self, schedule_id: uuid.UUID) -> None:
        with self._lock:
            row = self._get(schedule_id)
            status = row.status()
            if status is not ScheduleStatus.DEAD_LETTERED:
                raise NotReplayable(schedule_id, status)
            _replayed(row, self._now())
        self.changes.notify()

    def modify_record(self, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        with self._lock:
            row = self._get(schedule_id)
            answer, new = plan(row.copy(), self._now())
            if new is not None:
                self._rows[row.schedule_id] = new
        if new is not None:
            self.changes.notify()
        return answer

    def modify_named(self, prefix: str, plan: Plan[_T]) -> list[_T]:
        with self._lock:
            now = self._now()
            planned = [plan(row.copy(), now) for row in self._named(prefix)]
            for _, new in planned:
                if new is not None:
                    self._rows[new.schedule_id] = new
        if any(new is not None for _, new in planned):
            self.changes.notify()
        return [answer for answer, _ in planned]

    def list_named(self, prefix: str) -> list[ScheduleSnapshot]:
        with self._lock:
            return [row.snapshot() for row in self._named(prefix)]

    def _named(self, prefix: str) -> list[ScheduleRecord]:
        check_prefix(prefix)
        rows = [
            r
            for r in self._rows.values()
            if r.name is not None and r.name.startswith(prefix) and not r.is_terminal
        ]
        rows.sort(key=lambda r: (r.name or "").encode())
        return rows

    # -- copying rows between stores -------------------------------------------

    @property
    def writers_take_turns(self) -> bool:
        return True

    @property
    def copies_records(self) -> bool:
        return True

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        after = check_export(after, limit)
        with self._lock:
            rows = sorted(
                (r for r in self._rows.values() if after is None or r.schedule_id > after),
                key=lambda r: r.schedule_id.bytes,
            )
            return [row.copy() for row in rows[:limit]]

    def import_records(self, records: Sequence[ScheduleRecord]) -> int:
        fresh = check_records(records)
        with self._lock:
            inserted = 0
            for record in fresh:
                if record.schedule_id not in self._rows:
                    self._rows[record.schedule_id] = record.copy()
                    inserted += 1
        if inserted:
            self.changes.notify()
        return inserted

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
