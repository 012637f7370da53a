"""Retention. 5,000 delivered one-shots pruned, the file shrinks; live,
recurring and (by default) dead-lettered rows untouched; on every store."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    Target,
    upkeep,
)
from hexeract_lite.cli import main
from hexeract_lite.errors import InvalidArgument, StoreError
from hexeract_lite.settlement import Settlement
from hexeract_lite.worker import SchedulerWorker

from .conftest import T0, TIGHT, FrozenTime
from .test_hooks import PAUSE_S, _all_delivered, _four_due

S = timedelta(seconds=1)
DAY = timedelta(days=1)
PAYLOAD = {"text": "x" * 300}


def deliver_many(store: ScheduleStore, n: int) -> None:
    msgs = [ScheduledMessage.delay(Target.outbox(), T0 - S, "reminder", PAYLOAD) for _ in range(n)]
    for i in range(0, n, 1000):
        store.insert_many(msgs[i : i + 1000], 3)
    while batch := store.claim_due(T0, 500, 30 * S):
        oks = store.settle(
            [Settlement.delivered(o.message.schedule_id, o.leased_until) for o in batch]
        )
        assert all(oks)


def survivors(store: ScheduleStore) -> dict[str, ScheduledMessage]:
    """A pending one-shot, a paused one, a pending recurring one, a dead letter and a
    cancelled one, all old enough to be pruned if they were prunable."""
    kept = {
        "pending": ScheduledMessage.delay(Target.outbox(), T0 + 30 * DAY, "later", {}),
        "paused": ScheduledMessage.delay(Target.outbox(), T0 + S, "paused", {}),
        "recurring": ScheduledMessage.cron(Target.outbox(), "0 9 * * *", T0 + S, "daily", {}),
        "dead": ScheduledMessage.delay(Target.outbox(), T0 - 2 * S, "dead", {}),
        "cancelled": ScheduledMessage.delay(Target.outbox(), T0 + DAY, "cancel", {}),
    }
    store.insert(kept["dead"], 1)
    [dead] = store.claim_due(T0, 1, 30 * S)
    assert store.settle(
        [Settlement.dead_lettered(dead.message.schedule_id, "x", dead.leased_until)]
    )
    store.insert_many([m for k, m in kept.items() if k != "dead"], 3)
    store.set_paused(kept["paused"].schedule_id, True)
    store.cancel(kept["cancelled"].schedule_id)
    return kept


def status(store: ScheduleStore, msg: ScheduledMessage) -> ScheduleStatus | None:
    snap = store.inspect(msg.schedule_id)
    return None if snap is None else snap.status


def deliver_5000(store: ScheduleStore) -> None:
    """5,000 delivered one-shots: 500 delivered through ``store``'s own claims and
    settlements, and 4,500 that an in-memory store delivered the same way (on the same
    frozen clock), copied in with ``import_records`` as ``migrate`` does. On a server
    store 5,000 settlements, one statement per row, were most of the test's time; the
    rows prune reads are the same either way."""
    reference = InMemoryScheduleStore()
    deliver_many(reference, 4500)
    records = reference.export_records(None, 5000)
    assert len(records) == 4500
    assert store.import_records(records) == 4500
    deliver_many(store, 500)


def test_prune_5000_delivered(store: ScheduleStore, frozen: FrozenTime, tmp_path: Path) -> None:
    deliver_5000(store)
    kept = survivors(store)
    frozen.shift(2 * DAY)
    fresh = ScheduledMessage.delay(Target.outbox(), T0 + 2 * DAY - S, "fresh", {})
    store.insert(fresh, 3)
    claimed = store.claim_due(T0 + 2 * DAY, 10, 30 * S)  # fresh, and the recurring one
    assert store.settle(
        [
            Settlement.delivered(o.message.schedule_id, o.leased_until)
            if o.message.schedule_id == fresh.schedule_id
            else Settlement.released(o.message.schedule_id, o.leased_until)
            for o in claimed
        ]
    )
    before = store.stats()
    assert before.delivered == 5001
    sqlite = isinstance(store, SqliteScheduleStore)
    if sqlite:
        store._after_prune()  # type: ignore[attr-defined]  # a fair "before": WAL folded in
        size_before = os.path.getsize(store.path)  # type: ignore[attr-defined]

    assert store.prune(DAY, dry_run=True) == 5001
    assert store.stats().delivered == 5001, "a dry run deletes nothing"
    totals: list[int] = []
    assert store.prune(DAY, batch_size=700, progress=totals.append) == 5001
    assert totals[-1] == 5001
    if not isinstance(store, InMemoryScheduleStore):  # (in memory: one step, no lock to share)
        assert totals[:2] == [700, 1400] and len(totals) == 9, "a transaction per batch"
    after = store.stats()
    assert (after.delivered, after.cancelled) == (1, 0)  # the one delivered a second ago
    assert status(store, fresh) is ScheduleStatus.DELIVERED
    assert status(store, kept["pending"]) is ScheduleStatus.PENDING
    assert status(store, kept["paused"]) is ScheduleStatus.PAUSED
    assert status(store, kept["recurring"]) is ScheduleStatus.PENDING
    assert status(store, kept["dead"]) is ScheduleStatus.DEAD_LETTERED, "kept unless asked"
    assert status(store, kept["cancelled"]) is None
    assert store.prune(DAY, statuses=["dead-lettered"]) == 1
    assert status(store, kept["dead"]) is None
    assert store.prune(DAY) == 0
    if sqlite:
        size_after = os.path.getsize(store.path)  # type: ignore[attr-defined]
        assert size_after < size_before / 4, (size_before, size_after)
        wal = Path(str(store.path) + "-wal")  # type: ignore[attr-defined]
        assert not wal.exists() or wal.stat().st_size == 0, "the WAL was checkpointed"


@pytest.mark.parametrize(
    ("older_than", "statuses", "named"),
    [
        (timedelta(0), ["delivered"], "older_than"),
        (-DAY, ["delivered"], "older_than"),
        (timedelta(days=99_999_999), ["delivered"], "older_than"),  # before the year 1
        (30, ["delivered"], "older_than=30"),
        (DAY, ["pending"], "'pending'"),
        (DAY, ["paused"], "'paused'"),
        (DAY, ["gone"], "'gone'"),
        (DAY, "delivered", "statuses"),
    ],
)
def test_bad_prune_arguments_name_the_value_and_delete_nothing(
    store: ScheduleStore, frozen: FrozenTime, older_than: object, statuses: object, named: str
) -> None:
    deliver_many(store, 3)
    frozen.shift(2 * DAY)
    with pytest.raises(InvalidArgument, match=named):
        store.prune(older_than, statuses=statuses)  # type: ignore[arg-type]
    assert store.stats().delivered == 3


@pytest.mark.parametrize("method", ["prune", "prune_runs"])
def test_a_dry_run_flag_that_is_not_a_bool_is_refused(
    store: ScheduleStore, frozen: FrozenTime, method: str
) -> None:
    deliver_many(store, 3)
    frozen.shift(2 * DAY)
    with pytest.raises(InvalidArgument, match="dry_run must be True or False, got 'false'"):
        getattr(store, method)(DAY, dry_run="false")
    assert store.stats().delivered == 3


def test_the_prune_cut_is_the_same_on_every_store_at_sub_millisecond_ages(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """An age finer than the millisecond rows end at: a row that ended 1 ms ago past a day
    is older than a day and 0.5 ms, and not older than a day and 1.5 ms, on every store."""
    deliver_many(store, 1)  # ended at T0
    frozen.shift(DAY + timedelta(milliseconds=1))
    assert store.prune(DAY + timedelta(microseconds=1500), dry_run=True) == 0
    assert store.prune(DAY + timedelta(microseconds=500), dry_run=True) == 1


def test_new_sqlite_files_use_incremental_auto_vacuum(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]


def test_vacuum_converts_an_older_file_and_the_cli_prunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "old.db"
    conn = apsw.Connection(str(db))  # a file made before incremental auto-vacuum
    conn.execute("CREATE TABLE filler (x)")
    conn.close()
    with SqliteScheduleStore.open(db) as store:
        deliver_many(store, 2000)
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA auto_vacuum").fetchall() == [(0,)]
    conn.close()
    frozen.shift(40 * DAY)
    args = ["scheduler", "prune", "--conn", str(db), "--older-than", "30d"]
    assert main([*args, "--dry-run"]) == 0
    assert capsys.readouterr().out == "Would prune 2000 schedules.\n"
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out == "Pruned 2000 schedules.\n" and captured.err == ""
    size = db.stat().st_size
    assert main(["scheduler", "vacuum", "--conn", str(db)]) == 0
    assert capsys.readouterr().out.startswith("Vacuumed: ")
    assert db.stat().st_size < size / 4
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA auto_vacuum").fetchall() == [(2,)]
    conn.close()


def test_cli_prune_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "p.db"
    with SqliteScheduleStore.open(db) as store:
        deliver_many(store, 3)
    frozen.shift(40 * DAY)
    base = ["scheduler", "prune", "--conn", str(db)]
    assert main([*base, "--older-than", "0s"]) == 2
    assert "--older-than: invalid duration '0s': must be more than 0" in capsys.readouterr().err
    assert main([*base, "--older-than", "soon"]) == 2
    assert "'soon'" in capsys.readouterr().err
    assert main([*base, "--older-than", "99999999d", "--dry-run"]) == 2  # before the year 1
    assert "older_than" in capsys.readouterr().err
    assert (
        main(["scheduler", "prune", "--conn", str(tmp_path / "none.db"), "--older-than", "1d"]) != 0
    )
    assert not (tmp_path / "none.db").exists()
    with SqliteScheduleStore.open(db) as store:
        assert store.stats().delivered == 3


def test_prune_on_a_read_only_store_is_refused(tmp_path: Path, frozen: FrozenTime) -> None:
    db = tmp_path / "ro.db"
    with SqliteScheduleStore.open(db) as store:
        deliver_many(store, 3)
    frozen.shift(2 * DAY)
    with SqliteScheduleStore.open(db, readonly=True) as store:
        with pytest.raises(StoreError, match="read-only"):
            store.prune(DAY)
        assert store.prune(DAY, dry_run=True) == 3


def test_worker_retention_prunes_old_delivered_rows(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    from hexeract_lite import SchedulerWorker
    from hexeract_lite.errors import InvalidConfiguration

    deliver_many(store, 20)
    kept = survivors(store)
    frozen.shift(8 * DAY)
    worker = SchedulerWorker(store, lambda _: None, retention=timedelta(days=7))
    worker.run_once()
    after = store.stats()
    assert (after.delivered, after.cancelled) == (0, 0)
    assert status(store, kept["dead"]) is ScheduleStatus.DEAD_LETTERED
    assert status(store, kept["pending"]) is ScheduleStatus.PENDING
    with pytest.raises(InvalidConfiguration, match="retention"):
        SchedulerWorker(store, lambda _: None, retention=timedelta(0))


def test_a_version_4_file_gets_the_retention_indexes(tmp_path: Path) -> None:
    from hexeract_lite.store.sqlite import META_TABLE, SCHEMA_VERSION

    db = tmp_path / "v4.db"
    with SqliteScheduleStore.open(db) as store:
        deliver_many(store, 3)
    conn = apsw.Connection(str(db))
    for name in ("delivered", "cancelled"):
        conn.execute(f"DROP INDEX idx_scheduled_messages_{name}")
    conn.execute(f"UPDATE {META_TABLE} SET version = 4")
    conn.close()
    with SqliteScheduleStore.open(db) as store:
        assert store.stats().delivered == 3
    conn = apsw.Connection(str(db))
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    assert {"idx_scheduled_messages_delivered", "idx_scheduled_messages_cancelled"} <= names
    assert conn.execute(f"SELECT version FROM {META_TABLE}").fetchall() == [(SCHEMA_VERSION,)]
    assert SCHEMA_VERSION >= 5
    conn.close()


def test_stats_on_a_read_only_file_without_the_new_indexes(tmp_path: Path) -> None:
    """A read-only open does not upgrade: stats still answer (without INDEXED BY)."""
    from hexeract_lite.store.sqlite import META_TABLE

    db = tmp_path / "old.db"
    with SqliteScheduleStore.open(db) as store:
        deliver_many(store, 2)
    conn = apsw.Connection(str(db))
    conn.execute("DROP INDEX idx_scheduled_messages_due")
    conn.execute(f"UPDATE {META_TABLE} SET version = 1")
    conn.close()
    with SqliteScheduleStore.open(db, readonly=True) as store:
        assert store.stats().delivered == 2


def test_the_worker_checkpoints_the_wal_when_a_burst_ends(tmp_path: Path) -> None:
    """The WAL does not stay at megabytes while the file is open after 5,000
    deliveries."""

    from hexeract_lite import SchedulerWorker, SchedulerWorkerConfig

    db = tmp_path / "burst.db"
    wal = Path(str(db) + "-wal")
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - S
        store.insert_many(
            [ScheduledMessage.delay(Target.outbox(), due, "r", PAYLOAD) for _ in range(3000)], 3
        )
        config = SchedulerWorkerConfig(batch_size=100, lease=timedelta(seconds=3000))
        worker = SchedulerWorker(store, lambda _: None, config)
        biggest = 0
        while worker.run_once().claimed:
            biggest = max(biggest, wal.stat().st_size)
        assert biggest > 1 << 20, "the burst grew the WAL"
        grown = wal.stat().st_size  # the cycle that claimed nothing ended the burst
        assert grown == 0, grown
        assert store.stats().delivered == 3000


class SlowPruneStore(SqliteScheduleStore):
    """A SQLite store whose second prune takes PAUSE_S (a big backlog of history, say): the
    first runs at the worker's first cycle, the second with a full batch dispatched."""

    prunes = 0

    def prune(self, older_than: timedelta, **kwargs: Any) -> int:
        self.prunes += 1
        if self.prunes == 2:
            time.sleep(PAUSE_S)
        return super().prune(older_than, **kwargs)


def test_retention_never_runs_while_a_dispatched_batch_waits_for_its_settlement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retention prune never runs while a dispatched batch waits for its settlement: a
    prune longer than the lease fences no settlement out, and nothing delivered is
    dead-lettered by the sweep as if its worker had crashed."""
    monkeypatch.setattr(upkeep, "RETENTION_EVERY", timedelta(0))  # prune at every cycle
    with SlowPruneStore.open(tmp_path / "r.db") as store:
        msgs = _four_due(store)
        seen: list[ScheduledMessage] = []
        worker = SchedulerWorker(store, seen.append, TIGHT, retention=timedelta(days=1))
        with worker.start():
            deadline = time.monotonic() + 10
            while store.stats().pending and time.monotonic() < deadline:
                time.sleep(0.05)
        _all_delivered(store, msgs)
        assert len(seen) == 4
