"""MySQL/MariaDB: drains with 1 and 4 workers, and a claim among rows in backoff.

    python benchmarks/mysql_scale.py                # needs HEXERACT_TEST_MYSQL_URL
    python benchmarks/mysql_scale.py --quick
    python benchmarks/mysql_scale.py --url mysql://user:pw@host/db

(a) drain: ``--rows`` due one-shots drained by one worker process, then by four
    (each its own process, its own store, ``SchedulerWorker.run_once`` in a loop with
    the default batch of 10), timed from the start signal until the table has nothing
    pending; rows per second.
(b) claim: two tables get the same 2,000 fresh due rows; one also gets ``--held``
    rows in retry backoff (leased an hour past now), scheduled before every fresh row.
    ``--claims`` claims of 10 are timed one by one; each claimed row is rescheduled to
    now outside the timer, so every claim finds the same work. The ratio of the medians
    (held / none) is the figure: at most 2x.

Each table is dropped afterwards. Ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pymysql

from hexeract_lite import ScheduledMessage, SchedulerWorker, Settlement, Target
from hexeract_lite.store.mysql import MysqlScheduleStore
from hexeract_lite.store.mysql.connections import url_params

LEASE = timedelta(minutes=5)


def _drop(url: str, table: str) -> None:
    conn = pymysql.connect(**url_params(url), autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{table}`, `{table}_runs`")
        cur.execute("DELETE FROM hexeract_lite_schema WHERE table_name = %s", [table])
    conn.close()


def _drain_child(url: str, table: str, go: str) -> None:
    with MysqlScheduleStore.open(url, table=table, create=False) as store:
        worker = SchedulerWorker(store, lambda message: None)
        while not os.path.exists(go):
            time.sleep(0.001)
        while worker.run_once().claimed or store.next_wakeup() is not None:
            pass


def drain(url: str, rows: int, workers: int, tmp: Path) -> float:
    """Rows per second drained by ``workers`` processes."""
    table = f"bench_drain_{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    messages = [
        ScheduledMessage.delay(Target.outbox(), now - timedelta(seconds=1), "bench", {"i": i})
        for i in range(rows)
    ]
    try:
        with MysqlScheduleStore.open(url, table=table) as store:
            for start in range(0, rows, 1000):
                store.insert_many(messages[start : start + 1000], 5)
        go = tmp / f"go-{table}"
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_drain_child, args=(url, table, str(go))) for _ in range(workers)
        ]
        for p in procs:
            p.start()
        time.sleep(1.0)  # the children connect
        started = time.perf_counter()
        go.touch()
        for p in procs:
            p.join()
        return rows / (time.perf_counter() - started)
    finally:
        _drop(url, table)


def claim_medians(url: str, held: int, claims: int) -> tuple[float, float]:
    """Median seconds of a claim of 10 with none held and with ``held`` in backoff."""
    now = datetime.now(UTC).replace(microsecond=0)
    medians = []
    for n_held in (0, held):
        table = f"bench_claim_{uuid.uuid4().hex[:8]}"
        try:
            with MysqlScheduleStore.open(url, table=table) as store:
                early = now - timedelta(days=1)
                backoff = [
                    ScheduledMessage.delay(Target.outbox(), early, "held", {"i": i})
                    for i in range(n_held)
                ]
                fresh = [
                    ScheduledMessage.delay(
                        Target.outbox(), now - timedelta(seconds=1), "b", {"i": i}
                    )
                    for i in range(2000)
                ]
                for start in range(0, len(backoff), 1000):
                    store.insert_many(backoff[start : start + 1000], 5)
                store.insert_many(fresh, 1_000_000)
                while True:  # put every held row in backoff: claimed, failed for an hour
                    batch = store.claim_due(early + timedelta(seconds=1), 1000, LEASE)
                    if not batch:
                        break
                    store.settle(
                        [
                            Settlement.failed(
                                o.message.schedule_id, timedelta(hours=2), "x", o.leased_until
                            )
                            for o in batch
                        ]
                    )
                times = []
                for _ in range(claims):
                    t0 = time.perf_counter()
                    got = store.claim_due(now, 10, LEASE)
                    times.append(time.perf_counter() - t0)
                    store.settle(
                        [
                            Settlement.reschedule(o.message.schedule_id, now, o.leased_until)
                            for o in got
                        ]
                    )
                medians.append(statistics.median(times))
        finally:
            _drop(url, table)
    return medians[0], medians[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=os.environ.get("HEXERACT_TEST_MYSQL_URL"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--held", type=int, default=50_000)
    parser.add_argument("--claims", type=int, default=200)
    args = parser.parse_args()
    if not args.url:
        parser.error("no server: pass --url or set HEXERACT_TEST_MYSQL_URL")
    rows, held, claims = (2000, 50_000, 50) if args.quick else (args.rows, args.held, args.claims)
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    conn = pymysql.connect(**url_params(args.url))
    server = conn.get_server_info()  # type: ignore[no-untyped-call]
    conn.close()
    print(f"server {server}; {rows} rows drained, {held} held, {claims} claims", file=sys.stderr)
    print("| measurement | figure |\n| --- | --- |")
    for workers in (1, 4):
        rate = drain(args.url, rows, workers, tmp)
        print(f"| MySQL drain {rows}, {workers} worker process(es) | {rate:,.0f}/s |", flush=True)
    none, with_held = claim_medians(args.url, held, claims)
    print(
        f"| MySQL claim of 10, {held:,} rows in backoff vs none | {none * 1e3:.2f} ms vs"
        f" {with_held * 1e3:.2f} ms: {with_held / none:.2f}x |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
