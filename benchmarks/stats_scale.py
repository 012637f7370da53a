"""Does ``store.stats()`` stay cheap on a big file? A runnable check, not a unit test.

    python benchmarks/stats_scale.py             # 1M rows: 900k delivered, 100k pending
    python benchmarks/stats_scale.py --rows 100000

Issue 15 asks that ``hexeract scheduler stats`` on a 1M-row file answers in well under a
second. A fresh file is filled with raw ``executemany`` (rows shaped as ``insert``
writes them): 90% delivered (the history a busy app keeps), 10% pending, half of those
due. Then ``store.stats()`` is timed ``--repeat`` times (median), and, for contrast, a
raw ``SELECT count(*) FROM scheduled_messages`` (the cheapest full count SQLite has) and
a status count the naive way (``GROUP BY`` over the whole table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexeract_lite._time import format_ts
from hexeract_lite.store.sqlite import SqliteScheduleStore

TABLE = "scheduled_messages"
NOW = datetime.now(UTC).replace(microsecond=0)
INSERT = (
    f"INSERT INTO {TABLE} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
    " scheduled_for, target_kind, target_routing_key, attempts, max_attempts, leased_until,"
    " paused, last_error, created_at, delivered_at) VALUES (?, 'bench', '{\"n\":1}', 'delay',"
    " NULL, ?, 'outbox', NULL, 0, 5, NULL, 0, NULL, ?, ?)"
)
NAIVE = (
    f"SELECT CASE WHEN delivered_at IS NOT NULL THEN 'delivered' WHEN cancelled_at IS NOT NULL"
    " THEN 'cancelled' WHEN dead_lettered_at IS NOT NULL THEN 'dead' WHEN paused <> 0 THEN"
    f" 'paused' ELSE 'pending' END AS s, count(*) FROM {TABLE} GROUP BY s"
)


def fill(db: Path, rows: int) -> None:
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    created = format_ts(NOW - timedelta(days=30))
    with conn:
        batch = []
        for i in range(rows):
            at = NOW + timedelta(seconds=(i % 2000) - 1000)
            delivered = format_ts(at) if i % 10 else None
            batch.append((uuid.uuid4().bytes, format_ts(at), created, delivered))
            if len(batch) == 10_000:
                conn.executemany(INSERT, batch)
                batch.clear()
        conn.executemany(INSERT, batch)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "stats.db"
        started = time.perf_counter()
        fill(db, args.rows)
        print(f"filled {args.rows:,} rows in {time.perf_counter() - started:.1f} s")
        with SqliteScheduleStore.open(db) as store:
            stats = store.stats()
            ms = median_ms(store.stats, args.repeat)
        conn = apsw.Connection(str(db))
        raw = median_ms(
            lambda: conn.execute(f"SELECT count(*) FROM {TABLE}").fetchall(), args.repeat
        )
        naive = median_ms(lambda: conn.execute(NAIVE).fetchall(), args.repeat)
        conn.close()
        print(f"stats(): {ms:.1f} ms (median of {args.repeat})")
        print(f"raw count(*): {raw:.1f} ms; naive GROUP BY status: {naive:.1f} ms")
        print(f"ratio stats()/count(*): {ms / raw:.2f}; stats()/GROUP BY: {ms / naive:.2f}")
        print(
            f"counts: pending {stats.pending:,}, delivered {stats.delivered:,}, due {stats.due:,}"
        )


if __name__ == "__main__":
    main()
