"""Does a claim stay cheap as the table grows? A runnable check, not a unit test.

    /work/.venv/bin/python benchmarks/claim_scale.py            # 10k vs 1M, 100k in backoff
    /work/.venv/bin/python benchmarks/claim_scale.py --quick    # 10k vs 100k, 20k in backoff

Issue 3 asks, for ``SqliteScheduleStore.claim_due(now, 10, lease)``:

(a) at 1M pending rows a claim costs at most about 2x what it costs at 10k rows;
(b) with 100k rows waiting in retry backoff (``leased_until`` in the future, so still in
    the reference's pending index) a claim costs at most about 2x what it costs with none.

Each scenario gets a fresh file in a temporary folder, created by the store, then filled
with raw ``executemany`` (rows shaped exactly as ``insert`` writes them, so filling 1M
rows takes seconds). Rows are all due. Then ``--claims`` claims of 10 are timed one by
one (``time.perf_counter`` around ``claim_due``); the claimed rows are acknowledged
outside the timer. Medians are compared. ``--durability normal`` (the default here) keeps
the fsync out of the figure, so what is measured is the index work the ratio is about;
``--durability full`` adds one fsync per claim to both sides.

For contrast the same claim is also timed as a single statement over the reference's
pending index alone (what a store without hexeract_lite's indexes would do): with rows in
backoff it has to step over them.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexeract_lite._time import format_ts
from hexeract_lite.store.schema import LIVE, REFERENCE_COLUMNS
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.store.sqlite.statements import SqliteStatements

TABLE = "scheduled_messages"
LEASE = timedelta(minutes=5)
NOW = datetime.now(UTC).replace(microsecond=0)
INSERT = (
    f"INSERT INTO {TABLE} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
    " scheduled_for, target_kind, target_routing_key, attempts, max_attempts, leased_until,"
    " paused, last_error, created_at) VALUES (?, 'bench', '{\"n\":1}', 'delay', NULL, ?,"
    " 'outbox', NULL, ?, 5, ?, 0, ?, ?)"
)
# The claim a store with only the reference's indexes would run (one statement).
REFERENCE_CLAIM = (
    f"UPDATE {TABLE} SET attempts = attempts + 1, leased_until = :until"
    " WHERE schedule_id IN ("
    f" SELECT schedule_id FROM {TABLE} INDEXED BY idx_{TABLE}_pending"
    f" WHERE {LIVE} AND paused = 0 AND scheduled_for <= :now AND attempts < max_attempts"
    "   AND (leased_until IS NULL OR leased_until <= :now)"
    " ORDER BY scheduled_for, schedule_id LIMIT :n)"
    f" RETURNING {', '.join(name for name, _, _ in REFERENCE_COLUMNS)}"
)


def fill(path: Path, fresh: int, backoff: int) -> float:
    """Add ``fresh`` due rows and ``backoff`` rows in retry backoff; return seconds taken.

    The backoff rows are the oldest (scheduled an hour before the fresh ones), so a walk
    of the reference's pending index in claim order meets every one of them first.
    """
    created = format_ts(NOW - timedelta(hours=2))
    until = format_ts(NOW + timedelta(hours=1))
    start = time.perf_counter()
    conn = apsw.Connection(str(path))
    try:
        conn.pragma("synchronous", "OFF")
        conn.execute("BEGIN IMMEDIATE")
        step = timedelta(hours=1) / max(fresh, 1)
        base = NOW - timedelta(hours=1)
        conn.executemany(
            INSERT,
            (
                (os.urandom(16), format_ts(base + i * step), 0, None, None, created)
                for i in range(fresh)
            ),
        )
        old = NOW - timedelta(hours=2)
        backoff_step = timedelta(hours=1) / max(backoff, 1)
        conn.executemany(
            INSERT,
            (
                (os.urandom(16), format_ts(old + i * backoff_step), 1, until, "Timeout", created)
                for i in range(backoff)
            ),
        )
        conn.execute("COMMIT")
        conn.pragma("wal_checkpoint", "TRUNCATE")
    finally:
        conn.close()
    seconds = time.perf_counter() - start
    if hasattr(os, "sync"):
        os.sync()  # the fill's dirty pages must not be written back during the timing
    return seconds


def time_claims(store: SqliteScheduleStore, claims: int) -> list[float]:
    """Seconds per ``claim_due(now, 10, 5 min)``. Outside the timer each claimed row is
    rescheduled to ``now`` (the back of the queue), so the table keeps its size and
    every claim finds the same kind of work."""
    out: list[float] = []
    for _ in range(claims):
        t = time.perf_counter()
        got = store.claim_due(NOW, 10, LEASE)
        out.append(time.perf_counter() - t)
        assert len(got) == 10, "the scenario ran out of due rows"
        for occ in got:
            store.reschedule(occ.message.schedule_id, NOW, occ.leased_until)
    return out


def time_sql_claims(path: Path, claims: int, sql: str) -> list[float]:
    """A claim statement alone (no Python decoding), rolled back after each run so that
    every run does the same work: the store's, or one over the reference's index only."""
    conn = apsw.Connection(str(path))
    out: list[float] = []
    try:
        conn.pragma("synchronous", "NORMAL")
        conn.pragma("temp_store", "MEMORY")  # as the store's connection has it
        params = {"now": format_ts(NOW), "until": format_ts(NOW + LEASE), "n": 10}
        for _ in range(claims):
            t = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(sql, params).fetchall()
            conn.execute("ROLLBACK")  # leave the table as it was: every claim does the same work
            out.append(time.perf_counter() - t)
            assert len(rows) == 10
    finally:
        conn.close()
    return out


def other_costs(store: SqliteScheduleStore, rounds: int = 200) -> dict[str, float]:
    """Median µs of the calls a worker makes every cycle besides the claim."""
    result: dict[str, float] = {}
    calls: dict[str, Callable[[], object]] = {
        "next_wakeup": store.next_wakeup,
        "dead_letter_exhausted": store.dead_letter_exhausted,
        "data_version": store.data_version,
    }
    for name, call in calls.items():
        samples = []
        for _ in range(rounds):
            t = time.perf_counter()
            call()
            samples.append(time.perf_counter() - t)
        result[name] = statistics.median(samples) * 1e6
    return result


def build(folder: Path, name: str, fresh: int, backoff: int) -> tuple[Path, float]:
    """A file with the store's schema (every index) and the scenario's rows."""
    path = folder / f"{name}.db"
    SqliteScheduleStore.open(path).close()
    return path, fill(path, fresh, backoff)


def measure(path: Path, claims: int, durability: str) -> dict[str, list[float]]:
    """One round on one file: warm up, then time the claims and the other calls."""
    with SqliteScheduleStore.open(path, durability=durability) as store:
        time_claims(store, 50)  # warm this connection's page cache
        samples = time_claims(store, claims)
        extra = other_costs(store)
    return {
        "claim": samples,
        "store_sql": time_sql_claims(path, min(claims, 50), SqliteStatements(TABLE).claim),
        "reference": time_sql_claims(path, min(claims, 50), REFERENCE_CLAIM),
        **{name: [value] for name, value in extra.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k vs 100k rows, 20k in backoff")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--backoff", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=300, help="timed claims per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--durability", choices=["normal", "full"], default="normal")
    parser.add_argument("--dir", help="where the temporary files go (default: the system's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.large, args.backoff, args.claims, args.rounds = 100_000, 20_000, 200, 2
    print(
        f"claim_scale: {platform.python_implementation()} {platform.python_version()},"
        f" SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apsw_version()},"
        f" {os.cpu_count()} CPUs, durability={args.durability}"
    )
    scenarios = [
        ("small", args.small, 0),
        ("large", args.large, 0),
        ("backoff", args.small, args.backoff),
    ]
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="claim-scale-", dir=args.dir) as tmp:
        folder = Path(tmp)
        built = {name: build(folder, name, fresh, back) for name, fresh, back in scenarios}
        samples: dict[str, dict[str, list[float]]] = {name: {} for name, _, _ in scenarios}
        per_round: dict[str, list[float]] = {name: [] for name, _, _ in scenarios}
        for _ in range(args.rounds):  # interleaved, so a noisy moment hits every scenario
            for name, _, _ in scenarios:
                got = measure(built[name][0], args.claims, args.durability)
                per_round[name].append(statistics.median(got["claim"]) * 1e6)
                for key, values in got.items():
                    samples[name].setdefault(key, []).extend(values)
        for name, fresh, back in scenarios:
            path, fill_s = built[name]
            got = samples[name]
            runs.append(
                {
                    "name": name,
                    "rows": fresh + back,
                    "backoff": back,
                    "fill_s": fill_s,
                    "file_mb": path.stat().st_size / 1e6,
                    "median_us": statistics.median(got["claim"]) * 1e6,
                    "p90_us": statistics.quantiles(got["claim"], n=10)[-1] * 1e6,
                    "rounds_us": per_round[name],
                    "store_sql_median_us": statistics.median(got["store_sql"]) * 1e6,
                    "reference_median_us": statistics.median(got["reference"]) * 1e6,
                    "next_wakeup_us": statistics.median(got["next_wakeup"]),
                    "dead_letter_exhausted_us": statistics.median(got["dead_letter_exhausted"]),
                }
            )
    header = (
        f"{'scenario':<9} {'rows':>9} {'backoff':>8} {'fill s':>7} {'MB':>7}"
        f" {'claim µs':>9} {'p90 µs':>8} {'SQL µs':>7} {'ref SQL µs':>11}"
        f" {'wakeup µs':>10} {'sweep µs':>9}  per-round medians µs"
    )
    print(header)
    print("-" * len(header))
    for r in runs:
        rounds = " ".join(f"{v:.0f}" for v in r["rounds_us"])  # type: ignore[attr-defined]
        print(
            f"{r['name']:<9} {r['rows']:>9,} {r['backoff']:>8,} {r['fill_s']:>7.1f}"
            f" {r['file_mb']:>7.1f} {r['median_us']:>9.0f} {r['p90_us']:>8.0f}"
            f" {r['store_sql_median_us']:>7.0f} {r['reference_median_us']:>11.0f}"
            f" {r['next_wakeup_us']:>10.1f}"
            f" {r['dead_letter_exhausted_us']:>9.1f}  {rounds}"
        )
    small, large, backoff = runs
    ratio_a = float(large["median_us"]) / float(small["median_us"])  # type: ignore[arg-type]
    ratio_b = float(backoff["median_us"]) / float(small["median_us"])  # type: ignore[arg-type]
    ref_b = float(backoff["reference_median_us"]) / float(small["reference_median_us"])  # type: ignore[arg-type]
    print()
    print(
        "claim µs: SqliteScheduleStore.claim_due(now, 10, 5 min), median (p90) of every"
        " timed claim; SQL µs: its statement alone (BEGIN, UPDATE ... RETURNING, ROLLBACK);"
        " ref SQL µs: the same over the reference's pending index only; wakeup/sweep µs:"
        " next_wakeup() and dead_letter_exhausted()."
    )
    print(
        f"(a) claim at {large['rows']:,} rows / at {small['rows']:,}: {ratio_a:.2f}x (target <= ~2x)"
    )
    print(
        f"(b) claim with {backoff['backoff']:,} rows in backoff / with none: {ratio_b:.2f}x"
        f" (target <= ~2x); over the reference's index alone: {ref_b:.1f}x"
    )
    return 0 if ratio_a <= 2.5 and ratio_b <= 2.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
