"""A scheduler worker process whose sink records every delivery durably.

Used by the crash and contention tests::

    python crash_worker.py DB LOG [--lease 1.5] [--batch 5] [--dispatch-timeout 0.3]
                                  [--before 0.005] [--after 0.005] [--poll 0.02]

Each dispatch sleeps up to ``--before`` seconds, appends one line
``<occurrence id> <schedule id> <pid>`` to LOG with a single ``write`` on an
``O_APPEND`` descriptor followed by ``fsync`` (so a line is in the log before the
worker acknowledges, and survives a SIGKILL), then sleeps up to ``--after`` seconds:
a kill in that window leaves a delivered but unacknowledged occurrence, which the
scheduler must deliver again. SIGTERM stops the worker cleanly. Logging goes to stderr
at WARNING, so a store error that reaches the worker shows up there.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
from datetime import timedelta

from hexeract_lite import ScheduledMessage
from hexeract_lite.sinks import CallableSink
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("log")
    parser.add_argument("--lease", type=float, default=1.5)
    parser.add_argument("--batch", type=int, default=5)
    parser.add_argument("--dispatch-timeout", type=float, default=0.3)
    parser.add_argument("--before", type=float, default=0.0)
    parser.add_argument("--after", type=float, default=0.0)
    parser.add_argument("--poll", type=float, default=0.02)
    args = parser.parse_args()

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    pid = os.getpid()
    rng = random.Random()

    def deliver(message: ScheduledMessage) -> None:
        if args.before:
            time.sleep(rng.uniform(0, args.before))
        line = f"{message.occurrence_id()} {message.schedule_id} {pid}\n".encode()
        assert os.write(fd, line) == len(line)
        os.fsync(fd)
        if args.after:
            time.sleep(rng.uniform(0, args.after))

    config = SchedulerWorkerConfig(
        poll_interval=timedelta(seconds=args.poll),
        batch_size=args.batch,
        lease=timedelta(seconds=args.lease),
        retry_base_delay=timedelta(milliseconds=50),
        retry_max_delay=timedelta(milliseconds=500),
        jitter=True,
        min_cycle_delay=timedelta(0),
        dispatch_timeout=timedelta(seconds=args.dispatch_timeout),
    )
    with SqliteScheduleStore.open(args.db) as store:
        worker = SchedulerWorker(store, CallableSink(deliver), config)
        print("ready", flush=True)
        worker.run(stop)
    os.close(fd)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
