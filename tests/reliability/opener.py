"""A process that opens brand-new databases at agreed instants, racing its siblings.

    python opener.py FOLDER ROUNDS START INTERVAL

For round r (0 <= r < ROUNDS) it waits until the wall-clock instant
``START + r * INTERVAL``, opens ``FOLDER/r<r>.db`` (which does not exist yet: every
sibling process tries to create it at the same moment) and inserts one schedule. It
prints ``<r> ok`` or ``<r> error <type>: <message>`` per round, and exits 0.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.sqlite import SqliteScheduleStore


def main() -> int:
    folder, rounds = Path(sys.argv[1]), int(sys.argv[2])
    start, interval = float(sys.argv[3]), float(sys.argv[4])
    for r in range(rounds):
        while time.time() < start + r * interval:
            pass  # spin: a sleep would blur the start by a scheduler tick
        try:
            with SqliteScheduleStore.open(folder / f"r{r}.db") as store:
                store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "e", {}), 3)
        except Exception as exc:
            print(f"{r} error {type(exc).__name__}: {exc}", flush=True)
        else:
            print(f"{r} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
