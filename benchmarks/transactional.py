"""The transactional sink's cost: a drain with one effect row per occurrence written
inside the acknowledging transaction, against the plain sink plus a separate write.

    python benchmarks/transactional.py            # 2000 occurrences, 3 rounds each
    python benchmarks/transactional.py --quick    # 300 occurrences, 1 round

Each round: a fresh SQLite file with N due one-shot schedules and an ``effects`` table;
one worker (``run_once`` until nothing is claimed, batch 20, ``durability="full"``)
drains it. ``tx``: a :class:`~hexeract_lite.TransactionalSink` whose handler inserts the
effect row (one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per occurrence, holding the row and
its acknowledgement). ``plain``: a plain sink that inserts the effect row on a
connection of its own (one commit per occurrence) and the batch's acknowledgements in
one ``settle`` transaction. The rounds alternate; the medians are printed with the
ratio tx/plain (above 1: the transactional sink is slower). Both write one effect row
per occurrence; only the transactional one writes it exactly once after a crash.

Both on the default ``driver="apsw"`` and on ``driver="sqlite3"`` (the standard
library's sqlite3 for the store, the handler and the plain sink's connection), each
with its ratio, and sqlite3/apsw for each sink.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexeract_lite import (
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    SqliteScheduleStore,
    Target,
    TransactionalSink,
)

CONFIG = SchedulerWorkerConfig(
    batch_size=20,
    lease=timedelta(seconds=600),
    dispatch_timeout=timedelta(seconds=10),
    min_cycle_delay=timedelta(0),
)
INSERT = "INSERT INTO effects (occurrence) VALUES (?)"


def drain(folder: Path, n: int, mode: str, driver: str = "apsw") -> float:
    db = folder / f"{mode}-{driver}-{time.monotonic_ns()}.db"
    now = datetime.now(UTC) - timedelta(seconds=1)
    with SqliteScheduleStore.open(db, driver=driver) as store:
        store.insert_many(
            [ScheduledMessage.delay(Target.mediator(), now, "e", {"i": i}) for i in range(n)], 5
        )
        own: Any
        if driver == "sqlite3":
            # (the plain sink runs on the worker's loop or dispatch thread)
            own = sqlite3.connect(db, timeout=5, isolation_level=None, check_same_thread=False)
        else:
            own = apsw.Connection(str(db))
            own.set_busy_timeout(5000)
        own.execute("CREATE TABLE effects (occurrence TEXT NOT NULL)")

        def handler(message: ScheduledMessage, conn: Any) -> None:
            conn.execute(INSERT, (str(message.occurrence_id()),))

        def plain(message: ScheduledMessage) -> None:
            handler(message, own)

        sink: Any = TransactionalSink(handler) if mode == "tx" else plain
        worker = SchedulerWorker(store, sink, CONFIG)
        started = time.perf_counter()
        while worker.run_once().claimed:
            pass
        elapsed = time.perf_counter() - started
        [(written,)] = own.execute("SELECT count(*) FROM effects").fetchall()
        own.close()
        if mode == "tx":
            worker.sink.close()  # type: ignore[attr-defined]
    assert written == n, (mode, written)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-n", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    n = args.n or (300 if args.quick else 2000)
    rounds = args.rounds or (1 if args.quick else 3)
    drivers = ("apsw", "sqlite3")
    times: dict[tuple[str, str], list[float]] = {
        (mode, driver): [] for mode in ("tx", "plain") for driver in drivers
    }
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for mode, driver in times:
                times[mode, driver].append(drain(Path(tmp), n, mode, driver))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"| drain of {n}, one effect row each | driver | median s | occurrences/s |")
    print("|---|---|---|---|")
    for driver in drivers:
        tx, plain = median["tx", driver], median["plain", driver]
        print(f"| transactional sink | {driver} | {tx:.3f} | {n / tx:.0f} |")
        print(f"| plain sink + separate write | {driver} | {plain:.3f} | {n / plain:.0f} |")
    print(f"ratio transactional / plain: {median['tx', 'apsw'] / median['plain', 'apsw']:.2f}")
    sq_tx, sq_plain = median["tx", "sqlite3"], median["plain", "sqlite3"]
    print(f"ratio transactional / plain (sqlite3): {sq_tx / sq_plain:.2f}")
    for mode in ("tx", "plain"):
        ratio = median[mode, "sqlite3"] / median[mode, "apsw"]
        print(f"ratio sqlite3 / apsw ({mode}): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
