"""PostgreSQL at scale: a claim among held rows, and the wake-up for another process's insert.

    python benchmarks/pg_claim_scale.py                 # needs HEXERACT_TEST_POSTGRES_URL
    python benchmarks/pg_claim_scale.py --quick
    python benchmarks/pg_claim_scale.py --url postgresql://user:pw@host/db

Issue 17 asks, for ``PostgresScheduleStore``:

(a) a claim of 10 with 50k rows leased or in retry backoff costs at most 2x the claim
    with none. Two tables get the same 2,000 fresh due rows; one also gets ``--held``
    rows whose lease runs an hour past now (in flight or backing off), scheduled before
    every fresh row, so a walk of the pending index in claim order meets them all
    first. ``--claims`` claims of 10 are timed one by one (``perf_counter`` around
    ``claim_due``); each claimed row is rescheduled to now outside the timer, so every
    claim finds the same work. Medians are compared, and the same claim over the
    reference's pending index alone is timed for contrast (rolled back each time).
(b) the dispatch lag of an occurrence inserted by another process, with the worker
    idle and default config: a child process inserts one due row every 50-100 ms
    (writing ``time.time()`` into the payload just before the insert), and the worker's
    sink records ``time.time() - payload["t"]``. p50 and p99 over ``--lag-samples``.

Each table is dropped afterwards. Ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from hexeract_lite import ScheduledMessage, SchedulerWorker, Settlement
from hexeract_lite.store.postgres import PostgresScheduleStore

LEASE = timedelta(minutes=5)
NOW = datetime.now(UTC).replace(microsecond=0)
FILL = """
INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, scheduled_for, target_kind,
                 attempts, max_attempts, leased_until, last_error, created_at)
SELECT gen_random_uuid(), 'bench', '{{"n":1}}', 'delay',
       %(base)s::timestamptz + g * %(step)s::interval, 'outbox',
       %(attempts)s, 5, %(until)s, %(error)s, %(created)s
FROM generate_series(1, %(n)s) AS g
"""
REFERENCE_CLAIM = """
UPDATE {t} SET leased_until = %(until)s, attempts = attempts + 1
WHERE schedule_id IN (
  SELECT schedule_id FROM {t}
  WHERE scheduled_for <= %(now)s AND delivered_at IS NULL AND cancelled_at IS NULL
    AND dead_lettered_at IS NULL AND paused = FALSE AND attempts < max_attempts
    AND (leased_until IS NULL OR leased_until <= %(now)s)
  ORDER BY scheduled_for LIMIT 10 FOR UPDATE SKIP LOCKED)
RETURNING schedule_id
"""


def fill(url: str, table: str, fresh: int, held: int) -> None:
    """``fresh`` due rows over the hour before now; ``held`` rows leased for an hour
    more, scheduled in the hour before the fresh ones."""
    t = f'"{table}"'
    with psycopg.connect(url, autocommit=True) as conn:
        common = {"created": NOW - timedelta(hours=3)}
        conn.execute(
            FILL.format(t=t).encode(),
            {
                **common,
                "base": NOW - timedelta(hours=1),
                "step": timedelta(hours=1) / max(fresh, 1),
                "attempts": 0,
                "until": None,
                "error": None,
                "n": fresh,
            },
        )
        if held:
            conn.execute(
                FILL.format(t=t).encode(),
                {
                    **common,
                    "base": NOW - timedelta(hours=2),
                    "step": timedelta(hours=1) / held,
                    "attempts": 1,
                    "until": NOW + timedelta(hours=1),
                    "error": "Timeout",
                    "n": held,
                },
            )
        conn.execute(f"VACUUM ANALYZE {t}".encode())


def time_claims(store: PostgresScheduleStore, claims: int) -> list[float]:
    out: list[float] = []
    for _ in range(claims):
        start = time.perf_counter()
        got = store.claim_due(NOW, 10, LEASE)
        out.append(time.perf_counter() - start)
        assert len(got) == 10, "the scenario ran out of due rows"
        # back of the queue, outside the timer
        store.settle(
            [Settlement.reschedule(o.message.schedule_id, NOW, o.leased_until) for o in got]
        )
    return out


def time_reference_claims(url: str, table: str, claims: int) -> list[float]:
    out: list[float] = []
    params = {"now": NOW, "until": NOW + LEASE}
    with psycopg.connect(url) as conn:
        for _ in range(claims):
            start = time.perf_counter()
            rows = conn.execute(REFERENCE_CLAIM.format(t=f'"{table}"').encode(), params).fetchall()
            conn.rollback()
            out.append(time.perf_counter() - start)
            assert len(rows) == 10
    return out


def claim_scale(url: str, fresh: int, held: int, claims: int, rounds: int) -> None:
    results: dict[str, dict[str, list[float]]] = {}
    for name, n_held in (("none held", 0), (f"{held} held", held)):
        table = f"bench_claim_{uuid.uuid4().hex[:12]}"
        try:
            with PostgresScheduleStore.open(url, table=table) as store:
                fill(url, table, fresh, n_held)
                time_claims(store, 30)  # warm the pool, the plan cache, the buffers
                samples: list[float] = []
                for _ in range(rounds):
                    samples += time_claims(store, claims)
                reference = time_reference_claims(url, table, min(claims, 50))
            results[name] = {"claim": samples, "reference": reference}
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"'.encode())
    base = statistics.median(results["none held"]["claim"])
    print(f"claim of 10 among {fresh} fresh due rows (median of {claims * rounds}):")
    for name, res in results.items():
        claim = statistics.median(res["claim"])
        ref = statistics.median(res["reference"])
        print(
            f"  {name:>12}: store claim {claim * 1e3:7.3f} ms ({claim / base:4.2f}x none held);"
            f" reference's claim statement {ref * 1e3:7.3f} ms"
        )


INSERTER = """
import sys, time, random
sys.path.insert(0, sys.argv[3])
from datetime import UTC, datetime
from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.postgres import PostgresScheduleStore
url, table, n = sys.argv[1], sys.argv[2], int(sys.argv[4])
with PostgresScheduleStore.open(url, table=table, create=False) as store:
    for _ in range(n):
        time.sleep(random.uniform(0.05, 0.1))
        now = datetime.now(UTC)
        store.insert(ScheduledMessage.delay(Target.outbox(), now, "lag", {"t": time.time()}), 3)
"""


def wake_lag(url: str, samples: int) -> None:
    table = f"bench_lag_{uuid.uuid4().hex[:12]}"
    lags: list[float] = []
    done = threading.Event()

    def sink(message: ScheduledMessage) -> None:
        lags.append(time.time() - message.payload["t"])
        if len(lags) >= samples:
            done.set()

    try:
        with PostgresScheduleStore.open(url, table=table) as store:
            worker = SchedulerWorker(store, sink)
            stop = threading.Event()
            thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
            thread.start()
            time.sleep(0.5)  # idle
            root = str(Path(__file__).resolve().parents[1])
            child = subprocess.Popen(
                [sys.executable, "-c", INSERTER, url, table, root, str(samples)]
            )
            done.wait(samples * 0.2 + 30)
            child.wait(30)
            stop.set()
            thread.join(10)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"'.encode())
    lags.sort()
    p50 = lags[len(lags) // 2]
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    print(
        f"dispatch lag, inserted by another process, idle worker, default config"
        f" ({len(lags)} samples): p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
        f" (target p99 <= 20 ms: {p99 / 0.020:.2f}x the target)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("HEXERACT_TEST_POSTGRES_URL"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fresh", type=int, default=2_000)
    parser.add_argument("--held", type=int, default=50_000)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lag-samples", type=int, default=200)
    parser.add_argument("--skip-lag", action="store_true")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("no server: pass --url or set HEXERACT_TEST_POSTGRES_URL")
    if args.quick:
        args.claims, args.rounds, args.lag_samples = 100, 1, 60
    with psycopg.connect(args.url) as conn:
        server = conn.info.server_version
    print(
        f"pg_claim_scale: {platform.python_implementation()} {platform.python_version()},"
        f" PostgreSQL {server // 10000}.{server % 10000}, psycopg {psycopg.__version__},"
        f" {os.cpu_count()} CPUs"
    )
    claim_scale(args.url, args.fresh, args.held, args.claims, args.rounds)
    if not args.skip_lag:
        wake_lag(args.url, args.lag_samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
