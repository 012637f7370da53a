"""``hexeract scheduler runs``: the run log, newest first."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ...runlog import RunOutcome, RunRecord
from ..context import EXIT_OK, Context
from ..options import CommandTree, N, arg
from ..output import format_table, one_line, ts


def add_parser(tree: CommandTree) -> None:
    """Add ``runs``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "runs",
        "show the run log: each dispatch attempt and each firing settled without one",
        [
            "hexeract scheduler runs --limit 20",
            "hexeract scheduler runs myapp.reminders.morning --outcome failed",
        ],
        [conn, fmt],
        _run,
        description="Show the run log, newest first: one record per dispatch attempt"
        " (delivered, failed, timed_out, dead_lettered, snoozed, aborted; and per firing"
        " settled without one: skipped by its misfire grace, released by a stopping worker,"
        " swept, or fenced out as lease_lost), with when it started and finished, its lag"
        " and duration, the worker (host and pid) and the first line of"
        " its error. Reads only.",
    )
    sub.add_argument(
        "schedule", metavar="ID|NAME", nargs="?", help="only this schedule's runs (UUID or name)"
    )
    arg(sub, "--limit", N, "how many runs at most (default: 50)", default=50)
    outcomes = [o.value for o in RunOutcome]
    help_text = "only runs with this outcome: " + ", ".join(outcomes)
    arg(sub, "--outcome", None, help_text, choices=outcomes, metavar="OUTCOME")


def _seconds(value: object) -> str:
    return "-" if value is None else f"{value:.3f}s"


def format_runs(runs: list[RunRecord]) -> str:
    """The runs as a table."""
    rows = [
        (
            ts(run.finished),
            str(run.schedule_id),
            str(run.attempt),
            run.outcome.value,
            _seconds(run.lag.total_seconds()),
            _seconds(None if run.duration is None else run.duration.total_seconds()),
            f"{run.host}:{run.pid}",
            one_line(run.error, 60),
        )
        for run in runs
    ]
    headers = ("FINISHED", "SCHEDULE", "ATTEMPT", "OUTCOME", "LAG", "DURATION", "WORKER", "ERROR")
    return format_table(headers, rows)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        runs = SchedulerControl(store).runs(args.schedule, limit=args.limit, outcome=args.outcome)
    ctx.show(
        lambda: [r.as_json() for r in runs],
        lambda: format_runs(runs) if runs else "No runs recorded.",
    )
    return EXIT_OK
