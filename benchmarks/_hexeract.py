"""hexeract_lite's side of every measurement, through its public API only.

The store is opened the way an application opens it (``SqliteScheduleStore.open(path)``,
``durability="full"``); the worker is a ``SchedulerWorker`` with a ``CallableSink`` whose
function does nothing but count (and, for the lag, read the clock).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from _common import EVENT_TYPE, MAX_ATTEMPTS, percentile, rss_mb

LEASE = timedelta(seconds=300)


def _store(path: str, durability: str = "full") -> Any:
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    return SqliteScheduleStore.open(path, durability=durability)


def _messages(n: int, start: datetime) -> list[Any]:
    from hexeract_lite import ScheduledMessage, Target

    target = Target.mediator()
    return [
        ScheduledMessage.delay(target, start + timedelta(milliseconds=i), EVENT_TYPE, {"i": i})
        for i in range(n)
    ]


def _worker(store: Any, sink: Any, run_log: bool = True, **config: Any) -> Any:
    """A worker with the default config but for ``config``; a batch larger than the
    default lease allows (batch_size * dispatch_timeout <= lease) gets a longer lease.
    ``run_log=False``: the worker records no runs."""
    from hexeract_lite.sinks import CallableSink
    from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

    defaults = SchedulerWorkerConfig()
    batch = config.get("batch_size", defaults.batch_size)
    if "lease" not in config and defaults.dispatch_timeout * batch > defaults.lease:
        config["lease"] = defaults.dispatch_timeout * batch
    worker_config = SchedulerWorkerConfig(**config)
    if run_log:
        return SchedulerWorker(store, CallableSink(sink), worker_config)
    return SchedulerWorker(store, CallableSink(sink), worker_config, run_log=False)


def _config_figures(worker: Any) -> dict[str, object]:
    """The worker settings a result depends on, recorded with it."""
    config = getattr(worker, "config", None)
    out: dict[str, object] = {}
    for name in ("batch_size", "poll_interval", "min_cycle_delay"):
        value = getattr(config, name, None)
        if isinstance(value, timedelta):
            out[f"{name}_ms"] = value.total_seconds() * 1000
        elif value is not None:
            out[name] = value
    return out


# -- writing -----------------------------------------------------------------------------


def enqueue(path: str, n: int, build: bool = False) -> dict[str, object]:
    """``store.insert(message, 5)`` one call at a time (each its own transaction).

    With ``build`` the message is built inside the timed loop too
    (``ScheduledMessage.delay``: id, JSON payload, validation), as a peer's enqueue
    includes building its job.
    """
    from hexeract_lite import ScheduledMessage, Target

    store = _store(path)
    start = datetime.now(UTC) + timedelta(hours=1)
    if build:
        target = Target.mediator()
        t0 = time.perf_counter()
        for i in range(n):
            message = ScheduledMessage.delay(
                target, start + timedelta(milliseconds=i), EVENT_TYPE, {"i": i}
            )
            store.insert(message, MAX_ATTEMPTS)
        elapsed = time.perf_counter() - t0
    else:
        messages = _messages(n, start)
        t0 = time.perf_counter()
        for message in messages:
            store.insert(message, MAX_ATTEMPTS)
        elapsed = time.perf_counter() - t0
    store.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


def insert_many(path: str, n: int, batch: int) -> dict[str, object]:
    """``store.insert_many(chunk, 5)`` over prebuilt messages, ``batch`` per call."""
    store = _store(path)
    messages = _messages(n, datetime.now(UTC) + timedelta(hours=1))
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        store.insert_many(messages[start : start + batch], MAX_ATTEMPTS)
    elapsed = time.perf_counter() - t0
    store.close()
    return {"value": n / elapsed, "unit": "rows/s", "n": n, "seconds": elapsed}


# -- the worker --------------------------------------------------------------------------


def drain(
    path: str,
    n: int,
    batch: int | None,
    mode: str,
    min_cycle_delay: float | None = None,
    run_log: bool = True,
) -> dict[str, object]:
    """Deliver ``n`` due rows with one worker and a no-op sink (``run_log=False``: a
    worker that records no runs).

    ``batch=None`` and no ``min_cycle_delay``: the default ``SchedulerWorkerConfig()``,
    nothing set (the result records the batch size and delays it had).

    ``mode="run_once"``: call ``worker.run_once()`` until ``n`` are delivered (no pause
    between cycles). ``mode="run"``: the worker's own loop on a thread, stopped when the
    sink has seen ``n`` messages (timing ends at the ``n``-th dispatch; the last batch's
    acknowledgements are then waited for before counting what is left).
    """
    store = _store(path)
    seen = [0]
    done = threading.Event()

    def sink(message: Any) -> None:
        seen[0] += 1
        if seen[0] >= n:
            done.set()

    config: dict[str, Any] = {} if batch is None else {"batch_size": batch}
    if min_cycle_delay is not None:
        config["min_cycle_delay"] = timedelta(seconds=min_cycle_delay)
    worker = _worker(store, sink, run_log, **config)
    cycles = 0
    delivered = 0
    cpu0 = time.process_time()
    if mode == "run_once":
        idle = 0
        t0 = time.perf_counter()
        while delivered < n and idle < 3:
            report = worker.run_once()
            delivered += report.delivered
            cycles += 1
            idle = 0 if report.claimed else idle + 1
        elapsed = time.perf_counter() - t0
    elif mode == "run":
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        t0 = time.perf_counter()
        thread.start()
        done.wait(600)
        elapsed = time.perf_counter() - t0
        time.sleep(0.05)  # let the last acknowledgements land
        stop.set()
        thread.join(60)
        delivered = seen[0]
    else:
        raise ValueError(f"mode {mode!r}")
    cpu = time.process_time() - cpu0  # every thread of the process, to the stop
    store.close()
    return {
        "value": delivered / elapsed,
        "unit": "rows/s",
        "n": delivered,
        "cpu_us_per_row": cpu / delivered * 1e6,
        "cycles": cycles,
        "dispatched": seen[0],
        "seconds": elapsed,
        **_config_figures(worker),
    }


def claim_latency(
    path: str, claims: int, batch: int = 10, durability: str = "full"
) -> dict[str, object]:
    """Time ``claim_due(now, batch, 300 s)`` (fresh ``now`` each); the claimed rows are
    acknowledged (``mark_delivered``) outside the timer so every claim sees the same
    queue shape. Rows in backoff at the head of the queue are what the backoff variant
    measures on purpose. ``durability="normal"``: no fsync per commit, so the figure is
    the index work and the Python around it."""
    store = _store(path, durability)
    samples = []
    claimed = 0
    for _ in range(claims):
        now = datetime.now(UTC)
        t0 = time.perf_counter()
        got = store.claim_due(now, batch, LEASE)
        samples.append(time.perf_counter() - t0)
        claimed += len(got)
        for occ in got:
            store.mark_delivered(occ.message.schedule_id, occ.leased_until)
    store.close()
    samples.sort()
    return {
        "value": samples[len(samples) // 2] * 1e6,
        "unit": "µs/claim",
        "mean_us": sum(samples) / len(samples) * 1e6,
        "p99_us": samples[int(len(samples) * 0.99) - 1] * 1e6,
        "claimed": claimed,
        "claims": claims,
    }


_INSERTER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    from hexeract_lite import ScheduledMessage, Target
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    store = SqliteScheduleStore.open(sys.argv[1])
    count, gap = int(sys.argv[2]), float(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        msg = ScheduledMessage.delay(Target.mediator(), datetime.now(UTC), "bench.lag", {"i": i})
        store.insert(msg, 5)
        time.sleep(gap)
    store.close()
    """
)


def dispatch_lag(path: str, mode: str, count: int) -> dict[str, object]:
    """Due instant → sink called, with an idle worker in ``run()`` (default config).

    - ``future``: every ~20 ms this process inserts a message due 50-200 ms later;
    - ``now``: every ~20 ms this process inserts a message due now;
    - ``other-process``: another process inserts a message due now every ~50 ms.

    The due instant is the message's ``scheduled_for`` (UTC, ms), the sink's moment is
    the wall clock when it is called; both are real time (no frozen clock).
    """
    import random

    from hexeract_lite import ScheduledMessage, Target

    store = _store(path)
    lags: list[float] = []
    got = threading.Event()

    def sink(message: Any) -> None:
        lags.append(time.time() - message.scheduled_for.timestamp())
        if len(lags) >= count:
            got.set()

    worker = _worker(store, sink)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.5)  # idle: the worker is asleep when the first message arrives
    rng = random.Random(7)
    target = Target.mediator()
    if mode in ("future", "now"):
        for i in range(count):
            now = datetime.now(UTC)
            due = now + timedelta(milliseconds=rng.uniform(50, 200)) if mode == "future" else now
            store.insert(ScheduledMessage.delay(target, due, "bench.lag", {"i": i}), MAX_ATTEMPTS)
            time.sleep(0.02)
    elif mode == "other-process":
        proc = subprocess.Popen(
            [sys.executable, "-c", _INSERTER, path, str(count), "0.05"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.readline()  # ready: imports and open done
        time.sleep(0.3)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        proc.wait(120)
    else:
        raise ValueError(f"mode {mode!r}")
    got.wait(10)
    stop.set()
    thread.join(30)
    store.close()
    ms = [lag * 1000 for lag in lags]
    return {
        "value": percentile(ms, 0.99),
        "unit": "ms p99",
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": max(ms) if ms else float("nan"),
        "delivered": len(ms),
        "expected": count,
        **_config_figures(worker),
    }


def idle_cpu(path: str, seconds: float) -> dict[str, object]:
    """CPU time of this whole process while a worker idles in ``run()`` (default config)
    over a table of rows due tomorrow, as % of one core."""
    store = _store(path)
    worker = _worker(store, lambda message: None)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(1.0)  # past start-up
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    cpu1, wall1 = time.process_time(), time.perf_counter()
    stop.set()
    thread.join(30)
    store.close()
    return {
        "value": (cpu1 - cpu0) / (wall1 - wall0) * 100,
        "unit": "% core",
        "cpu_s": cpu1 - cpu0,
        "wall_s": wall1 - wall0,
    }


def rss(path: str, cycles: int) -> dict[str, object]:
    """VmRSS after ``cycles`` ``run_once()`` cycles (batch 10, default config) over a
    table whose rows are all due, so every cycle sweeps, claims, dispatches and
    acknowledges. ``delta_mb``: growth from just after the imports."""
    import hexeract_lite.sinks
    import hexeract_lite.store.sqlite
    import hexeract_lite.worker  # noqa: F401

    before = rss_mb()
    store = _store(path)
    opened = rss_mb()
    worker = _worker(store, lambda message: None)
    delivered = 0
    for _ in range(cycles):
        delivered += worker.run_once().delivered
    after = rss_mb()
    store.close()
    return {
        "value": after,
        "unit": "MiB",
        "delta_mb": after - before,
        "rss_imports_mb": before,
        "rss_open_mb": opened,
        "delivered": delivered,
    }
