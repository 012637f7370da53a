"""Long handlers: how long an abort takes to reach a handler in another process.

``abort_latency(path, mode, count)``: a worker process (this file run as a script)
runs one long handler at a time on a SQLite file (default ``poll_interval`` 100 ms,
``heartbeat`` 200 ms, lease 1 s); this process waits for each handler to start, calls
``SchedulerControl.abort`` and measures the wall-clock time until the handler saw it:
``current_dispatch().should_abort()`` turning True in a sync handler (``sync``), the
cancellation of an async one (``async``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _common import MAX_ATTEMPTS, percentile

HEARTBEAT_MS = 200
POLL_MS = 100


def _lines(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _wait_for(log: Path, kind: str, sid: str, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in _lines(log):
            if line["kind"] == kind and line["sid"] == sid:
                return float(line["t"])
        time.sleep(0.002)
    raise TimeoutError(f"no {kind} line for {sid} within {timeout} s")


def abort_latency(path: str, mode: str, count: int) -> dict[str, object]:
    """``abort()`` in this process → the handler in the worker process stops."""
    from hexeract_lite import ScheduledMessage, SchedulerControl, Target
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    log = Path(path).with_suffix(".log")
    store = SqliteScheduleStore.open(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, __file__, path, str(log), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # ready
    proc.stdout.close()
    control = SchedulerControl(store)
    lags: list[float] = []
    try:
        for i in range(count):
            msg = ScheduledMessage.delay(Target.mediator(), datetime.now(UTC), "bench.abort", i)
            store.insert(msg, MAX_ATTEMPTS)
            sid = str(msg.schedule_id)
            _wait_for(log, "start", sid)
            time.sleep(0.05 + (i % 7) * 0.03)  # the request lands anywhere in the period
            asked = time.time()
            if not control.abort(msg.schedule_id, cancel=True):
                raise RuntimeError("the abort found nothing in flight")
            lags.append(_wait_for(log, "abort", sid) - asked)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        store.close()
    ms = [lag * 1000 for lag in lags]
    return {
        "value": percentile(ms, 0.99),
        "unit": "ms p99",
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "count": len(ms),
        "heartbeat_ms": HEARTBEAT_MS,
        "poll_interval_ms": POLL_MS,
    }


def _worker_main(path: str, log_path: str, mode: str) -> None:
    """The worker process: one long handler at a time until SIGTERM."""
    import asyncio
    import threading

    from hexeract_lite import SchedulerWorker, SchedulerWorkerConfig, current_dispatch
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def note(kind: str, message: Any) -> None:
        line = {"kind": kind, "sid": str(message.schedule_id), "t": time.time()}
        os.write(fd, (json.dumps(line) + "\n").encode())

    def sync_handler(message: Any) -> None:
        handle = current_dispatch()
        note("start", message)
        while not handle.should_abort():
            time.sleep(0.005)  # a handler that looks every 5 ms
        note("abort", message)

    async def async_handler(message: Any) -> None:
        note("start", message)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            note("abort", message)
            raise

    config = SchedulerWorkerConfig(
        batch_size=1,
        lease=timedelta(seconds=1),
        heartbeat=timedelta(milliseconds=HEARTBEAT_MS),
        poll_interval=timedelta(milliseconds=POLL_MS),
        dispatch_timeout=timedelta(seconds=120),
    )
    store = SqliteScheduleStore.open(path)
    if mode == "async":
        worker = SchedulerWorker(store, async_handler, config)

        async def main() -> None:
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            print("ready", flush=True)
            await worker.run_async(stop)

        asyncio.run(main())
    else:
        worker = SchedulerWorker(store, sync_handler, config)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        print("ready", flush=True)
        worker.run(stop)
    store.close()


if __name__ == "__main__":
    _worker_main(sys.argv[1], sys.argv[2], sys.argv[3])
