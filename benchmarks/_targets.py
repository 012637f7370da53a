"""The targets a run of ``run.py`` is checked against, per issue, met or missed.

Issue 7's targets stand as they were; issue 17's are restated by issue 30 (against the
reference floor where the physical one cannot be reached with the reference's table),
all but the one issue 30 does not restate. A ratio is the median of the per-round
ratios of the two rows (``paired_ratio``); a target whose rows were not run (no
PostgreSQL server, ``--only``) is "not measured".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

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


def targets(medians: dict[str, dict[str, Any]], raw: Raw) -> list[dict[str, Any]]:
    """Every issue's targets (7, 17, 30): ratios paired by round, absolute figures from
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
    return out + targets_17(medians, raw) + targets_30(medians, raw)


def targets_17(medians: dict[str, dict[str, Any]], raw: Raw) -> list[dict[str, Any]]:
    """Issue 17's targets that issue 30 does not restate."""
    p99 = medians.get("lag/hexeract-otherprocess", {}).get("p99_ms")
    p99 = p99 if isinstance(p99, int | float) else None
    return [
        {
            "issue": 17,
            "target": "dispatch lag p99, inserted by another process, default config ≤ 20 ms",
            "measured": p99,
            "met": None if p99 is None else p99 <= 20.0,
            "shown": "" if p99 is None else f"{p99:.1f} ms",
        }
    ]


def _checker(
    out: list[dict[str, Any]], issue: int, medians: dict[str, dict[str, Any]], raw: Raw
) -> tuple[Callable[..., None], Callable[..., None], Callable[[str, str, float, str], None]]:
    """The three kinds of check: throughput ≥ limit x a reference row, cost ≤ limit x a
    reference row, an absolute figure ≤ a limit."""

    def add(text: str, measured: float | None, ok: bool | None, shown: str) -> None:
        out.append({"issue": issue, "target": text, "measured": measured, "met": ok,
                    "shown": shown})  # fmt: skip

    def value(name: str, key: str) -> float | None:
        v = medians.get(name, {}).get(key)
        return v if isinstance(v, int | float) else None

    def at_least(text: str, a: str, b: str, limit: float, also: tuple[str, ...] = ()) -> None:
        """Throughput of ``a`` ≥ ``limit`` x that of ``b``; ``also``: other references
        whose ratio is shown alongside."""
        r = paired_ratio(raw, a, b)
        shown = "" if r is None else f"{r:.2f}x"
        for ref in also:
            x = paired_ratio(raw, a, ref)
            if x is not None:
                shown += f" ({x:.2f}x {ref.split('/')[1]})"
        add(f"{text} [{a} / {b}]", r, None if r is None else r >= limit, shown)

    def at_most(text: str, a: str, b: str, limit: float, unit: str = "ms") -> None:
        """Cost (time) of ``a`` ≤ ``limit`` x that of ``b``."""
        r = paired_ratio(raw, a, b)
        va, vb = value(a, "value"), value(b, "value")
        shown = "" if r is None else f"{r:.2f}x the time"
        if r is not None and va is not None and vb is not None:
            shown += f" ({va:.0f} vs {vb:.0f} {unit})"
        add(f"{text} [{a} / {b}]", r, None if r is None else r <= limit, shown)

    def below(name: str, key: str, limit: float, text: str) -> None:
        v = value(name, key)
        add(f"{text} [{name}]", v, None if v is None else v <= limit,
            "" if v is None else f"{v:.1f} ms")  # fmt: skip

    return at_least, at_most, below


def targets_30(medians: dict[str, dict[str, Any]], raw: Raw) -> list[dict[str, Any]]:
    """Issue 30's targets: floors that respect the reference's table, PostgreSQL against
    Procrastinate and its own raw floor, SQLite under four worker processes."""
    out: list[dict[str, Any]] = []
    at_least, at_most, below = _checker(out, 30, medians, raw)
    at_least(
        "enqueue one by one ≥ 0.95x the reference floor",
        "enqueue/hexeract",
        "enqueue/reference",
        0.95,
        also=("enqueue/physical",),
    )
    at_least(
        "insert_many, 1000 per call ≥ 0.8x the reference floor's executemany",
        "insert_many/hexeract-1000",
        "insert_many/reference-1000",
        0.8,
        also=("insert_many/physical-1000",),
    )
    at_least(
        "drain, default config, one worker ≥ 0.75x the physical floor",
        "drain/hexeract-10default",
        "drain/physical-10",
        0.75,
        also=("drain/reference-10fused",),
    )
    at_least(
        "drain, default config, one worker ≥ 3x huey", "drain/hexeract-10default", "drain/huey", 3.0
    )
    # the run-log row (drain/hexeract-10default-nolog) comes with the console's run log
    at_least(
        "drain, default config, run log on ≥ 0.9x the same with it off",
        "drain/hexeract-10default",
        "drain/hexeract-10default-nolog",
        0.9,
    )
    at_least(
        "run_once() loop, batch 10 ≥ 0.5x the physical floor",
        "drain/hexeract-10",
        "drain/physical-10",
        0.5,
        also=("drain/reference-10",),
    )
    for k in (1, 4):
        at_least(
            f"PostgreSQL drain, {k} worker process{'es' if k > 1 else ''} ≥ 2x Procrastinate",
            f"pg_drain/hexeract-{k}",
            f"pg_drain/procrastinate-{k}",
            2.0,
        )
        at_least(
            f"PostgreSQL drain, {k} worker process{'es' if k > 1 else ''} ≥ 0.6x raw SKIP LOCKED floor",
            f"pg_drain/hexeract-{k}",
            f"pg_drain/floor-{k}",
            0.6,
        )
    at_most(
        "PostgreSQL claim of 10 with 50k leased or in backoff ≤ 2x the claim with none",
        "claim/hexeract-pg-held50k",
        "claim/hexeract-pg-none",
        2.0,
        unit="µs",
    )
    below(
        "lag/hexeract-pg-otherprocess",
        "p99_ms",
        20.0,
        "PostgreSQL dispatch lag p99, inserted by another process ≤ 20 ms",
    )
    at_least(
        "SQLite, 4 worker processes on one file: aggregate drain ≥ 1x one worker's",
        "drain/hexeract-4proc",
        "drain/hexeract-1proc",
        1.0,
    )
    below(
        "contention/hexeract-4proc",
        "value",
        20.0,
        "SQLite, 4 worker processes draining: another process's insert p99 ≤ 20 ms",
    )
    at_most(
        "import hexeract_lite (fresh process) ≤ huey's import",
        "startup/hexeract-import",
        "startup/huey-import",
        1.0,
    )
    at_most(
        "hexeract scheduler list on 10k rows, whole process ≤ 2x the minimal apsw script",
        "startup/hexeract-list",
        "startup/floor-list",
        2.0,
    )
    c = medians.get("idle/hexeract", {}).get("value")
    c = c if isinstance(c, int | float) else None
    out.append(
        {
            "issue": 30,
            "target": "idle worker CPU < 1 % of a core [idle/hexeract]",
            "measured": c,
            "met": None if c is None else c < 1.0,
            "shown": "" if c is None else f"{c:.2f} %",
        }
    )
    out.append(
        {
            "issue": 30,
            "target": "console idle CPU < 1 % of a core",
            "measured": None,
            "met": None,
            "shown": "not in run.py: benchmarks/web_idle.py",
        }
    )
    return out  # fmt: skip


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
