"""An inserting process for the contention test.

    python inserter.py DB IDS --seconds 15 --seed 1 [--pause 0.01] [--max-batch 8]

For ``--seconds`` it inserts one-shot messages, due now or within the next second, in
batches of random size (``insert`` for one, ``insert_many`` for more), pausing up to
``--pause`` seconds between batches. Each payload carries ``seed``, ``n``, its
``batch`` number and the batch's ``size``, so a reader can tell a partial batch. After
each insert *returns*, the schedule ids go to IDS, one per line: the ids of committed
schedules only. Any exception is printed to stderr with its traceback and the process
exits 1; a clean run prints ``inserted <n>`` and exits 0.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime, timedelta

from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.sqlite import SqliteScheduleStore


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("ids")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pause", type=float, default=0.01)
    parser.add_argument("--max-batch", type=int, default=8)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    inserted = batches = 0
    deadline = time.monotonic() + args.seconds
    with SqliteScheduleStore.open(args.db) as store, open(args.ids, "a") as ids:
        print("ready", flush=True)
        while time.monotonic() < deadline:
            now = datetime.now(UTC)
            size = rng.randint(1, args.max_batch)
            batch = [
                ScheduledMessage.delay(
                    Target.outbox(),
                    now + timedelta(milliseconds=rng.randrange(0, 1000)),
                    "contention",
                    {"seed": args.seed, "n": inserted + i, "batch": batches, "size": size},
                )
                for i in range(size)
            ]
            if len(batch) == 1:
                store.insert(batch[0], max_attempts=5)
            else:
                store.insert_many(batch, max_attempts=5)
            ids.write("".join(f"{m.schedule_id}\n" for m in batch))
            ids.flush()
            inserted += len(batch)
            batches += 1
            time.sleep(rng.uniform(0, args.pause))
    print(f"inserted {inserted}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
