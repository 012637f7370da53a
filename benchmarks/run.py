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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

PEERS = ("huey", "apscheduler", "persistqueue")
PEER_TITLES = {"huey": "huey", "apscheduler": "APScheduler", "persistqueue": "persist-queue"}

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
    vs_peers: bool = True  # show the x huey etc. columns for this row
    timeout: float = 900.0

    def args(self, quick: bool) -> dict[str, Any]:
        return {**self.kwargs, **(self.quick if quick else {})}


GROUPS = {
    "enqueue": ("enqueue, one per call", "rows/s"),
    "insert_many": ("insert_many", "rows/s"),
    "drain": ("drain 10k due (claim → no-op handler → ack)", "rows/s"),
    "claim": ("claim latency (claim of 10)", "µs"),
    "contention": ("another process's insert p99 while a worker drains", "ms"),
    "lag": ("dispatch lag, idle worker in run()", "ms"),
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
        _b("drain/floor-1", "raw apsw, claim 1 + ack 1", "_floor.drain", {**d10k, "batch": 1},
           quick=q_d, prep=due10k),
        _b("drain/floor-10", "raw apsw, claim 10 + ack 10 (1 txn each)", "_floor.drain",
           {**d10k, "batch": 10}, quick=q_d, prep=due10k, physical="drain/physical-10"),
        _b("drain/floor-10fused", "raw apsw, store's statements, acks + next claim in 1 txn",
           "_floor.drain_fused", {**d10k, "batch": 10}, quick=q_d, prep=due10k,
           physical="drain/physical-10"),
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
           quick=q_d, prep=due10k, floor="drain/floor-10fused", physical="drain/physical-10"),
        _b("drain/hexeract-10default", "hexeract run() thread, default SchedulerWorkerConfig()",
           "_hexeract.drain", {**d10k, "batch": None, "mode": "run"}, quick=q_d, prep=due10k,
           floor="drain/floor-10fused", physical="drain/physical-10"),
        _b("drain/hexeract-10default-nolog", "the same, run_log=False (no run log written)",
           "_hexeract.drain", {**d10k, "batch": None, "mode": "run", "run_log": False},
           quick=q_d, prep=due10k, floor="drain/floor-10fused", physical="drain/physical-10"),
        _b("drain/huey", "huey dequeue + execute, 1 thread (deletes before running)",
           "_peers.huey_drain", d10k, quick=q_d, prep=None, floor="drain/floor-1"),
        _b("drain/apscheduler", "APScheduler 3 BackgroundScheduler, 1 thread (deletes first)",
           "_peers.aps_drain", d10k, quick=q_d, prep=None, floor="drain/floor-1"),
        _b("drain/persistqueue", "persist-queue get + ack", "_peers.pq_drain", d10k, quick=q_d,
           prep=None,
           floor="drain/floor-1"),
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


BENCHES = _benches()

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


Raw = dict[str, list[dict[str, Any]]]


def paired_ratio(raw: Raw, a: str, b: str) -> float | None:
    """value(a) / value(b): the median over rounds of the per-round ratio.

    Round r of ``a`` and round r of ``b`` ran minutes apart at most (same group, same
    round), so pairing them cancels most of a shared machine's drift between rounds;
    the ratio of the two medians is the fallback when no round has both.
    """
    pairs = [
        x["value"] / y["value"]
        for x, y in zip(raw.get(a, []), raw.get(b, []), strict=False)
        if isinstance(x.get("value"), int | float)
        and isinstance(y.get("value"), int | float)
        and y["value"]
    ]
    if pairs:
        return float(statistics.median(pairs))
    return None


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
    if bench.group == "lag":
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
    head = ["measurement", "system", "value", "spread", "x floor", "x physical"]
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
        for p in peers:
            ref_name = peer_rows.get((b.group, p))
            if value and ref_name and b.system != p and b.vs_peers:
                cells.append(fmt_ratio(speedup(b, raw, ref_name)))
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(medians: dict[str, dict[str, Any]], raw: Raw) -> list[dict[str, Any]]:
    """Issue 7's and issue 17's targets: ratios paired by round, absolute figures from
    the medians."""

    def v(name: str, key: str = "value") -> float | None:
        value = medians.get(name, {}).get(key)
        return value if isinstance(value, int | float) else None

    out: list[dict[str, Any]] = []

    def add(text: str, measured: float | None, ok: bool | None, shown: str) -> None:
        out.append({"issue": 7, "target": text, "measured": measured, "met": ok, "shown": shown})

    def ratio(a: str, b: str) -> float | None:
        return paired_ratio(raw, a, b)

    r = ratio("enqueue/hexeract", "enqueue/floor")
    add(
        "enqueue one by one ≥ 0.9x floor",
        r,
        None if r is None else r >= 0.9,
        "" if r is None else f"{r:.2f}x",
    )
    m = v("insert_many/hexeract-1000")
    add(
        "insert_many ≥ 100k rows/s",
        m,
        None if m is None else m >= 100_000,
        "" if m is None else f"{m:,.0f} rows/s",
    )
    for name in ("drain/hexeract-10", "drain/hexeract-10run", "drain/hexeract-10default"):
        r = ratio(name, "drain/floor-10")
        extra = ""
        if r is not None:
            hu, ap = ratio(name, "drain/huey"), ratio(name, "drain/apscheduler")
            extra = (
                f"{r:.2f}x floor-10"
                + (f", {hu:.1f}x huey" if hu else "")
                + (f", {ap:.1f}x APScheduler" if ap else "")
            )
        add(
            f"drain batch 10 ≥ 0.6x floor claim10+ack10 [{name}]",
            r,
            None if r is None else r >= 0.6,
            extra,
        )
    for tag, note in (("nosync-", "durability=normal, index work"), ("", "durability=full")):
        r = ratio(f"claim/hexeract-{tag}1M", f"claim/hexeract-{tag}10k")
        add(
            f"claim at 1M ≤ 2x claim at 10k [{note}]",
            r,
            None if r is None else r <= 2,
            "" if r is None else f"{r:.2f}x the cost",
        )
        r = ratio(f"claim/hexeract-{tag}backoff", f"claim/hexeract-{tag}10k")
        add(
            f"claim with 100k in backoff ≤ 2x none [{note}]",
            r,
            None if r is None else r <= 2,
            "" if r is None else f"{r:.2f}x the cost",
        )
    for name, limit in (
        ("lag/hexeract-future", 10.0),
        ("lag/hexeract-now", 10.0),
        ("lag/hexeract-otherprocess", 100.0),
    ):
        p99 = v(name, "p99_ms")
        add(
            f"dispatch lag p99 ≤ {limit:g} ms [{name}]",
            p99,
            None if p99 is None else p99 <= limit,
            "" if p99 is None else f"{p99:.1f} ms",
        )
    c = v("idle/hexeract")
    add(
        "idle worker < 1 % of a core",
        c,
        None if c is None else c < 1.0,
        "" if c is None else f"{c:.2f} %",
    )
    a, b = v("rss/hexeract-10k"), v("rss/hexeract-1M")
    d = None if a is None or b is None else b - a
    add(
        "RSS at 1M ≤ RSS at 10k + 10 MB",
        d,
        None if d is None else d <= 10.0,
        "" if d is None else f"{b:.1f} vs {a:.1f} MiB ({d:+.1f})",
    )
    return out + targets_17(medians, raw)


def targets_17(medians: dict[str, dict[str, Any]], raw: Raw) -> list[dict[str, Any]]:
    """Issue 17's targets ("fast by default"), mostly against the physical floor."""
    out: list[dict[str, Any]] = []

    def add(text: str, measured: float | None, ok: bool | None, shown: str) -> None:
        out.append({"issue": 17, "target": text, "measured": measured, "met": ok, "shown": shown})

    def at_least(text: str, a: str, b: str, limit: float, also: tuple[str, ...] = ()) -> None:
        """Throughput of ``a`` ≥ ``limit`` x that of ``b``; ``also``: other references
        whose ratio is shown alongside."""
        r = paired_ratio(raw, a, b)
        shown = "" if r is None else f"{r:.2f}x"
        for ref in also:
            x = paired_ratio(raw, a, ref)
            if x is not None:
                shown += f" ({x:.2f}x {ref.split('/')[1]})"
        add(text, r, None if r is None else r >= limit, shown)

    def at_most(text: str, a: str, b: str, limit: float) -> None:
        """Cost (time) of ``a`` ≤ ``limit`` x that of ``b``."""
        r = paired_ratio(raw, a, b)
        va, vb = medians.get(a, {}).get("value"), medians.get(b, {}).get("value")
        shown = "" if r is None else f"{r:.2f}x the time"
        if r is not None and isinstance(va, int | float) and isinstance(vb, int | float):
            shown += f" ({va:.0f} vs {vb:.0f} ms)"
        add(text, r, None if r is None else r <= limit, shown)

    at_least(
        "drain 10k, default config ≥ 0.6x physical floor-10 [drain/hexeract-10default]",
        "drain/hexeract-10default",
        "drain/physical-10",
        0.6,
        also=("drain/floor-10",),
    )
    at_least(
        "drain 10k, default config ≥ 2x huey's consumer [drain/hexeract-10default]",
        "drain/hexeract-10default",
        "drain/huey",
        2.0,
    )
    at_least(
        "drain, run_once() loop, batch 10 ≥ 0.7x physical floor-10 [drain/hexeract-10]",
        "drain/hexeract-10",
        "drain/physical-10",
        0.7,
        also=("drain/floor-10",),
    )
    at_least(
        "enqueue one by one ≥ 0.95x physical one-row insert [enqueue/hexeract]",
        "enqueue/hexeract",
        "enqueue/physical",
        0.95,
        also=("enqueue/floor",),
    )
    at_least(
        "insert_many, 1000 per call ≥ 0.9x physical executemany [insert_many/hexeract-1000]",
        "insert_many/hexeract-1000",
        "insert_many/physical-1000",
        0.9,
        also=("insert_many/floor-1000",),
    )
    at_most(
        "import hexeract_lite (fresh process) ≤ huey's import",
        "startup/hexeract-import",
        "startup/huey-import",
        1.0,
    )
    at_most(
        "hexeract scheduler list on 10k rows, whole process ≤ 2x minimal apsw script",
        "startup/hexeract-list",
        "startup/floor-list",
        2.0,
    )
    c = medians.get("idle/hexeract", {}).get("value")
    c = c if isinstance(c, int | float) else None
    add(
        "idle worker CPU < 1 % of a core",
        c,
        None if c is None else c < 1.0,
        "" if c is None else f"{c:.2f} %",
    )
    p99 = medians.get("lag/hexeract-otherprocess", {}).get("p99_ms")
    p99 = p99 if isinstance(p99, int | float) else None
    add(
        "dispatch lag p99, inserted by another process, default config ≤ 20 ms",
        p99,
        None if p99 is None else p99 <= 20.0,
        "" if p99 is None else f"{p99:.1f} ms",
    )
    for text in (
        "PostgreSQL claim of 10 with 50k leased or in backoff ≤ 2x none",
        "PostgreSQL dispatch lag p99, inserted by another process ≤ 20 ms",
    ):
        add(text, None, None, "not in run.py (PostgreSQL)")
    return out


def targets_text(rows: list[dict[str, Any]]) -> str:
    blocks = []
    for issue in sorted({row.get("issue", 7) for row in rows}):
        lines = [f"| issue {issue} target | measured | |", "|---|---|---|"]
        for row in rows:
            if row.get("issue", 7) == issue:
                mark = {True: "met", False: "MISSED", None: "not measured"}[row["met"]]
                lines.append(f"| {row['target']} | {row['shown']} | {mark} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def machine_line(m: dict[str, Any]) -> str:
    return (
        f"{m['cpu']}, {m['cores']} cores; {m['os']}; Python {m['python']};"
        f" SQLite {m['sqlite']}; apsw {m['apsw']}; fsync of 4 KiB {m['fsync_us']:.0f} µs"
        + (f" at start, {m['fsync_us_end']:.0f} µs at end" if m.get("fsync_us_end") else "")
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
    extra = {ref for b in chosen for ref in (b.floor, b.physical) if ref and ref not in names}
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
    rounds = args.rounds or (1 if args.quick else 5)
    workdir = Path(tempfile.mkdtemp(prefix="hexeract-bench-", dir=args.tmpdir))
    started = datetime.now(UTC)
    try:
        machine = _common.machine(workdir)
        machine.update(checkout())
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
