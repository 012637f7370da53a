"""store.stats() on every store, and ``hexeract scheduler stats``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from hexeract_lite import ScheduledMessage, ScheduleStore, SqliteScheduleStore, Target
from hexeract_lite.cli import main
from hexeract_lite.settlement import Settlement
from hexeract_lite.store.stats import StoreStats, stats_of_records

from .conftest import T0, FrozenTime

S = timedelta(seconds=1)
LEASE = timedelta(seconds=30)


def one_shot(at: timedelta, event: str = "e") -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), T0 + at, event, {"n": 1})


def populate(store: ScheduleStore) -> None:
    """One row of each kind the stats tell apart, at T0."""
    future = one_shot(60 * S)
    due_old, due_new = one_shot(-10 * S), one_shot(-2 * S)
    flying, failing, dying = one_shot(-30 * S), one_shot(-29 * S), one_shot(-28 * S)
    paused, delivered, cancelled = one_shot(5 * S), one_shot(-40 * S), one_shot(7 * S)
    store.insert_many([flying, failing, dying, delivered], 3)
    claimed = {o.message.schedule_id: o for o in store.claim_due(T0, 10, LEASE)}
    assert len(claimed) == 4
    fail = claimed[failing.schedule_id]
    done = claimed[delivered.schedule_id]
    assert store.settle(
        [
            Settlement.failed(failing.schedule_id, 20 * S, "ValueError: x", fail.leased_until),
            Settlement.delivered(delivered.schedule_id, done.leased_until),
        ]
    ) == [True, True]
    # dying: claimed and then dead-lettered by its worker
    dead = claimed[dying.schedule_id]
    assert store.settle([Settlement.dead_lettered(dying.schedule_id, "boom", dead.leased_until)])
    store.insert_many([future, due_old, due_new, paused, cancelled], 3)
    store.set_paused(paused.schedule_id, True)
    store.cancel(cancelled.schedule_id)


def test_stats_count_every_kind(store: ScheduleStore, frozen: FrozenTime) -> None:
    populate(store)
    stats = store.stats()
    assert stats == StoreStats(
        at=T0,
        pending=5,  # future, two due, in flight, in backoff
        paused=1,
        delivered=1,
        cancelled=1,
        dead_lettered=1,
        due=2,
        in_flight=1,
        in_backoff=1,
        oldest_due_lag=10 * S,
        next_wakeup=stats.next_wakeup,
        file_bytes=stats.file_bytes,
        wal_bytes=stats.wal_bytes,
    )
    assert stats.total == 9
    assert stats.next_wakeup == store.next_wakeup()
    # a lease that ran out makes its row due again (a crashed worker's)
    frozen.shift(31 * S)
    later = store.stats()
    assert (later.due, later.in_flight, later.in_backoff) == (4, 0, 0)
    assert later.oldest_due_lag == 61 * S
    assert later.as_json()["counts"] == {
        "pending": 5,
        "paused": 1,
        "delivered": 1,
        "cancelled": 1,
        "dead-lettered": 1,
        "total": 9,
    }


def test_stats_of_an_empty_store(store: ScheduleStore, frozen: FrozenTime) -> None:
    assert store.stats() == StoreStats(
        at=T0,
        pending=0,
        paused=0,
        delivered=0,
        cancelled=0,
        dead_lettered=0,
        due=0,
        in_flight=0,
        in_backoff=0,
        oldest_due_lag=None,
        next_wakeup=None,
        file_bytes=store.stats().file_bytes,
        wal_bytes=store.stats().wal_bytes,
    )
    assert stats_of_records([], T0, None).total == 0


def test_sqlite_stats_report_file_and_wal_and_write_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteScheduleStore.open(db) as store:
        store.insert(one_shot(S), 3)
        before = db.stat().st_mtime_ns, (tmp_path / "s.db-wal").stat().st_size
        stats = store.stats()
        assert stats.file_bytes == db.stat().st_size and stats.file_bytes > 0
        assert stats.wal_bytes == (tmp_path / "s.db-wal").stat().st_size
        assert (db.stat().st_mtime_ns, (tmp_path / "s.db-wal").stat().st_size) == before


def test_the_stats_counts_read_partial_indexes(tmp_path: Path) -> None:
    """No count scans the table (which holds the ended rows)."""
    import apsw

    from hexeract_lite.store.sqlite.statements import stats_sql

    db = tmp_path / "p.db"
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    plan = conn.execute(
        "EXPLAIN QUERY PLAN " + stats_sql("scheduled_messages"), {"now": "2026-01-01"}
    ).fetchall()
    details = [str(row[-1]) for row in plan]
    scans = [d for d in details if d.startswith("SCAN scheduled_messages") and "INDEX" not in d]
    assert not scans, details
    for index in ("due", "leased", "paused", "dead_letter", "delivered", "cancelled"):
        assert any(f"idx_scheduled_messages_{index}" in d for d in details), (index, details)


def test_cli_stats_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    db = tmp_path / "c.db"
    with SqliteScheduleStore.open(db) as store:
        populate(store)
    assert main(["scheduler", "stats", "--conn", str(db)]) == 0
    text = capsys.readouterr().out
    assert "pending           5" in text and "oldest due lag    10.000 s" in text
    assert "file size" in text and "WAL size" in text
    assert main(["scheduler", "stats", "--conn", str(db), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["dead-lettered"] == 1 and data["due"] == 2
    assert data["oldest_due_lag_seconds"] == 10.0 and data["file_bytes"] > 0


def test_cli_stats_on_a_missing_file_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "missing.db"
    assert main(["scheduler", "stats", "--conn", str(db)]) != 0
    assert not db.exists()
    assert str(db) in capsys.readouterr().err
