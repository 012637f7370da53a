"""Drains by several worker processes: SQLite on one file, and PostgreSQL.

``workers`` child processes each start, open their store (or connection) and report
ready, untimed; then they are all told to go at once, and this process polls the number
of due rows left (every ``POLL`` seconds) until ``n`` are gone. The value is the
aggregate rate, rows gone / time from the go to the poll that saw them gone; the
children are then told to stop. The same harness drives:

- ``hexeract-sqlite``: a default-config ``SchedulerWorker.run()`` over
  ``SqliteScheduleStore.open(path)``, a no-op sink (``sqlite_drain``);
- ``hexeract-pg``: the same over ``PostgresScheduleStore.open(url, table=...)``;
- ``floor-pg``: raw psycopg, the reference's one-statement claim of 10 (``FOR UPDATE
  SKIP LOCKED`` under an ``UPDATE ... RETURNING``, its own transaction), a no-op per
  row, then the 10 fenced acknowledgements by ``executemany`` in one transaction;
- ``procrastinate``: ``App.run_worker_async(wait=False, concurrency=1)`` with a no-op
  synchronous task, its app (connection pool) open before the go (the worker returns
  once the queue is empty).

``sqlite_drain`` can also run another process inserting meanwhile (``writer``: the
contention writer of ``_contention``), and then reports that writer's insert p99.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import TABLE, connect, now_ts, percentile

ROOT = Path(__file__).resolve().parents[1]
POLL = 0.01

_CHILD = textwrap.dedent(
    """
    import json, sys, threading, time
    kind, spec = sys.argv[1], json.loads(sys.argv[2])
    sys.path.insert(0, spec["root"])
    stop = threading.Event()
    if kind in ("hexeract-sqlite", "hexeract-pg"):
        from hexeract_lite.sinks import CallableSink
        from hexeract_lite.worker import SchedulerWorker
        if kind == "hexeract-sqlite":
            from hexeract_lite.store.sqlite import SqliteScheduleStore
            store = SqliteScheduleStore.open(spec["path"])
        else:
            from hexeract_lite.store.postgres import PostgresScheduleStore
            store = PostgresScheduleStore.open(spec["url"], table=spec["table"], create=False)
        worker = SchedulerWorker(store, CallableSink(lambda message: None))

        def work():
            worker.run(stop)
            store.close()
    elif kind == "floor-pg":
        from datetime import UTC, datetime, timedelta
        import psycopg
        conn = psycopg.connect(spec["url"])
        claim, ack = spec["claim"].encode(), spec["ack"].encode()

        def work():
            while not stop.is_set():
                now = datetime.now(UTC)
                params = {"now": now, "until": now + timedelta(minutes=5)}
                with conn.transaction():
                    rows = conn.execute(claim, params).fetchall()
                if not rows:
                    break
                for row in rows:
                    pass  # the no-op handler
                with conn.transaction(), conn.cursor() as cur:
                    now = datetime.now(UTC)
                    cur.executemany(ack, [{"now": now, "id": r[0], "lease": r[1]} for r in rows])
            conn.close()
    elif kind == "procrastinate":
        import logging
        logging.disable(logging.WARNING)
        import procrastinate
        app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=spec["conninfo"])
        )

        @app.task(name="noop")
        def noop(i):
            return None

        async def drain():
            async with app.open_async():  # the pool is open before "ready"
                await app.check_connection_async()
                print("ready", flush=True)
                sys.stdin.readline()
                await app.run_worker_async(
                    wait=False, concurrency=1, install_signal_handlers=False
                )

        import asyncio
        asyncio.run(drain())
        sys.stdin.readline()
        raise SystemExit(0)
    else:
        raise SystemExit(f"kind {kind!r}")
    print("ready", flush=True)
    sys.stdin.readline()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    work()
    """
)


def start(kind: str, spec: dict[str, Any], workers: int) -> list[subprocess.Popen[str]]:
    """``workers`` children of ``kind``, each ready (started, store open)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, kind, json.dumps({**spec, "root": str(ROOT)})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            stop(procs)
            raise RuntimeError(f"a {kind} worker process did not start")
    return procs


def go(procs: list[subprocess.Popen[str]]) -> float:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return time.perf_counter()


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        try:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def drain(
    kind: str,
    spec: dict[str, Any],
    workers: int,
    n: int,
    left: Callable[[], int],
    timeout: float = 300.0,
) -> dict[str, object]:
    """The harness: ``workers`` children of ``kind`` take ``n`` rows off the queue."""
    procs = start(kind, spec, workers)
    try:
        first = left()
        t0 = go(procs)
        gone = 0
        while time.perf_counter() - t0 < timeout:
            gone = first - left()
            if gone >= n:
                break
            time.sleep(POLL)
        elapsed = time.perf_counter() - t0
    finally:
        stop(procs)
    return {
        "value": gone / elapsed,
        "unit": "rows/s",
        "n": gone,
        "expected": n,
        "workers": workers,
        "seconds": elapsed,
        **(_default_figures() if kind.startswith("hexeract") else {}),
    }


def _default_figures() -> dict[str, object]:
    """The default config's settings the hexeract workers ran with."""
    from types import SimpleNamespace

    from _hexeract import _config_figures

    from hexeract_lite.worker import SchedulerWorkerConfig

    return _config_figures(SimpleNamespace(config=SchedulerWorkerConfig()))


def _sqlite_left(path: str) -> Callable[[], int]:
    conn = connect(path)
    sql = (
        f"SELECT count(*) FROM {TABLE} WHERE delivered_at IS NULL AND dead_lettered_at IS NULL"
        " AND cancelled_at IS NULL AND paused = 0 AND scheduled_for <= ?"
    )

    def left() -> int:
        (count,) = conn.execute(sql, (now_ts(),)).fetchall()[0]
        assert isinstance(count, int)
        return count

    return left


def sqlite_drain(
    path: str, n: int, workers: int, writer: str | None = None, count: int = 200, gap: float = 0.01
) -> dict[str, object]:
    """``workers`` default-config worker processes on one SQLite file take ``n`` of its
    due rows. With ``writer``, another process inserts ``count`` rows (due tomorrow) one
    by one meanwhile, started once the drain is under way: the value is then that
    writer's insert p99 (ms), and the drain's rate is recorded beside it."""
    left = _sqlite_left(path)
    if writer is None:
        return {**drain("hexeract-sqlite", {"path": path}, workers, n, left), "file": "sqlite"}
    from _contention import _WRITER

    procs = start("hexeract-sqlite", {"path": path}, workers)
    wproc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, path, writer, str(count), str(gap)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert wproc.stdin is not None and wproc.stdout is not None
    try:
        if wproc.stdout.readline().strip() != "ready":
            raise RuntimeError("the writer process did not start")
        first = left()
        t0 = go(procs)
        while left() == first and time.perf_counter() - t0 < 30:  # the drain is under way
            time.sleep(POLL)
        wproc.stdin.write("go\n")
        wproc.stdin.flush()
        line = wproc.stdout.readline()
        gone, elapsed = first - left(), time.perf_counter() - t0
        wproc.wait(60)
    finally:
        stop(procs)
    out = json.loads(line)
    samples = [s * 1000 for s in out["samples"]]
    return {
        "value": percentile(samples, 0.99),
        "unit": "ms p99",
        "p50_ms": percentile(samples, 0.5),
        "max_ms": max(samples),
        "inserts": len(samples),
        "failed": out["failed"],
        "workers": workers,
        "drain_rows_per_s": gone / elapsed,
        "drained_all": gone >= first,
        "writer": writer,
        **_default_figures(),
    }
