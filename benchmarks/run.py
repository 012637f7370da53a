"""Benchmarks: hexeract_lite against the raw SQLite floor and its peers, in one run.

    python benchmarks/run.py              # everything, 5 interleaved rounds
    python benchmarks/run.py --quick      # a short run (fewer rows, 1 round, 5 s idle)
    python benchmarks/run.py --only drain # one group, or a name / glob: 'drain/floor-*'
    python benchmarks/run.py --list       # the measurement names

Every measurement runs in a fresh subprocess on a fresh file in a temporary directory.
Rounds are interleaved (round 1 of every measurement, then round 2, ...) and the table
shows medians, so a noisy neighbour spreads over every system alike; the ratios between
rows of the same run are what to compare. Results go to ``benchmarks/results/`` as JSON.

Ratios are speed-ups: ``2.0x`` means twice as fast (or half the latency/cost) as the
reference; below 1 means slower. ``spread`` is (max - min) / median over the rounds.
``x floor`` compares with the raw apsw row that does the same job on the store's own
schema (the README says which), ``x physical`` with the physical floor (``_physical``:
the simplest durable SQLite queue); ``x huey`` etc. with that peer's row of the same
measurement. Children import this checkout's ``hexeract_lite``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _targets import Raw, paired_ratio, targets, targets_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

PEERS = ("huey", "apscheduler", "persistqueue", "procrastinate")
PEER_TITLES = {
    "huey": "huey",
    "apscheduler": "APScheduler",
    "persistqueue": "persist-queue",
    "procrastinate": "Procrastinate",
}
POSTGRES_URL = "HEXERACT_TEST_POSTGRES_URL"

# -- the measurements ------------------------------------------------------------------

Prep = tuple[int, bool, int]  # (rows, due, rows in backoff): a copy of a prefilled file
SCHEMA: Prep = (0, True, 0)


@dataclass
class Bench:
    name: str
    group: str
    system: str
    label: str
    module: str
    func: str
    kwargs: dict[str, Any]
    quick: dict[str, Any] = field(default_factory=dict)
    prep: Prep | None = SCHEMA  # None: the child gets an empty directory (peers)
    better: str = "higher"  # or "lower"
    floor: str | None = None  # the floor bench this row is compared with
    physical: str | None = None  # the physical-floor bench this row is compared with
    reference: str | None = None  # the reference-floor bench this row is compared with
    needs: str | None = None  # "postgres": run only when a server is given
    vs_peers: bool = True  # show the x huey etc. columns for this row
    timeout: float = 900.0

    def args(self, quick: bool) -> dict[str, Any]:
        return {**self.kwargs, **(self.quick if quick else {})}


GROUPS = {
    "enqueue": ("enqueue, one per call", "rows/s"),
    "insert_many": ("insert_many", "rows/s"),
    "drain": ("drain 10k due (claim → no-op handler → ack)", "rows/s"),
    "pg_drain": ("PostgreSQL drain 10k due, worker processes", "rows/s"),
    "claim": ("claim latency (claim of 10)", "µs"),
    "contention": ("another process's insert p99 while a worker drains", "ms"),
    "lag": ("dispatch lag, idle worker in run()", "ms"),
    "abort": ("abort() to the handler stopping, worker in another process", "ms"),
    "idle": ("idle worker CPU", "% of a core"),
    "rss": ("worker RSS", "MiB"),
    "startup": ("start-up, whole fresh process", "ms"),
}


def _b(name: str, label: str, call: str, kwargs: dict[str, Any], **opts: Any) -> Bench:
    """A measurement named ``group/system[-variant]`` calling ``module.func``."""
    group, rest = name.split("/")
    module, func = call.split(".")
    return Bench(name, group, rest.split("-")[0], label, module, func, kwargs, **opts)


def _benches() -> list[Bench]:
    enq, q_enq = {"n": 5000}, {"n": 1500}
    slow, q_slow = {"n": 2000}, {"n": 500}
    many, q_many = {"n": 100_000}, {"n": 20_000}
    d10k = {"n": 10_000}
    q_d = {"n": 4000}  # --quick drains part of the 10k rows
    due10k: Prep = (10_000, True, 0)
    due1m: Prep = (1_000_000, True, 0)
    backoff: Prep = (10_000, True, 100_000)
    cl, q_cl = {"claims": 300}, {"claims": 100}
    lat = {"better": "lower"}
    runs, q_runs = {"runs": 20}, {"runs": 7}
    notdue10k: Prep = (10_000, False, 0)
    due40k: Prep = (40_000, True, 0)
    cont, q_cont = {"writer": "hexeract", "count": 200}, {"count": 80}
    return [
        # enqueue one by one
        _b("enqueue/physical", "physical floor: 1 INSERT per txn, 6-column table",
           "_physical.enqueue", enq, quick=q_enq, prep=None),
        _b("enqueue/reference", "reference floor: its insert, 1 per txn, its 17-column table",
           "_reference.enqueue", enq, quick=q_enq, prep=None),
        _b("enqueue/floor", "raw apsw, 1 INSERT per txn", "_floor.enqueue", enq, quick=q_enq,
           physical="enqueue/physical"),
        _b("enqueue/hexeract", "hexeract store.insert(msg, 5)", "_hexeract.enqueue", enq,
           quick=q_enq, floor="enqueue/floor", physical="enqueue/physical"),
        _b("enqueue/hexeract-build", "hexeract ScheduledMessage.delay + insert",
           "_hexeract.enqueue", {**enq, "build": True}, quick=q_enq, floor="enqueue/floor",
           physical="enqueue/physical"),
        _b("enqueue/huey", "huey SqliteHuey, task()", "_peers.huey_enqueue", enq, quick=q_enq,
           prep=None, floor="enqueue/floor"),
        _b("enqueue/apscheduler", "APScheduler 3 add_job(date), SQLAlchemyJobStore",
           "_peers.aps_enqueue", slow, quick=q_slow, prep=None, floor="enqueue/floor"),
        _b("enqueue/persistqueue", "persist-queue SQLiteAckQueue.put", "_peers.pq_enqueue", enq,
           quick=q_enq, prep=None, floor="enqueue/floor"),
        # bulk
        _b("insert_many/physical-1000", "physical floor: executemany, 1000 per txn",
           "_physical.insert_many", {**many, "per_txn": 1000}, quick=q_many, prep=None),
        _b("insert_many/reference-1000", "reference floor: executemany of its insert, 1000 per txn",
           "_reference.insert_many", {**many, "per_txn": 1000}, quick=q_many, prep=None),
        _b("insert_many/floor-100", "raw apsw executemany, 100 per txn", "_floor.insert_many",
           {**many, "per_txn": 100}, quick=q_many),
        _b("insert_many/floor-1000", "raw apsw executemany, 1000 per txn", "_floor.insert_many",
           {**many, "per_txn": 1000}, quick=q_many, physical="insert_many/physical-1000"),
        _b("insert_many/hexeract-100", "hexeract insert_many, batches of 100",
           "_hexeract.insert_many", {**many, "batch": 100}, quick=q_many,
           floor="insert_many/floor-100"),
        _b("insert_many/hexeract-1000", "hexeract insert_many, batches of 1000",
           "_hexeract.insert_many", {**many, "batch": 1000}, quick=q_many,
           floor="insert_many/floor-1000", physical="insert_many/physical-1000"),
        # drain
        _b("drain/physical-10", "physical floor: claim 10 + ack 10, 6-column table",
           "_physical.drain", {**d10k, "batch": 10}, quick=q_d, prep=due10k),
        _b("drain/reference-10", "reference floor: its claim 10 + its mark_delivered 10",
           "_reference.drain", {**d10k, "batch": 10}, quick=q_d, prep=None),
        _b("drain/reference-10fused", "reference floor: its acks + its next claim in 1 txn",
           "_reference.drain", {**d10k, "batch": 10, "fused": True}, quick=q_d, prep=None),
        _b("drain/floor-1", "raw apsw, claim 1 + ack 1", "_floor.drain", {**d10k, "batch": 1},
           quick=q_d, prep=due10k),
        _b("drain/floor-10", "raw apsw, claim 10 + ack 10 (1 txn each)", "_floor.drain",
           {**d10k, "batch": 10}, quick=q_d, prep=due10k, physical="drain/physical-10"),
        _b("drain/floor-10fused", "raw apsw, store's statements, acks + next claim in 1 txn",
           "_floor.drain_fused", {**d10k, "batch": 10}, quick=q_d, prep=due10k,
           physical="drain/physical-10"),
        _b("drain/floor-10fused-runs", "the same, each batch's runs written too (run-log insert)",
           "_floor.drain_fused", {**d10k, "batch": 10, "runs": True}, quick=q_d, prep=due10k,
           floor="drain/floor-10fused", physical="drain/physical-10"),
        _b("drain/floor-100", "raw apsw, claim 100 + ack 100", "_floor.drain",
           {**d10k, "batch": 100}, quick=q_d, prep=due10k),
        _b("drain/hexeract-10", "hexeract run_once() loop, batch 10", "_hexeract.drain",
           {**d10k, "batch": 10, "mode": "run_once"}, quick=q_d, prep=due10k,
           floor="drain/floor-10", physical="drain/physical-10"),
        _b("drain/hexeract-100", "hexeract run_once() loop, batch 100", "_hexeract.drain",
           {**d10k, "batch": 100, "mode": "run_once"}, quick=q_d, prep=due10k,
           floor="drain/floor-100"),
        _b("drain/hexeract-10run", "hexeract run() thread, batch 10, min_cycle_delay 0",
           "_hexeract.drain", {**d10k, "batch": 10, "mode": "run", "min_cycle_delay": 0.0},
           quick=q_d, prep=due10k, floor="drain/floor-10fused", physical="drain/physical-10",
           reference="drain/reference-10fused"),
        _b("drain/hexeract-10default", "hexeract run() thread, default SchedulerWorkerConfig()",
           "_hexeract.drain", {**d10k, "batch": None, "mode": "run"}, quick=q_d, prep=due10k,
           floor="drain/floor-10fused", physical="drain/physical-10",
           reference="drain/reference-10fused"),
        _b("drain/hexeract-1proc", "hexeract, 1 worker process, default config",
           "_multi.sqlite_drain", {**d10k, "workers": 1}, quick=q_d, prep=due10k,
           reference="drain/reference-10fused"),
        _b("drain/hexeract-4proc", "hexeract, 4 worker processes on one file, default config",
           "_multi.sqlite_drain", {**d10k, "workers": 4}, quick=q_d, prep=due10k,
           floor="drain/hexeract-1proc", reference="drain/reference-10fused"),
        _b("drain/hexeract-10default-nolog", "the same, run_log=False (no run log written)",
           "_hexeract.drain", {**d10k, "batch": None, "mode": "run", "run_log": False},
           quick=q_d, prep=due10k, floor="drain/floor-10fused", physical="drain/physical-10",
           reference="drain/reference-10fused"),
        _b("drain/huey", "huey dequeue + execute, 1 thread (deletes before running)",
           "_peers.huey_drain", d10k, quick=q_d, prep=None, floor="drain/floor-1"),
        _b("drain/apscheduler", "APScheduler 3 BackgroundScheduler, 1 thread (deletes first)",
           "_peers.aps_drain", d10k, quick=q_d, prep=None, floor="drain/floor-1"),
        _b("drain/persistqueue", "persist-queue get + ack", "_peers.pq_drain", d10k, quick=q_d,
           prep=None,
           floor="drain/floor-1"),
        # PostgreSQL: worker processes on one server (skipped without one)
        *[_b(f"pg_drain/{system}-{k}", f"{label}, {k} worker process{'es' if k > 1 else ''}",
             "_pg.drain", {"n": 10_000, "workers": k, "system": system}, quick={"n": 2000},
             prep=None, needs="postgres",
             floor=None if system == "floor" else f"pg_drain/floor-{k}", timeout=1800.0)
          for k in (1, 4)
          for system, label in (("floor", "raw psycopg FOR UPDATE SKIP LOCKED, claim 10 + ack 10"),
                                ("hexeract", "hexeract run(), default config"),
                                ("procrastinate", "Procrastinate run_worker, no-op task"))],
        _b("claim/hexeract-pg-none", "hexeract PostgreSQL claim_due, 2k due rows",
           "_pg.claim_latency", {"claims": 300, "fresh": 2000, "held": 0},
           quick={"claims": 100}, prep=None, needs="postgres", **lat),
        _b("claim/hexeract-pg-held50k", "hexeract PostgreSQL claim_due, 2k due + 50k leased",
           "_pg.claim_latency", {"claims": 300, "fresh": 2000, "held": 50_000},
           quick={"claims": 100}, prep=None, needs="postgres", **lat),
        _b("lag/hexeract-pg-otherprocess", "hexeract PostgreSQL, inserted by another process",
           "_pg.dispatch_lag", {"count": 200}, quick={"count": 20}, prep=None,
           needs="postgres", **lat),
        # claim latency
        _b("claim/floor-10k", "raw apsw claim, 10k due rows", "_floor.claim_latency", cl,
           quick=q_cl, prep=due10k, **lat),
        _b("claim/hexeract-10k", "hexeract claim_due, 10k due rows", "_hexeract.claim_latency",
           cl, quick=q_cl, prep=due10k, floor="claim/floor-10k", **lat),
        _b("claim/floor-1M", "raw apsw claim, 1M due rows", "_floor.claim_latency", cl,
           quick=q_cl, prep=due1m, **lat),
        _b("claim/hexeract-1M", "hexeract claim_due, 1M due rows", "_hexeract.claim_latency",
           cl, quick=q_cl, prep=due1m, floor="claim/floor-1M", **lat),
        _b("claim/floor-backoff", "raw apsw claim, 10k due + 100k in backoff",
           "_floor.claim_latency", cl, quick=q_cl, prep=backoff, **lat),
        _b("claim/hexeract-backoff", "hexeract claim_due, 10k due + 100k in backoff",
           "_hexeract.claim_latency", cl, quick=q_cl, prep=backoff,
           floor="claim/floor-backoff", **lat),
        # the same claims without the fsync: the index work alone (what O(log n) is about)
        _b("claim/floor-nosync-10k", "raw apsw claim, 10k due, synchronous=NORMAL",
           "_floor.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=due10k,
           **lat),
        _b("claim/hexeract-nosync-10k", "hexeract claim_due, 10k due, durability=normal",
           "_hexeract.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=due10k,
           floor="claim/floor-nosync-10k", **lat),
        _b("claim/floor-nosync-1M", "raw apsw claim, 1M due, synchronous=NORMAL",
           "_floor.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=due1m,
           **lat),
        _b("claim/hexeract-nosync-1M", "hexeract claim_due, 1M due, durability=normal",
           "_hexeract.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=due1m,
           floor="claim/floor-nosync-1M", **lat),
        _b("claim/floor-nosync-backoff", "raw apsw claim, 10k due + 100k backoff, NORMAL",
           "_floor.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=backoff,
           **lat),
        _b("claim/hexeract-nosync-backoff",
           "hexeract claim_due, 10k due + 100k backoff, durability=normal",
           "_hexeract.claim_latency", {**cl, "durability": "normal"}, quick=q_cl, prep=backoff,
           floor="claim/floor-nosync-backoff", **lat),
        _b("claim/floorref-nosync-backoff",
           "raw apsw one-statement claim on the reference's pending index only, 10k + 100k backoff, NORMAL",
           "_floor.claim_latency", {**cl, "durability": "normal", "statement": "reference"},
           quick=q_cl, prep=backoff, floor="claim/floor-nosync-backoff", **lat),
        # dispatch lag
        _b("lag/hexeract-future", "hexeract, due 50-200 ms after its insert",
           "_hexeract.dispatch_lag", {"mode": "future", "count": 200}, quick={"count": 60},
           **lat),
        _b("lag/hexeract-now", "hexeract, inserted due now by this process",
           "_hexeract.dispatch_lag", {"mode": "now", "count": 200}, quick={"count": 60}, **lat),
        _b("lag/hexeract-otherprocess", "hexeract, inserted due now by another process",
           "_hexeract.dispatch_lag", {"mode": "other-process", "count": 50},
           quick={"count": 20}, **lat),
        # abort latency: heartbeat 200 ms, poll_interval 100 ms, another process
        _b("abort/hexeract-sync", "hexeract sync handler sees should_abort() (looks every 5 ms)",
           "_longrun.abort_latency", {"mode": "sync", "count": 40}, quick={"count": 8},
           vs_peers=False, **lat),
        _b("abort/hexeract-async", "hexeract async handler cancelled",
           "_longrun.abort_latency", {"mode": "async", "count": 40}, quick={"count": 8},
           vs_peers=False, **lat),
        # contention: another process's inserts while a worker drains a backlog
        _b("contention/hexeract", "default worker drains; other process: hexeract insert",
           "_contention.contention", cont, quick=q_cont, prep=due40k, vs_peers=False, **lat),
        _b("contention/hexeract-sqlite3",
           "default worker drains; other process: stdlib sqlite3, timeout=5",
           "_contention.contention", {**cont, "writer": "sqlite3"}, quick=q_cont, prep=due40k,
           vs_peers=False, **lat),
        _b("contention/hexeract-0", "min_cycle_delay 0; other process: hexeract insert",
           "_contention.contention", {**cont, "min_cycle_delay": 0.0}, quick=q_cont,
           prep=due40k, vs_peers=False, **lat),
        _b("contention/hexeract-0-sqlite3",
           "min_cycle_delay 0; other process: stdlib sqlite3, timeout=5",
           "_contention.contention", {**cont, "writer": "sqlite3", "min_cycle_delay": 0.0},
           quick=q_cont, prep=due40k, vs_peers=False, **lat),
        _b("contention/hexeract-4proc", "4 worker processes drain; other process: hexeract insert",
           "_multi.sqlite_drain", {"n": 40_000, "workers": 4, **cont}, quick=q_cont,
           prep=due40k, vs_peers=False, **lat),
        # idle CPU, memory
        _b("idle/hexeract", "hexeract run(), 10k rows due tomorrow", "_hexeract.idle_cpu",
           {"seconds": 30.0}, quick={"seconds": 5.0}, prep=(10_000, False, 0), **lat),
        _b("rss/hexeract-10k", "hexeract worker, 10k due rows, after 50 cycles",
           "_hexeract.rss", {"cycles": 50}, prep=due10k, **lat),
        _b("rss/hexeract-1M", "hexeract worker, 1M due rows, after 50 cycles", "_hexeract.rss",
           {"cycles": 50}, prep=due1m, **lat),
        # start-up: whole fresh processes, median of `runs` launches
        _b("startup/hexeract-import", "python -c 'import hexeract_lite'",
           "_startup.import_time", {**runs, "module": "hexeract_lite"}, quick=q_runs,
           prep=None, **lat),
        _b("startup/huey-import", "python -c 'import huey'", "_startup.import_time",
           {**runs, "module": "huey"}, quick=q_runs, prep=None, **lat),
        _b("startup/floor-list", "minimal apsw script: open, list query, print (10k rows)",
           "_startup.apsw_list", runs, quick=q_runs, prep=notdue10k, vs_peers=False, **lat),
        _b("startup/hexeract-list", "hexeract scheduler list, 10k rows (limit 50)",
           "_startup.cli_list", runs, quick=q_runs, prep=notdue10k, floor="startup/floor-list",
           vs_peers=False, **lat),
    ]  # fmt: skip


# the floors every SQLite throughput row of a group is compared with, unless it says
FLOORS = {
    "enqueue": ("enqueue/physical", "enqueue/reference"),
    "insert_many": ("insert_many/physical-1000", "insert_many/reference-1000"),
    "drain": ("drain/physical-10", "drain/reference-10"),
}


def _with_floors(benches: list[Bench]) -> list[Bench]:
    """Every throughput row reports both ratios: x physical and x reference floor."""
    for b in benches:
        physical, reference = FLOORS.get(b.group, (None, None))
        if b.physical is None and b.name != physical and b.system != "physical":
            b.physical = physical
        if b.reference is None and b.system not in ("physical", "reference"):
            b.reference = reference
    return benches


BENCHES = _with_floors(_benches())

# -- running ---------------------------------------------------------------------------


class Templates:
    """Prefilled files, built once per run and copied for each measurement."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.paths: dict[Prep, Path] = {}
        self.how = ""

    def get(self, prep: Prep) -> Path:
        if prep not in self.paths:
            import _common

            rows, due, backoff = prep
            path = self.directory / f"template-{rows}-{int(due)}-{backoff}.db"
            t0 = time.perf_counter()
            self.how = _common.create_schema(path)
            if rows or backoff:
                _common.fill(path, rows, due=due, backoff=backoff)
            log(f"  (prefilled {rows + backoff:,} rows in {time.perf_counter() - t0:.1f} s)")
            self.paths[prep] = path
        return self.paths[prep]


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """The children's environment: this checkout's ``hexeract_lite`` first on the path,
    whatever copy the interpreter has installed (the code measured is the code here)."""
    env = dict(os.environ)
    extra = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + extra if extra else "")
    return env


def checkout() -> dict[str, Any]:
    """The commit of this checkout (and whether the package or benchmarks differ from it)."""

    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
        )
        return proc.stdout.strip() if proc.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--", "hexeract_lite", "benchmarks"))
    return {
        "commit": commit or "unknown",
        "dirty": dirty,
        "branch": git("branch", "--show-current"),
    }


def run_child(bench: Bench, quick: bool, templates: Templates, workdir: Path) -> dict[str, Any]:
    """One measurement: a fresh directory, a fresh process."""
    cell = Path(tempfile.mkdtemp(prefix=bench.name.replace("/", "_") + "-", dir=workdir))
    try:
        if bench.prep is None:
            target = str(cell)
        else:
            target = str(cell / "bench.db")
            shutil.copyfile(templates.get(bench.prep), target)
        out = cell / "result.json"
        spec = {
            "module": bench.module,
            "func": bench.func,
            "target": target,
            "kwargs": bench.args(quick),
            "out": str(out),
        }
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
            cwd=str(cell),
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=bench.timeout,
        )
        if out.exists():
            result: dict[str, Any] = json.loads(out.read_text())
        else:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
            result = {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
        return result
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {bench.timeout:.0f} s"}
    finally:
        shutil.rmtree(cell, ignore_errors=True)


def child_main(spec_text: str) -> int:
    """Inside the fresh process: run one measurement, write its JSON."""
    import importlib

    spec = json.loads(spec_text)
    sys.path.insert(0, str(HERE))
    try:
        module = importlib.import_module(spec["module"])
        result = getattr(module, spec["func"])(spec["target"], **spec["kwargs"])
    except ImportError as exc:  # a part of hexeract_lite that does not exist yet
        result = {"skipped": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    Path(spec["out"]).write_text(json.dumps(result))
    return 0


# -- reporting -------------------------------------------------------------------------


def median_result(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of every numeric field over the rounds that produced a value."""
    good = [r for r in rounds if isinstance(r.get("value"), int | float)]
    if not good:
        first = rounds[0] if rounds else {}
        return {k: v for k, v in first.items() if k in ("error", "skipped")} or {"error": "none"}
    merged: dict[str, Any] = {"rounds": len(good)}
    for key in good[0]:
        values = [r[key] for r in good if isinstance(r.get(key), int | float)]
        if values and not isinstance(good[0][key], bool):
            merged[key] = statistics.median(values)
        else:
            merged[key] = good[0][key]
    if len(good) > 1:
        vals = [r["value"] for r in good]
        merged["spread"] = (max(vals) - min(vals)) / statistics.median(vals)
    return merged


def speedup(bench: Bench, raw: Raw, ref: str | None) -> float | None:
    """How much better ``bench`` is than ``ref`` (>1: faster / cheaper)."""
    if ref is None:
        return None
    r = paired_ratio(raw, bench.name, ref)
    if r is None or not r:
        return None
    return r if bench.better == "higher" else 1 / r


def fmt_num(value: float) -> str:
    if value >= 10_000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_value(bench: Bench, res: dict[str, Any]) -> str:
    if "value" not in res:
        if "skipped" in res:
            return "n/a"
        return "error"
    if bench.group in ("lag", "abort") and "p50_ms" in res:
        return f"p50 {fmt_num(res['p50_ms'])} / p99 {fmt_num(res['p99_ms'])}"
    if bench.group == "rss":
        return f"{fmt_num(res['value'])} (+{fmt_num(res.get('delta_mb', 0.0))})"
    if bench.group == "startup" and "python_ms" in res:
        return f"{fmt_num(res['value'])} (python alone {fmt_num(res['python_ms'])})"
    return fmt_num(res["value"])


def fmt_ratio(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}x"


def table(benches: list[Bench], medians: dict[str, dict[str, Any]], raw: Raw) -> str:
    peer_rows: dict[tuple[str, str], str] = {}
    for b in benches:
        if b.system in PEERS and "value" in medians.get(b.name, {}):
            peer_rows.setdefault((b.group, b.system), b.name)
    peers = [p for p in PEERS if any(s == p for _, s in peer_rows)]
    head = ["measurement", "system", "value", "spread", "x floor", "x physical", "x ref floor"]
    head += [f"x {PEER_TITLES[p]}" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in benches:
        res = medians.get(b.name, {})
        title, unit = GROUPS[b.group]
        value = res.get("value")
        spread = res.get("spread")
        cells = [f"{title} ({unit})", b.label, fmt_value(b, res)]
        cells.append("" if spread is None else f"{spread:.0%}")
        cells.append(fmt_ratio(speedup(b, raw, b.floor)) if value else "")
        cells.append(fmt_ratio(speedup(b, raw, b.physical)) if value else "")
        cells.append(fmt_ratio(speedup(b, raw, b.reference)) if value else "")
        for p in peers:
            variant = b.name.partition("-")[2]
            same = f"{b.group}/{p}-{variant}"
            ref_name = same if variant and same in medians else peer_rows.get((b.group, p))
            if value and ref_name and b.system != p and b.vs_peers:
                cells.append(fmt_ratio(speedup(b, raw, ref_name)))
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def postgres_server() -> dict[str, str]:
    """The PostgreSQL server the PostgreSQL rows use (``HEXERACT_TEST_POSTGRES_URL``):
    its URL and a line naming its version, or why there is none."""
    url = os.environ.get(POSTGRES_URL)
    if not url:
        return {"server": f"none ({POSTGRES_URL} is not set: the PostgreSQL rows are skipped)"}
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=10) as conn:
            version = conn.info.server_version
    except Exception as exc:  # the rows would fail one by one: say it once
        return {"server": f"none ({POSTGRES_URL} unreachable, {type(exc).__name__}: the"
                " PostgreSQL rows are skipped)"}  # fmt: skip
    return {"url": url, "server": f"PostgreSQL {version // 10000}.{version % 10000}"}


def machine_line(m: dict[str, Any]) -> str:
    return (
        f"{m['cpu']}, {m['cores']} cores; {m['os']}; Python {m['python']};"
        f" SQLite {m['sqlite']}; apsw {m['apsw']}; fsync of 4 KiB {m['fsync_us']:.0f} µs"
        + (f" at start, {m['fsync_us_end']:.0f} µs at end" if m.get("fsync_us_end") else "")
        + (f"; server: {m['postgres']}" if m.get("postgres") else "")
        + f"; 1-min load average {m['loadavg_1m']} at start"
        + (
            f", {m['loadavg_during'][0]:.1f}-{m['loadavg_during'][1]:.1f} during the run"
            if m.get("loadavg_during")
            else ""
        )
        + (
            f"; code: {m.get('branch') or 'detached'} @ {m['commit']}"
            + (" (uncommitted changes)" if m.get("dirty") else "")
            if m.get("commit")
            else ""
        )
    )


# -- main ------------------------------------------------------------------------------


def select(patterns: list[str] | None) -> list[Bench]:
    if not patterns:
        return list(BENCHES)
    wanted = [p for arg in patterns for p in arg.split(",") if p]
    chosen = [
        b
        for b in BENCHES
        if any(p in (b.name, b.group) or fnmatch.fnmatch(b.name, p) for p in wanted)
    ]
    if not chosen:
        raise SystemExit(f"--only {','.join(wanted)}: no such measurement (see --list)")
    # keep the floors a selected row is compared with
    names = {b.name for b in chosen}
    extra = {
        ref
        for b in chosen
        for ref in (b.floor, b.physical, b.reference)
        if ref and ref not in names
    }
    return [b for b in BENCHES if b.name in names or b.name in extra]


def render(
    benches: list[Bench],
    raw: Raw,
    machine: dict[str, Any],
    command: str,
    rounds: int,
    elapsed: float,
) -> tuple[str, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The report: machine, command, the table and the targets."""
    medians = {name: median_result(rs) for name, rs in raw.items()}
    checks = targets(medians, raw)
    text = "\n".join(
        [
            f"Machine: {machine_line(machine)}",
            f"Command: `{command}` ({rounds} interleaved round{'s' if rounds > 1 else ''},"
            f" medians; {elapsed / 60:.1f} min)",
            "Ratios are speed-ups against the reference (>1x is faster / cheaper), the median"
            " of the per-round ratios. Spread: (max - min) / median over the rounds.",
            "",
            table(benches, medians, raw),
            "",
            targets_text(checks),
        ]
    )
    return text, medians, checks


def report(path: str) -> int:
    """Print the report of a saved results file again (with this version's rendering)."""
    doc = json.loads(Path(path).read_text())
    raw: Raw = doc["raw"]
    benches = [b for b in BENCHES if b.name in raw]
    elapsed = float(doc.get("elapsed_s", 0.0))
    text, _, _ = render(benches, raw, doc["machine"], doc["command"], doc["rounds"], elapsed)
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run: fewer rows, 1 round")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5, --quick 1)")
    parser.add_argument("--only", action="append", help="a name, group or glob (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the measurements and exit")
    parser.add_argument("--tmpdir", help="where the database files go (default: system temp)")
    parser.add_argument("--out", help="JSON results path (default: benchmarks/results/...)")
    parser.add_argument("--report", metavar="JSON", help="print a saved run's report again")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child)
    if args.report:
        return report(args.report)
    if args.list:
        for b in BENCHES:
            print(f"{b.name:32} {b.label}")
        return 0

    sys.path.insert(0, str(HERE))
    import _common

    benches = select(args.only)
    postgres = postgres_server()
    if not postgres.get("url"):
        skipped = [b for b in benches if b.needs == "postgres"]
        benches = [b for b in benches if b.needs != "postgres"]
        if skipped:
            log(f"PostgreSQL rows skipped ({len(skipped)}): {postgres['server']}")
    rounds = args.rounds or (1 if args.quick else 5)
    workdir = Path(tempfile.mkdtemp(prefix="hexeract-bench-", dir=args.tmpdir))
    started = datetime.now(UTC)
    try:
        machine = _common.machine(workdir)
        machine.update(checkout())
        machine["postgres"] = postgres["server"]
        log(f"machine: {machine_line(machine)}")
        log(f"{len(benches)} measurements x {rounds} rounds{' (quick)' if args.quick else ''}")
        templates = Templates(workdir)
        raw: Raw = {b.name: [] for b in benches}
        loads: list[float] = []
        groups: dict[str, list[Bench]] = {}
        for b in benches:
            groups.setdefault(b.group, []).append(b)
        for r in range(rounds):
            for members in groups.values():
                k = r % len(members)  # rotate the order inside a group each round
                for b in members[k:] + members[:k]:
                    t0 = time.perf_counter()
                    res = run_child(b, args.quick, templates, workdir)
                    raw[b.name].append(res)
                    loads.append(os.getloadavg()[0])
                    shown = (
                        f"{res['value']:.4g} {res.get('unit', '')}"
                        if "value" in res
                        else res.get("skipped") or res.get("error")
                    )
                    log(
                        f"[{r + 1}/{rounds}] {b.name:32} {shown}  ({time.perf_counter() - t0:.1f} s)"
                    )
        machine["fsync_us_end"] = round(_common.fsync_us(workdir), 1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    elapsed = (datetime.now(UTC) - started).total_seconds()
    machine["loadavg_during"] = [min(loads), max(loads)] if loads else None
    command = (
        "python benchmarks/run.py"
        + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip()
    )
    text, medians, checks = render(benches, raw, machine, command, rounds, elapsed)
    print(text)
    out = Path(args.out) if args.out else RESULTS / f"{started:%Y%m%dT%H%M%SZ}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "started": started.isoformat(),
        "command": command,
        "quick": args.quick,
        "rounds": rounds,
        "elapsed_s": elapsed,
        "machine": machine,
        "schema": templates.how,
        "medians": medians,
        "raw": raw,
        "targets": checks,
        "benches": {b.name: {"label": b.label, "kwargs": b.args(args.quick)} for b in benches},
        "table": text,
    }
    out.write_text(json.dumps(doc, indent=2, default=str))
    log(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
