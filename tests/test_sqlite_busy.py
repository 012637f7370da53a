"""The SQLite store's busy handling: short, jittered retries, bounded by busy_timeout."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import ScheduledMessage, SqliteScheduleStore, StoreError, Target
from hexeract_lite.store.sqlite.session import RETRY_MAX_S, set_busy_wait


def message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "reminder", {"n": 1})


def hold_with_one_gap(
    db: Path,
    first: float,
    gap: float,
    then: float,
    ready: threading.Event,
    release: threading.Event | None = None,
) -> None:
    """Another connection holds the write lock for ``first`` seconds, lets it go for
    ``gap`` seconds, then holds it again for ``then`` seconds, or until ``release`` is set
    (a writer that takes the lock back to back)."""
    conn = apsw.Connection(str(db))
    try:
        conn.execute("BEGIN IMMEDIATE")
        ready.set()
        time.sleep(first)
        conn.execute("COMMIT")
        time.sleep(gap)
        conn.set_busy_timeout(5000)
        conn.execute("BEGIN IMMEDIATE")
        (release or threading.Event()).wait(then)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_a_writer_gets_the_lock_in_a_short_gap_between_another_writers_transactions(
    tmp_path: Path,
) -> None:
    """The lock is free for 4 ms, 140 ms into the wait, and then held past the busy
    timeout. SQLite's own busy handler looks at 128 and 178 ms (it sleeps 1, 2, 5, 10,
    15, 20, 25, 25, 25, 50, ... ms) and misses it; the store's retries every 0.2-1 ms
    get in."""
    db = tmp_path / "gap.db"
    with SqliteScheduleStore.open(db, busy_timeout=timedelta(seconds=1)) as store:
        ready, release = threading.Event(), threading.Event()
        holder = threading.Thread(
            target=hold_with_one_gap, args=(db, 0.14, 0.004, 1.5, ready, release), daemon=True
        )
        holder.start()
        assert ready.wait(5)
        msg = message()
        store.insert(msg, 3)  # missing the gap: StoreError after the 1 s busy timeout
        assert store.inspect(msg.schedule_id) is not None
        release.set()  # until now the holder would have kept the lock past the busy timeout
        holder.join(5)


def test_the_wait_stays_bounded_by_the_busy_timeout(tmp_path: Path) -> None:
    db = tmp_path / "held.db"
    with SqliteScheduleStore.open(db, busy_timeout=timedelta(milliseconds=100)) as store:
        other = apsw.Connection(str(db))
        other.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"busy timeout \(0.1 s\)"):
                store.insert(message(), 3)
            assert time.monotonic() - started >= 0.1
        finally:
            other.execute("ROLLBACK")
            other.close()


def test_after_a_checkpoint_the_store_still_waits_for_the_lock(tmp_path: Path) -> None:
    """checkpoint() looks without waiting, then puts the short retries back."""
    db = tmp_path / "checkpoint.db"
    with SqliteScheduleStore.open(db, busy_timeout=timedelta(seconds=5)) as store:
        store.insert(message(), 3)
        assert store.checkpoint() in (True, False)
        ready = threading.Event()
        holder = threading.Thread(
            target=hold_with_one_gap, args=(db, 0.1, 0.0, 0.0, ready), daemon=True
        )
        holder.start()
        assert ready.wait(5)
        msg = message()
        store.insert(msg, 3)
        assert store.inspect(msg.schedule_id) is not None
        holder.join(5)


def test_a_zero_busy_timeout_does_not_wait(tmp_path: Path) -> None:
    db = tmp_path / "zero.db"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode=WAL; CREATE TABLE t (x)")
    other = apsw.Connection(str(db))
    set_busy_wait(other, 0)
    conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(apsw.BusyError):
            other.execute("BEGIN IMMEDIATE")
    finally:
        conn.execute("ROLLBACK")
        conn.close()
        other.close()
    assert RETRY_MAX_S <= 0.001
