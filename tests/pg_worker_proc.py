"""A worker process for the server stores' contention tests: claim, record, acknowledge.

    python -m tests.pg_worker_proc URL TABLE OUT [--batch N] [--lease S] [--hold]
                                   [--go PATH] [--ready PATH] [--deadline S]

Each claimed occurrence is appended to OUT as ``<schedule id> <attempts>``, written
with one unbuffered ``os.write`` on an ``O_APPEND`` descriptor *before* it is
acknowledged, so a process killed with SIGKILL leaves a record of every occurrence it
was handed. The process opens its own store (:func:`~hexeract_lite.open_store`:
PostgreSQL or MySQL, by the URL; its own connections), touches ``--ready``
once connected, waits for ``--go`` to exist, then drains: it claims until the table
has no non-terminal row left (``next_wakeup()`` is None) or ``--deadline`` passes.
``--hold`` claims one batch, records it, never acknowledges and waits to be killed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from hexeract_lite import open_store
from hexeract_lite.clock import SYSTEM_CLOCK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("table")
    parser.add_argument("out", type=Path)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--go", type=Path)
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--deadline", type=float, default=120.0)
    args = parser.parse_args(argv)

    lease = timedelta(seconds=args.lease)
    out = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open_store(args.url, table=args.table, create=False) as store:
        if args.ready is not None:
            args.ready.touch()
        stop_at = time.monotonic() + args.deadline
        while args.go is not None and not args.go.exists():
            if time.monotonic() > stop_at:
                return 3
            time.sleep(0.005)
        while time.monotonic() < stop_at:
            claimed = store.claim_due(SYSTEM_CLOCK.now(), args.batch, lease)
            if claimed:
                lines = "".join(f"{c.message.schedule_id} {c.attempts}\n" for c in claimed)
                os.write(out, lines.encode())
            if args.hold:
                if claimed:
                    Path(f"{args.out}.held").touch()
                    time.sleep(args.deadline)
                    return 0
                time.sleep(0.01)
                continue
            for occurrence in claimed:
                if not store.mark_delivered(
                    occurrence.message.schedule_id, occurrence.leased_until
                ):
                    print(f"fenced out: {occurrence.message.schedule_id}", file=sys.stderr)
                    return 2
            if not claimed:
                if store.next_wakeup() is None:
                    return 0
                time.sleep(0.02)
    return 4  # deadline passed with work left


if __name__ == "__main__":
    raise SystemExit(main())
