"""A worker process for tests/test_long_handlers.py: long handlers on a shared file.

    python tests/longrun_worker.py DB LOG --mode sleep --handler-s 3 --lease-ms 300
        --heartbeat-ms 100 --poll-ms 50

Runs a :class:`SchedulerWorker` (``run()``, or ``run_async()`` with ``--mode async``)
until SIGTERM. Every dispatch appends JSON lines to LOG (one ``os.write`` each, so a
line written before a SIGKILL is kept): ``start`` when the handler begins, then
``end`` when it returns, ``lost`` when a heartbeat found its lease lost, or ``abort``
when it saw the abort request (with the wall-clock instant it did). Modes:

- ``sleep``: sleep ``--handler-s`` in small steps, the worker's heartbeat keeping the
  lease, stopping early once ``should_abort()`` is True;
- ``async``: an async handler awaiting ``--handler-s``; an abort cancels it.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hexeract_lite import SchedulerWorker, SchedulerWorkerConfig, current_dispatch
from hexeract_lite.message import ScheduledMessage
from hexeract_lite.store.sqlite import SqliteScheduleStore


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("log")
    parser.add_argument("--mode", choices=("sleep", "async"), default="sleep")
    parser.add_argument("--handler-s", type=float, default=3.0)
    parser.add_argument("--lease-ms", type=int, default=300)
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--poll-ms", type=int, default=50)
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1)  # a test that finds it stuck asks where it is
    fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    pid = os.getpid()

    def note(kind: str, message: ScheduledMessage, **extra: Any) -> None:
        line = {"kind": kind, "pid": pid, "sid": str(message.schedule_id), "t": time.time()}
        os.write(fd, (json.dumps({**line, **extra}) + "\n").encode())

    def sleeper(message: ScheduledMessage) -> None:
        handle = current_dispatch()
        note("start", message, attempts=handle.occurrence.attempts)
        end = time.monotonic() + args.handler_s
        while time.monotonic() < end:
            if handle.should_abort():
                note("lost" if handle.lost else "abort", message)
                return
            time.sleep(0.01)
        note("end", message)

    async def waiter(message: ScheduledMessage) -> None:
        note("start", message, attempts=current_dispatch().occurrence.attempts)
        try:
            await asyncio.sleep(args.handler_s)
        except asyncio.CancelledError:
            note("abort", message)
            raise
        note("end", message)

    config = SchedulerWorkerConfig(
        batch_size=1,
        lease=timedelta(milliseconds=args.lease_ms),
        heartbeat=timedelta(milliseconds=args.heartbeat_ms),
        poll_interval=timedelta(milliseconds=args.poll_ms),
        dispatch_timeout=timedelta(seconds=max(30.0, 3 * args.handler_s)),
        retry_base_delay=timedelta(milliseconds=50),
        retry_max_delay=timedelta(milliseconds=50),
        jitter=False,
    )
    store = SqliteScheduleStore.open(args.db)
    if args.mode == "async":
        worker = SchedulerWorker(store, waiter, config)

        async def run_async() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            print("ready", flush=True)
            await worker.run_async(stop)

        asyncio.run(run_async())
    else:
        worker = SchedulerWorker(store, sleeper, config)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        print("ready", flush=True)
        worker.run(stop)
    store.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
