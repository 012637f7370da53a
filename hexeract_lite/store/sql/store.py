"""SqlScheduleStore: the store contract written once over SQL.

A dialect supplies its statements (the attributes of ``_sql`` this class names), its
row codec (:class:`.dialect.Codec`) and the abstract hooks below; opening, inserting,
importing, the claim, the sweep and the wake-up hint stay in the subclass.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from ..._log import package_logger
from ...clock import Clock
from ...errors import NotReplayable, ScheduleNotFound, StoreError
from ...runlog import RunOutcome, RunRecord
from ...settlement import Settlement, SettlementKind
from ...snapshot import LeasedOccurrence, MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from ..base import SettlingStore
from ..checks import (
    check_claim,
    check_export,
    check_extension,
    check_flag,
    check_limit,
    check_prefix,
    check_schedule_id,
    check_settlements,
    first_duplicate,
)
from ..listing import (
    PRUNE_COLUMN,
    check_batch_size,
    check_listing,
    check_prune,
    glob_regex,
    prune_cut,
)
from ..longrun import check_abort_kind
from ..notices import malformed_dead_lettered
from ..record import ScheduleRecord
from ..runs import (
    RunCount,
    check_run_age,
    check_run_counts,
    check_runs_query,
    hour_of,
    recorded_runs,
)
from ..settle_plan import settle_plan
from ..stats import StoreStats
from .dialect import MALFORMED, Codec, MalformedRowError, Row, Session

if TYPE_CHECKING:
    from ...message import ScheduledMessage
    from ..changes import Plan
    from ..settle_plan import PlannedSettlement
    from .runs import RunStatements

__all__ = ["SqlScheduleStore"]

_T = TypeVar("_T")
_log = package_logger(__name__)

_PRUNE_BATCH = 500
"""Run records deleted per transaction by ``prune_runs``."""

_ID, _SCHEDULED_FOR, _ATTEMPTS, _LEASED_UNTIL = 0, 5, 8, 10
"""Positions in a :data:`Row` (:data:`~hexeract_lite.store.columns.COLUMN_NAMES` order)."""

_STATEMENT_OF = {
    SettlementKind.DELIVERED: "mark_delivered",
    SettlementKind.RESCHEDULE: "reschedule",
    SettlementKind.FAILED: "mark_failed",
    SettlementKind.DEAD_LETTERED: "mark_dead_lettered",
    SettlementKind.RELEASED: "release",
    SettlementKind.SNOOZED: "snooze",
    SettlementKind.CANCELLED: "cancel_leased",
}
"""Each settlement kind's fenced statement (an attribute of ``_sql``)."""


class SqlScheduleStore(SettlingStore):
    """The contract's method bodies, once, for every SQL engine (see the module)."""

    _sql: Any
    _codec: Codec
    _place: str
    """Where the table is, for messages (``the table t of /path``)."""

    _table: str
    _run_sql: RunStatements | None = None
    """The dialect's run-log statements (:mod:`.runs`); None: the store keeps no run log."""

    @property
    def table(self) -> str:
        """The scheduler table's name."""
        return self._table

    # -- the hooks a dialect supplies ---------------------------------------------

    @abc.abstractmethod
    def _write(
        self, what: str, *, worker: bool = False, atomic: bool = True
    ) -> AbstractContextManager[Session]:
        """A write transaction, committed when the block ends, rolled back when it
        raises; driver errors as :class:`StoreError` naming ``what``. ``worker``: a
        claim or acknowledgement; ``atomic=False``: the engine may autocommit. After the
        commit, the wake-ups :meth:`Session.wake` asked for."""

    @abc.abstractmethod
    def _read(self, what: str, statement: Any, params: Any) -> list[Any]:
        """The rows of one read-only statement."""

    @abc.abstractmethod
    def _row_params(self, record: ScheduleRecord) -> Any:
        """The parameters of ``write_row`` for ``record``."""

    def _settle_plan(self, checked: list[Settlement]) -> list[PlannedSettlement]:
        codec = self._codec
        return settle_plan(
            checked,
            self._now(),
            encode_id=codec.encode_id,
            encode_lease=codec.encode_lease,
            encode_instant=codec.encode_instant,
        )

    @abc.abstractmethod
    def _claim_params(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        """What :meth:`_claim_rows` and :meth:`_leased` need for one claim."""

    @abc.abstractmethod
    def _claim_rows(self, tx: Any, claim: Any) -> list[Any]:
        """Lease the claimable rows inside ``tx``; the leased rows, in any order."""

    @abc.abstractmethod
    def _leased(self, row: Row, claim: Any) -> LeasedOccurrence:
        """A claimed row as the occurrence to dispatch; raises when it does not decode."""

    _regex_flags = ""
    """What the dialect's regex operator needs before a glob's pattern."""

    def _list_query(
        self,
        status: ScheduleStatus | None,
        glob: str | None,
        name: str | None,
        after: uuid.UUID | None,
        limit: int,
    ) -> tuple[Any, dict[str, Any]]:
        flags = (glob is not None, after is not None, name is not None)
        statement = self._sql.listing(status, *flags)
        params: dict[str, Any] = {"limit": limit}
        if glob is not None:
            params["regex"] = self._regex_flags + glob_regex(glob)
        if name is not None:
            params["name_regex"] = self._regex_flags + glob_regex(name)
        if after is not None:
            params["after"] = self._codec.encode_id(after)
        return statement, params

    @abc.abstractmethod
    def _prune_statements(self, column: str) -> tuple[Any, Any]:
        """(count, delete ``n`` rows) of the rows whose end ``column`` is before ``cut``."""

    @abc.abstractmethod
    def _replay_statements(self, ids: list[uuid.UUID], now: datetime) -> list[tuple[Any, Any]]:
        """The statements replaying those of ``ids`` still dead-lettered."""

    @abc.abstractmethod
    def _stats_row(self) -> tuple[datetime, Row]:
        """The stats statement's now and its twelve counts (see ``stats``)."""

    def _with_now(self, params: dict[str, Any]) -> dict[str, Any]:
        params["now"] = self._codec.encode_instant(self._now())
        return params

    def _locked_row(self, tx: Session, sid: uuid.UUID) -> tuple[ScheduleRecord, datetime]:
        """Inside ``tx``: the row's record (locked for the transaction where the engine
        locks rows) and the now to decide by. Unknown id: :class:`ScheduleNotFound`."""
        return self._record(self._locked(tx, sid)), self._now()

    def _locked(self, tx: Session, sid: uuid.UUID) -> Row:
        rows: list[Row] = tx.fetch(self._lock_statement(), {"id": self._codec.encode_id(sid)})
        if not rows:
            raise ScheduleNotFound(sid)
        return rows[0]

    def _lock_statement(self) -> Any:
        return self._sql.select_one

    def _writable(self, what: str) -> None:
        """Raise :class:`StoreError` when the store cannot write."""

    def _list_pending_statement(self) -> Any:
        return self._sql.list_pending

    def _malformed(self, row: Row, exc: BaseException) -> StoreError:
        """The error for a row that must decode (inspect, a change, a named listing)."""
        why = self._codec.why(row, exc)
        return MalformedRowError(
            f"schedule {self._codec.row_label(row)} in {self._place} is malformed: {why}", why
        )

    def _export_error(self, row: Row, exc: BaseException) -> StoreError:
        return self._malformed(row, exc)

    def _stats_extra(self) -> dict[str, Any]:
        """More fields of :class:`StoreStats` (file sizes)."""
        return {}

    def _after_prune(self) -> None:
        """After a prune deleted rows (give the space back)."""

    def _first_duplicate(
        self,
        messages: Sequence[ScheduledMessage],
        what: str,
        otherwise: str,
        where: str | None = None,
    ) -> Exception:
        """After a rolled-back batch: :class:`DuplicateSchedule` for the first repeated
        or stored id, else :class:`StoreError` saying ``otherwise``."""
        duplicate = first_duplicate(
            messages, lambda s: self._read(what, self._sql.exists, {"id": self._codec.encode_id(s)})
        )
        if duplicate is not None:
            return duplicate
        return StoreError(f"{what} on {where or self._place}: {otherwise}")

    # -- decoding ----------------------------------------------------------------

    def _record(self, row: Row) -> ScheduleRecord:
        try:
            return self._codec.decode(row)
        except Exception as exc:
            raise self._malformed(row, exc) from exc

    def _snapshot(self, row: Row) -> ScheduleSnapshot:
        try:
            return self._codec.decode(row).snapshot()
        except Exception as exc:
            raise self._malformed(row, exc) from exc

    def _listing(self, rows: list[Row]) -> list[ScheduleSnapshot | MalformedSchedule]:
        listed: list[ScheduleSnapshot | MalformedSchedule] = []
        for row in rows:
            try:
                listed.append(self._codec.decode(row).snapshot())
            except Exception as exc:
                listed.append(self._codec.malformed(row, exc))
        return listed

    # -- the worker's side --------------------------------------------------------

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> list[LeasedOccurrence]:
        now = check_claim(now, batch_size, lease)
        claim = self._claim_params(now, batch_size, lease)
        with self._write("claim_due", worker=True, atomic=False) as tx:
            rows = self._claim_rows(tx, claim)
        return self._claimed(rows, claim)

    def settle(self, outcomes: Sequence[Settlement]) -> list[bool]:
        checked = check_settlements(outcomes)
        plan = self._settle_plan(checked) if checked else []
        results = [False] * len(checked)
        logs = self._run_sql is not None and any(item.run is not None for item in checked)
        if plan or logs:
            with self._write("settle", worker=True, atomic=len(plan) > 1 or logs) as tx:
                self._apply(tx, plan, checked, results)
        return results

    def settle_and_claim(
        self, outcomes: Sequence[Settlement], now: datetime, batch_size: int, lease: timedelta
    ) -> tuple[list[bool], list[LeasedOccurrence]]:
        now = check_claim(now, batch_size, lease)
        claim = self._claim_params(now, batch_size, lease)
        checked = check_settlements(outcomes)
        plan = self._settle_plan(checked) if checked else []
        results = [False] * len(checked)
        with self._write("settle_and_claim", worker=True) as tx:
            self._apply(tx, plan, checked, results)
            rows = self._claim_rows(tx, claim)
        return results, self._claimed(rows, claim)

    def _apply(
        self,
        tx: Session,
        plan: list[PlannedSettlement],
        checked: list[Settlement],
        results: list[bool],
    ) -> None:
        """The planned statements and the items' runs inside ``tx``."""
        statement = self._settle_statement
        changed = tx.execute_each([(statement(kind), params) for _, kind, params in plan])
        for (index, _, _), count in zip(plan, changed, strict=True):
            results[index] = count > 0
        runs = self._run_sql
        if runs is not None:
            recorded = recorded_runs(checked, results)
            if recorded:
                self._insert_runs(tx, [runs.row(run) for run in recorded])
        if any(ok and item.wakes for ok, item in zip(results, checked, strict=True)):
            tx.wake()

    def _insert_runs(self, tx: Session, rows: list[tuple[Any, ...]]) -> None:
        assert self._run_sql is not None
        for row in rows:
            tx.execute(self._run_sql.insert, row)

    def _settle_statement(self, kind: SettlementKind) -> Any:
        return getattr(self._sql, _STATEMENT_OF[kind])

    def _claimed(self, rows: list[Row], claim: Any) -> list[LeasedOccurrence]:
        """Claimed rows decoded; one that does not decode is dead-lettered instead."""
        claimed: list[LeasedOccurrence] = []
        bad: list[tuple[Row, Exception]] = []
        for row in rows:
            try:
                claimed.append(self._leased(row, claim))
            except Exception as exc:
                bad.append((row, exc))
        if bad:
            self._dead_letter_malformed(bad)
        claimed.sort(key=_due_order)
        return claimed

    def _dead_letter_malformed(self, bad: list[tuple[Row, Exception]]) -> None:
        """Dead-letter claimed rows that do not decode, fenced by the claim's lease; if
        that write fails they keep their lease and a later claim tries again."""
        reasons = [(row, self._codec.why(row, exc)) for row, exc in bad]
        instant = self._now()  # one reading of the clock for the batch
        now = {"now": self._codec.encode_instant(instant)}
        runs = self._run_sql
        try:
            with self._write("claim_due", worker=True) as tx:
                recorded: list[tuple[Any, ...]] = []
                for row, why in reasons:
                    error = MALFORMED + why
                    params = {"id": row[_ID], "lease": row[_LEASED_UNTIL], "error": error}
                    applied = tx.execute(self._sql.mark_dead_lettered, {**now, **params})
                    if applied and runs is not None:
                        entry = runs.malformed(
                            row[_ID], row[_SCHEDULED_FOR], row[_ATTEMPTS], instant, error
                        )
                        if entry is not None:
                            recorded.append(runs.row(entry))
                if recorded:
                    self._insert_runs(tx, recorded)
        except StoreError as exc:
            _log.error("could not dead-letter malformed rows in %s: %s", self._table, exc)
            return
        for row, why in reasons:
            label = self._codec.row_label(row)
            _log.error(
                "schedule %s in %s is malformed and was dead-lettered: %s", label, self._table, why
            )
            malformed_dead_lettered(label, why)

    # -- long handlers (:mod:`hexeract_lite.store.longrun`) ----------------------------

    def extend_lease(self, schedule_id: uuid.UUID, lease: datetime, until: datetime) -> bool:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.extend_lease`: the id and
        lease are bound as a settlement's are (the same fencing)."""
        sid = check_schedule_id(schedule_id)
        extended = check_extension(lease, until)
        plan = self._settle_plan([Settlement.released(sid, lease)])
        if not plan:
            return False  # no lease this store hands out: fenced out
        [(_, _, params)] = plan
        params["until"] = self._codec.encode_instant(extended)
        with self._write("extend_lease", worker=True, atomic=False) as tx:
            return tx.execute(self._sql.extend_lease, params) > 0

    def request_abort(self, schedule_id: uuid.UUID, how: str) -> bool:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.request_abort`."""
        sid = check_schedule_id(schedule_id)
        how = check_abort_kind(how)
        return self._change("request_abort", sid, self._sql.request_abort, {"how": how})

    def abort_requests(self, schedule_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """See :meth:`~hexeract_lite.store.longrun.LongRunContract.abort_requests`: one
        read of the row per id (a worker's batch in flight is small)."""
        found: dict[uuid.UUID, str] = {}
        sids = [check_schedule_id(sid) for sid in schedule_ids]  # all, before any read
        for sid in sids:
            params = {"id": self._codec.encode_id(sid)}
            rows = self._read("abort_requests", self._sql.abort_request, params)
            if rows and rows[0][0] is not None:
                found[sid] = str(rows[0][0])
        return found

    def _change(
        self, what: str, sid: uuid.UUID, statement: Any, params: Any, wake: bool | None = None
    ) -> bool:
        """Whether ``statement`` changed the row of ``sid`` (unknown: :class:`ScheduleNotFound`);
        ``wake``: when it did, wake the workers (``False``: this process's only)."""
        key = {"id": self._codec.encode_id(sid)}
        with self._write(what, atomic=False) as tx:
            changed = tx.execute(statement, {**params, **key}) > 0
            if not changed and not tx.fetch(self._sql.exists, key):
                raise ScheduleNotFound(sid)
            if changed and wake is not None:
                tx.wake(others=wake)
        return changed

    # -- control -------------------------------------------------------------------

    def cancel(self, schedule_id: uuid.UUID) -> bool:
        sid = check_schedule_id(schedule_id)
        return self._change("cancel", sid, self._sql.cancel, self._with_now({}))

    def set_paused(self, schedule_id: uuid.UUID, paused: bool) -> bool:
        sid = check_schedule_id(schedule_id)
        params = {"paused": check_flag("paused", paused)}
        return self._change("set_paused", sid, self._sql.set_paused, params, wake=not paused)

    def replay(self, schedule_id: uuid.UUID) -> None:
        sid = check_schedule_id(schedule_id)
        with self._write("replay") as tx:
            record, now = self._locked_row(tx, sid)
            status = record.status()
            if status is not ScheduleStatus.DEAD_LETTERED:
                raise NotReplayable(sid, status)
            params = {"id": self._codec.encode_id(sid), "at": self._codec.encode_instant(now)}
            tx.execute(self._sql.replay, params)
            tx.wake()

    def replay_dead_letters(self, ids: Sequence[uuid.UUID]) -> int:
        checked = [check_schedule_id(sid) for sid in ids]
        if not checked:
            return 0
        count = 0
        with self._write("replay") as tx:
            for statement, params in self._replay_statements(checked, self._now()):
                count += tx.execute(statement, params)
            if count:
                tx.wake()
        return count

    def modify_record(self, schedule_id: uuid.UUID, plan: Plan[_T]) -> _T:
        sid = check_schedule_id(schedule_id)
        with self._write("modify") as tx:
            return self._modified(tx, sid, plan)

    def _modified(self, tx: Session, sid: uuid.UUID, plan: Plan[_T]) -> _T:
        """``plan`` run on the row of ``sid`` locked in ``tx``; the record it returns written."""
        record, now = self._locked_row(tx, sid)
        try:
            answer, new = plan(record.copy(), now)
        except Exception as exc:
            row = self._locked(tx, sid)
            if self._codec.diagnose(row):  # the row, not the change, is at fault
                raise self._malformed(row, exc) from exc
            raise
        if new is not None:
            tx.execute(self._sql.write_row, self._row_params(new))
            tx.wake()
        return answer

    def modify_named(self, prefix: str, plan: Plan[_T]) -> list[_T]:
        """A row that does not decode raises :class:`StoreError`; nothing is written."""
        params = {"prefix": check_prefix(prefix), "length": len(prefix)}
        with self._write("modify_named") as tx:
            rows = tx.fetch(self._sql.lock_named, params)  # locked where rows lock
            now = self._now()
            planned = [plan(self._record(row).copy(), now) for row in rows]
            written = [new for _, new in planned if new is not None]
            for new in written:
                tx.execute(self._sql.write_row, self._row_params(new))
            if written:
                tx.wake()
        return [answer for answer, _ in planned]

    # -- reading -------------------------------------------------------------------

    def inspect(self, schedule_id: uuid.UUID) -> ScheduleSnapshot | None:
        sid = check_schedule_id(schedule_id)
        rows = self._read("inspect", self._sql.select_one, {"id": self._codec.encode_id(sid)})
        return self._snapshot(rows[0]) if rows else None

    def list_pending(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        return self._page("list_pending", self._list_pending_statement(), limit)

    def list_dead_letter(self, limit: int = 50) -> list[ScheduleSnapshot | MalformedSchedule]:
        return self._page("list_dead_letter", self._sql.list_dead_letter, limit)

    def _page(
        self, what: str, statement: Any, limit: int
    ) -> list[ScheduleSnapshot | MalformedSchedule]:
        check_limit(limit)
        return self._listing(self._read(what, statement, {"limit": limit}))

    def list_named(self, prefix: str) -> list[ScheduleSnapshot]:
        """A row that does not decode raises :class:`StoreError` naming it."""
        params = {"prefix": check_prefix(prefix), "length": len(prefix)}
        rows = self._read("list_named", self._sql.list_named, params)
        return [self._snapshot(row) for row in rows]

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
        statement, params = self._list_query(wanted, glob, named, after, limit)
        return self._listing(self._read("list_schedules", statement, params))

    def stats(self) -> StoreStats:
        at, row = self._stats_row()
        (fresh, leased, paused, delivered, cancelled, dead, due_fresh, oldest_fresh) = row[:8]
        (due_leased, oldest_leased, backoff, in_flight) = row[8:12]
        oldest = min((t for t in (oldest_fresh, oldest_leased) if t is not None), default=None)
        return StoreStats(
            at=at,
            pending=fresh + leased,
            paused=paused,
            delivered=delivered,
            cancelled=cancelled,
            dead_lettered=dead,
            due=due_fresh + due_leased,
            in_flight=in_flight,
            in_backoff=backoff,
            oldest_due_lag=None if oldest is None else at - oldest,
            next_wakeup=self.next_wakeup(),
            **self._stats_extra(),
        )

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
        size = check_batch_size(batch_size)
        if not check_flag("dry_run", dry_run):
            self._writable("prune")
        cut = self._codec.encode_instant(prune_cut(self._now(), older_than))
        total = 0
        for status in wanted:
            count_sql, delete_sql = self._prune_statements(PRUNE_COLUMN[status])
            if dry_run:
                [(n, *_)] = self._read("prune", count_sql, {"cut": cut})
                total += int(n)
                continue
            total = self._delete_batches(delete_sql, {"cut": cut}, size, total, progress)
        if total and not dry_run:
            self._after_prune()
        return total

    # -- the run log -----------------------------------------------------------------

    @property
    def keeps_runs(self) -> bool:
        """True when the table has its runs table."""
        return self._run_sql is not None

    def runs(
        self,
        schedule_id: uuid.UUID | None = None,
        *,
        limit: int = 50,
        outcome: RunOutcome | str | None = None,
        since: datetime | None = None,
    ) -> list[RunRecord]:
        sid, limit, wanted, start = check_runs_query(schedule_id, limit, outcome, since)
        runs = self._run_sql
        if runs is None:
            return []
        statement, params = runs.select(sid, wanted, start, limit)
        return [runs.decode(row) for row in self._read("runs", statement, params)]

    def run_counts(self, since: datetime, until: datetime) -> list[RunCount]:
        start, end = check_run_counts(since, until)
        runs = self._run_sql
        if runs is None:
            return []
        params = runs.count_params(hour_of(start), end)
        return [runs.decode_count(row) for row in self._read("run_counts", runs.counts, params)]

    def prune_runs(self, older_than: timedelta, *, dry_run: bool = False) -> int:
        check_run_age(older_than)
        check_flag("dry_run", dry_run)
        runs = self._run_sql
        if runs is None:
            return 0
        if not dry_run:
            self._writable("prune")
        cut = runs.prune_params(prune_cut(self._now(), older_than))
        if dry_run:
            [(n, *_)] = self._read("prune", runs.prune_count, cut)
            return int(n)
        return self._delete_batches(runs.prune_delete, cut, _PRUNE_BATCH)

    def _delete_batches(
        self,
        statement: Any,
        params: dict[str, Any],
        size: int,
        total: int = 0,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """``total`` plus the rows ``statement`` deleted, ``size`` per transaction."""
        while True:
            with self._write("prune") as tx:
                deleted = tx.execute(statement, {**params, "n": size})
            total += deleted
            if progress is not None and deleted:
                progress(total)
            if deleted < size:
                return total

    # -- copying rows between stores --------------------------------------------

    @property
    def copies_records(self) -> bool:
        return True

    @property
    def shares_transactions(self) -> bool:
        return True

    @abc.abstractmethod
    def _runner_type(self) -> Callable[..., Any]:
        """The dialect's transaction runner class (imported when first needed): built as
        ``(store, handler, clock, policy, timeout, runs=...)``."""

    def transaction_runner(
        self,
        handler: Callable[[ScheduledMessage, Any], object],
        clock: Clock,
        policy: Any,
        timeout: float,
        *,
        run_log: bool = True,
    ) -> Any:
        runs = self._run_sql if run_log else None
        return self._runner_type()(self, handler, clock, policy, timeout, runs=runs)

    def export_records(self, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
        """A row that does not decode raises :class:`StoreError` naming it and the column:
        a copy never silently leaves a row behind."""
        after = check_export(after, limit)
        if after is None:
            rows = self._read("export_records", self._sql.export_first, {"limit": limit})
        else:
            params = {"after": self._codec.encode_id(after), "limit": limit}
            rows = self._read("export_records", self._sql.export_after, params)
        records = []
        for row in rows:
            try:
                records.append(self._codec.decode(row))
            except Exception as exc:
                raise self._export_error(row, exc) from exc
        return records


def _due_order(occ: LeasedOccurrence) -> tuple[datetime, int]:
    """A claim's order: oldest due first (its rule's instant plus any jitter), then id."""
    return occ.message.scheduled_for + occ.jitter_offset, occ.message.schedule_id.int
