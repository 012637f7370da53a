"""A worker process for tests/test_sqlite_processes.py: claims from a shared file.

    python tests/sqlite_claimer.py DB LOG --seconds 3 --lease-ms 400 --drop-every 40

It claims due occurrences in small batches until ``--seconds`` have passed and nothing
is pending, appends one JSON line per claimed occurrence to LOG (and flushes it) and
only then acknowledges delivery, so the log holds every claim the process was given.
Every ``--drop-every``-th claim is never acknowledged, as if the process had crashed
holding it: its lease must expire before anyone else gets it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexeract_lite.store.sqlite import SqliteScheduleStore


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("log")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--lease-ms", type=int, default=400)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--drop-every", type=int, default=0)
    args = parser.parse_args()
    lease = timedelta(milliseconds=args.lease_ms)
    deadline = time.monotonic() + args.seconds
    hard_stop = deadline + 30
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    claims = 0
    try:
        with SqliteScheduleStore.open(args.db, busy_timeout=timedelta(seconds=10)) as store:
            print("ready", flush=True)
            while time.monotonic() < hard_stop:
                now = datetime.now(UTC)
                batch = store.claim_due(now, args.batch, lease)
                if not batch:
                    if time.monotonic() >= deadline and not store.list_pending(1):
                        break
                    time.sleep(0.005)
                    continue
                lines = []
                for occ in batch:
                    claims += 1
                    dropped = bool(args.drop_every) and claims % args.drop_every == 0
                    record = {
                        "sid": str(occ.message.schedule_id),
                        "occurrence": str(occ.occurrence_id()),
                        "now": now.isoformat(),
                        "until": occ.leased_until.isoformat(),
                        "pid": os.getpid(),
                        "dropped": dropped,
                    }
                    lines.append((occ, dropped, record))
                os.write(fd, "".join(json.dumps(r) + "\n" for _, _, r in lines).encode())
                os.fsync(fd)
                for occ, dropped, record in lines:
                    if dropped:
                        continue
                    acked = store.mark_delivered(occ.message.schedule_id, occ.leased_until)
                    ack = {"ack": record["sid"], "until": record["until"], "ok": acked}
                    os.write(fd, (json.dumps(ack) + "\n").encode())
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
