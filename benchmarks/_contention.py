"""Contention: does a draining worker starve another process writing to the file.

One worker (``SchedulerWorker.run()`` on a thread, the default config unless
``min_cycle_delay`` is given) drains a prefilled backlog of due rows while another
process inserts one row every ``gap`` seconds (``count`` of them), timing each insert
from the call to its commit. ``writer``:

- ``"hexeract"``: ``SqliteScheduleStore.insert`` (the store's own connection, its
  busy handling and default ``busy_timeout``);
- ``"sqlite3"``: the standard library's ``sqlite3`` module with its defaults
  (``timeout=5.0``: SQLite's own busy handler, which sleeps 1, 2, 5, 10, ... 100 ms
  between tries), one ``INSERT`` and ``commit()`` per row: a foreign tool writing to
  the same file.

The value is the writer's p99 insert latency (lower is better); p50, max, the number of
inserts that failed (``database is locked`` after the busy timeout) and the worker's
drain rate over the same window are recorded with it. The backlog must outlast the
writer; ``drained_all`` says when it did not (the figures then understate contention).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from typing import Any

from _common import percentile
from _hexeract import _config_figures, _store, _worker

_WRITER = textwrap.dedent(
    """
    import json, os, sys, time, uuid
    path, writer, count, gap = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    if writer == "hexeract":
        from datetime import UTC, datetime, timedelta
        from hexeract_lite import ScheduledMessage, Target
        from hexeract_lite.store.sqlite import SqliteScheduleStore

        store = SqliteScheduleStore.open(path)
        target = Target.mediator()

        def write(i):
            at = datetime.now(UTC) + timedelta(days=1)
            store.insert(ScheduledMessage.delay(target, at, "bench.contention", {"i": i}), 5)
    else:
        import sqlite3

        conn = sqlite3.connect(path)  # the defaults: timeout=5.0, implicit transactions
        sql = (
            "INSERT INTO scheduled_messages (schedule_id, event_type, payload, trigger_kind,"
            " cron_expr, scheduled_for, target_kind, target_routing_key, attempts,"
            " max_attempts, leased_until, paused, last_error, created_at)"
            " VALUES (?, 'bench.contention', ?, 'delay', NULL, ?, 'mediator', NULL, 0, 5,"
            " NULL, 0, NULL, ?)"
        )

        def write(i):
            now = time.time()
            due = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now + 86400)) + ".000Z"
            made = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + ".000Z"
            conn.execute(sql, (uuid.uuid4().bytes, json.dumps({"i": i}), due, made))
            conn.commit()

    print("ready", flush=True)
    sys.stdin.readline()
    samples, failed = [], 0
    for i in range(count):
        t0 = time.perf_counter()
        try:
            write(i)
        except Exception:
            failed += 1
        samples.append(time.perf_counter() - t0)
        time.sleep(gap)
    print(json.dumps({"samples": samples, "failed": failed}), flush=True)
    """
)


def contention(
    path: str,
    writer: str,
    count: int = 200,
    gap: float = 0.01,
    min_cycle_delay: float | None = None,
) -> dict[str, object]:
    """See the module docstring."""
    store = _store(path)
    seen = [0]
    backlog = store.stats().due

    def sink(message: Any) -> None:
        seen[0] += 1

    config: dict[str, Any] = {}
    if min_cycle_delay is not None:
        config["min_cycle_delay"] = timedelta(seconds=min_cycle_delay)
    worker = _worker(store, sink, **config)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, path, writer, str(count), str(gap)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the writer process did not start")
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    while seen[0] == 0 and thread.is_alive():  # the drain is under way
        time.sleep(0.001)
    n0, t0 = seen[0], time.perf_counter()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - t0
    rate = (seen[0] - n0) / elapsed
    stop.set()
    thread.join(60)
    proc.wait(60)
    left = store.stats().due
    store.close()
    out = json.loads(line)
    samples = [s * 1000 for s in out["samples"]]
    return {
        "value": percentile(samples, 0.99),
        "unit": "ms p99",
        "p50_ms": percentile(samples, 0.5),
        "max_ms": max(samples),
        "inserts": len(samples),
        "failed": out["failed"],
        "drain_rows_per_s": rate,
        "drained_all": left == 0,
        "backlog": backlog,
        "writer": writer,
        **_config_figures(worker),
    }
