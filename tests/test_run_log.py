"""The run log on every store: what each settlement records, in its transaction, and
how the log is read, counted and pruned."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    InvalidArgument,
    InvalidConfiguration,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
)
from hexeract_lite.occurrence import OccurrenceId
from hexeract_lite.runlog import RunEntry, RunOutcome, RunRecord, RunStamp
from hexeract_lite.settlement import Settlement
from hexeract_lite.store.base import ScheduleStore
from hexeract_lite.store.memory import InMemoryScheduleStore
from hexeract_lite.store.sqlite import SCHEMA_VERSION, SqliteScheduleStore

from .conftest import T0, FrozenTime

S = timedelta(seconds=1)
FAST = SchedulerWorkerConfig(retry_base_delay=S, retry_max_delay=S, jitter=False)


def one_shot(at: object = T0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), at, "ev", {"n": 1})  # type: ignore[arg-type]


def failing_once() -> tuple[list[int], Callable[[ScheduledMessage], None]]:
    calls: list[int] = []

    def sink(message: ScheduledMessage) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom\nsecond line")

    return calls, sink


def test_every_attempt_is_recorded_newest_first(store: ScheduleStore, frozen: FrozenTime) -> None:
    assert store.keeps_runs
    msg = one_shot()
    store.insert(msg, 3)
    frozen.shift(2 * S)  # found 2 s late
    _, sink = failing_once()
    worker = SchedulerWorker(store, sink, FAST)
    assert worker.run_once().retried == 1
    frozen.shift(5 * S)
    assert worker.run_once().delivered == 1
    second, first = store.runs()
    assert first.outcome is RunOutcome.FAILED and second.outcome is RunOutcome.DELIVERED
    assert (first.attempt, second.attempt) == (1, 2)
    assert first.error == "RuntimeError: boom …", "the first line only"
    assert second.error is None
    assert first.schedule_id == second.schedule_id == msg.schedule_id
    assert first.scheduled_for == T0
    assert first.occurrence_id == OccurrenceId.derive(msg.schedule_id, T0)
    assert first.started is not None and first.duration is not None
    assert timedelta(seconds=1.9) <= first.lag <= timedelta(seconds=2)
    assert first.finished >= first.started
    assert (first.host, first.pid) == (socket.gethostname(), os.getpid())


def test_the_last_attempt_is_dead_lettered(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)

    def sink(message: ScheduledMessage) -> None:
        raise ValueError("nope")

    SchedulerWorker(store, sink, FAST).run_once()
    [run] = store.runs()
    assert run.outcome is RunOutcome.DEAD_LETTERED and run.error == "ValueError: nope"
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.last_error is not None and "Traceback" in snap.last_error


def test_a_missed_firing_is_recorded_as_skipped(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.cron(
        Target.mediator(), "* * * * *", T0, "tick", [1], misfire_grace=timedelta(seconds=5)
    )
    store.insert(msg, 3)
    frozen.shift(30 * S)
    calls: list[ScheduledMessage] = []
    SchedulerWorker(store, calls.append).run_once()
    assert calls == []
    [run] = store.runs()
    assert run.outcome is RunOutcome.SKIPPED and run.started is None and run.duration is None
    assert run.error is not None and run.error.startswith("missed: due")
    assert run.lag == 30 * S


def test_a_worker_s_draft_reads_back_as_its_entry(store: ScheduleStore) -> None:
    """The run a worker attaches (a draft of figures, which a store may encode without
    making its entry) reads back as the record of its entry: the same instants, lag
    and duration, to the microsecond the store keeps."""
    first, second = one_shot(), one_shot(T0 + timedelta(microseconds=999_999))
    store.insert(first, 3)
    store.insert(second, 3)
    claimed = {o.message.schedule_id: o for o in store.claim_due(T0 + 2 * S, 10, 30 * S)}
    stamp = RunStamp(T0 + timedelta(seconds=7, microseconds=654_321), 1000.0)
    a, b = first.schedule_id, second.schedule_id
    drafts = [
        stamp.record(a, T0, 1, RunOutcome.DELIVERED, 998.765_432_1, 0.123_456_7, None),
        stamp.record(b, second.scheduled_for, 1, RunOutcome.RELEASED, None, None, None),
    ]
    settlements = [
        Settlement.delivered(a, claimed[a].leased_until, run=drafts[0]),
        Settlement.released(b, claimed[b].leased_until, run=drafts[1]),
    ]
    assert store.settle(settlements) == [True, True]
    got = sorted(store.runs(), key=lambda r: r.outcome.value)
    assert got == [RunRecord.of(d.entry()) for d in drafts]
    assert got[0].started is not None and got[0].duration is not None


def test_a_fenced_out_settlement_is_recorded_as_lease_lost(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(T0, 10, 30 * S)
    run = RunEntry(
        msg.schedule_id,
        T0,
        1,
        T0,
        T0,
        RunOutcome.DELIVERED,
        timedelta(0),
        timedelta(milliseconds=3),
        "h",
        1,
        None,
    )
    stale = occ.leased_until - S
    assert store.settle([Settlement.delivered(msg.schedule_id, stale, run=run)]) == [False]
    [lost] = store.runs()
    assert lost.outcome is RunOutcome.LEASE_LOST and lost.duration == timedelta(milliseconds=3)
    assert store.settle([Settlement.delivered(msg.schedule_id, occ.leased_until, run=run)]) == [
        True
    ]
    assert [r.outcome for r in store.runs()] == [RunOutcome.DELIVERED, RunOutcome.LEASE_LOST]


def test_the_sweep_records_swept_runs(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)
    store.claim_due(T0, 10, 30 * S)  # a worker that then crashed
    frozen.shift(60 * S)
    assert store.dead_letter_exhausted() == 1
    [run] = store.runs()
    assert run.outcome is RunOutcome.SWEPT and run.attempt == 1 and run.started is None
    assert run.lag == 60 * S and run.finished == T0 + 60 * S
    assert run.pid == os.getpid()


def test_runs_filter_count_and_prune(store: ScheduleStore, frozen: FrozenTime) -> None:
    a, b = one_shot(), one_shot(T0 + 90 * timedelta(minutes=1))
    store.insert(a, 3)
    store.insert(b, 1)
    _, sink = failing_once()
    worker = SchedulerWorker(store, sink, FAST)
    frozen.shift(S)
    worker.run_once()  # a fails
    frozen.shift(2 * S)
    worker.run_once()  # a delivered
    frozen.move_to(T0 + timedelta(hours=2, minutes=30))
    worker.run_once()  # b delivered
    assert [r.schedule_id for r in store.runs(a.schedule_id)] == [a.schedule_id] * 2
    assert [r.schedule_id for r in store.runs(outcome="failed")] == [a.schedule_id]
    assert [r.schedule_id for r in store.runs(since=T0 + timedelta(hours=1))] == [b.schedule_id]
    assert len(store.runs(limit=1)) == 1
    counts = store.run_counts(T0 + timedelta(minutes=30), T0 + timedelta(hours=3))
    assert counts == [
        (T0, RunOutcome.DELIVERED, 1),
        (T0, RunOutcome.FAILED, 1),
        (T0 + timedelta(hours=2), RunOutcome.DELIVERED, 1),
    ]
    assert store.prune_runs(timedelta(hours=1), dry_run=True) == 2
    assert len(store.runs()) == 3
    assert store.prune_runs(timedelta(hours=1)) == 2
    assert [r.schedule_id for r in store.runs()] == [b.schedule_id]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"outcome": "exploded"}, "'exploded'"),
        ({"limit": 0}, "limit"),
        ({"since": T0.replace(tzinfo=None)}, "since"),
    ],
)
def test_bad_queries_are_refused_naming_the_value(
    store: ScheduleStore, kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidArgument, match=named):
        store.runs(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("since", [timedelta(days=10**6), timedelta(seconds=-1)])
def test_a_duration_back_that_no_instant_has_is_refused_naming_since(
    store: ScheduleStore, since: timedelta
) -> None:
    with pytest.raises(InvalidArgument, match="since"):
        SchedulerControl(store).runs(since=since)


def test_run_log_false_records_nothing(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.insert(one_shot(), 3)
    assert SchedulerWorker(store, lambda m: None, run_log=False).run_once().delivered == 1
    assert store.runs() == []


def test_run_log_must_be_a_bool() -> None:
    with pytest.raises(Exception, match="run_log must be True or False, got run_log=1"):
        SchedulerWorker(InMemoryScheduleStore(), lambda m: None, run_log=1)  # type: ignore[arg-type]


def test_a_sql_store_without_run_statements_records_nothing_and_works(tmp_path: Path) -> None:
    """A dialect that has no run-log statements yet (the default of the SQL base)."""
    store = SqliteScheduleStore.open(tmp_path / "x.db")
    store._run_sql = None  # as a dialect without them
    assert not store.keeps_runs
    store.insert(one_shot(), 1)
    assert SchedulerWorker(store, lambda m: None).run_once().delivered == 1
    assert store.runs() == [] and store.run_counts(T0, T0) == []
    assert store.prune_runs(S) == 0 and store.dead_letter_exhausted() == 0
    store.close()


def test_a_timed_out_attempt_is_recorded_as_timed_out() -> None:
    store = InMemoryScheduleStore()
    store.insert(one_shot(), 3)
    config = SchedulerWorkerConfig(dispatch_timeout=timedelta(milliseconds=50))
    SchedulerWorker(store, lambda m: time.sleep(0.3), config).run_once()
    [run] = store.runs()
    assert run.outcome is RunOutcome.TIMED_OUT
    assert run.error is not None and run.error.startswith("TimeoutError")
    assert run.duration is not None and run.duration >= timedelta(milliseconds=50)


def test_the_run_and_its_settlement_commit_together(tmp_path: Path) -> None:
    """When the run cannot be written, the settlement is not either: the occurrence
    keeps its lease (and is delivered again once it runs out)."""
    import apsw

    from hexeract_lite import StoreError

    db = tmp_path / "x.db"
    store = SqliteScheduleStore.open(db)
    msg = one_shot(T0)
    store.insert(msg, 3)
    [occ] = store.claim_due(T0 + S, 10, 30 * S)
    raw = apsw.Connection(str(db))
    raw.execute("DROP TABLE scheduled_messages_runs")
    raw.close()
    run = RunEntry(msg.schedule_id, T0, 1, T0, T0, RunOutcome.DELIVERED, S, S, "h", 1, None)
    with pytest.raises(StoreError):
        store.settle([Settlement.delivered(msg.schedule_id, occ.leased_until, run=run)])
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status.value == "pending"
    assert snap.leased_until == occ.leased_until, "nothing of the batch was recorded"
    store.close()


def test_the_run_log_reads_use_its_indexes(tmp_path: Path) -> None:
    import apsw

    from hexeract_lite.runlog import RunOutcome as O
    from hexeract_lite.store.sqlite.runs import run_statements

    db = tmp_path / "x.db"
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    runs = run_statements("scheduled_messages", SCHEMA_VERSION)

    def plan(statement: str, params: dict[str, object]) -> str:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
        return " ".join(str(row[-1]) for row in rows)

    by_schedule = plan(*runs.select(uuid.uuid4(), None, None, 50))
    assert "idx_scheduled_messages_runs_schedule" in by_schedule and "TEMP" not in by_schedule
    newest = plan(*runs.select(None, O.FAILED, T0, 50))
    assert "idx_scheduled_messages_runs_finished" in newest and "TEMP B-TREE" not in newest
    counts = plan(runs.counts, runs.count_params(T0, T0 + S))
    assert "idx_scheduled_messages_runs_finished" in counts
    conn.close()


def test_a_run_log_dropped_by_another_tool_is_made_again_at_open(tmp_path: Path) -> None:
    import apsw

    db = tmp_path / "x.db"
    SqliteScheduleStore.open(db).close()
    raw = apsw.Connection(str(db))
    raw.execute("DROP TABLE scheduled_messages_runs")
    raw.close()
    with SqliteScheduleStore.open(db) as store:
        store.insert(one_shot(), 1)
        assert SchedulerWorker(store, lambda m: None).run_once().delivered == 1
        assert len(store.runs()) == 1


def test_a_transactional_handlers_delivery_is_recorded_in_its_transaction(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    from hexeract_lite import TransactionalSink

    if isinstance(store, InMemoryScheduleStore):
        pytest.skip("no shared transactions")
    seen: list[object] = []
    store.insert(one_shot(), 3)
    frozen.shift(S)
    worker = SchedulerWorker(store, TransactionalSink(lambda m, conn: seen.append(m)))
    assert worker.run_once().delivered == 1
    [run] = store.runs()
    assert run.outcome is RunOutcome.DELIVERED and run.attempt == 1 and run.started is not None
    store.insert(one_shot(), 3)
    off = SchedulerWorker(store, TransactionalSink(lambda m, conn: None), run_log=False)
    assert off.run_once().delivered == 1
    assert len(store.runs()) == 1, "run_log=False: none"


def test_on_failure_records_its_run(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.insert(one_shot(), 3)
    worker = SchedulerWorker(store, lambda m: None)
    [occ] = store.claim_due(T0, 10, 30 * S)
    worker.on_failure(occ, "gave up")
    worker.on_failure(occ, "again")  # fenced out: its lease moved on
    assert [(r.outcome, r.error) for r in store.runs()] == [
        (RunOutcome.LEASE_LOST, "again"),
        (RunOutcome.FAILED, "gave up"),
    ], "newest first: at the same instant, the one recorded last"


def test_the_memory_store_keeps_its_newest_runs_only(frozen: FrozenTime) -> None:
    store = InMemoryScheduleStore(run_log_size=3)
    msgs = [one_shot(T0) for _ in range(5)]
    store.insert_many(msgs, 3)
    SchedulerWorker(store, lambda m: None, FAST).run_once()
    kept = store.runs(limit=10)
    assert len(kept) == 3
    assert {r.schedule_id for r in kept} < {m.schedule_id for m in msgs}
    for bad in (0, -1, True, "10"):
        with pytest.raises(InvalidConfiguration, match="run_log_size must be an integer >= 1"):
            InMemoryScheduleStore(run_log_size=bad)  # type: ignore[arg-type]


def test_on_a_frozen_clock_a_run_starts_at_its_due_instant(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    store.insert(one_shot(), 3)

    def slow(message: object) -> None:
        time.sleep(0.01)  # real time passes; the frozen clock does not

    assert SchedulerWorker(store, slow, FAST).run_once().delivered == 1
    [run] = store.runs()
    assert run.started == T0 and run.lag == timedelta(0), "never before it was due"
    assert run.duration is not None and run.duration >= timedelta(seconds=0.01)
