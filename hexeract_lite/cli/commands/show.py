"""``hexeract scheduler inspect``, ``next`` and ``runs``: one schedule's fields, its
next firings, the run log."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ...errors import InvalidTrigger, UsageError
from ...runlog import RunOutcome, RunRecord
from ...zoned import load_zone
from ..context import EXIT_OK, Context, schedule_id
from ..options import POSITIVE_DURATION, CommandTree, N, arg, id_argument
from ..output import (
    format_inspect,
    format_table,
    format_upcoming,
    one_line,
    seconds,
    snapshot_json,
    ts,
    zone_of,
)


def add_parser(tree: CommandTree) -> None:
    """Add ``inspect``, ``next``, ``runs``."""
    sub = tree.command(
        "inspect",
        "show one schedule, every field",
        ["hexeract scheduler inspect 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b --format json"],
        [tree.conn, tree.fmt],
        _inspect,
        description="Show one schedule, every field. 'occurrence id' is the id of its current"
        " firing (derived from the schedule id and 'scheduled for'), the one a consumer"
        " deduplicates on. A delivered schedule whose earlier attempt failed shows that"
        " failure as 'error before delivery'; 'last error' is the failure the schedule is"
        " waiting out or was dead-lettered with.",
    )
    id_argument(sub)
    sub = tree.command(
        "next",
        "show a schedule's next firings, in UTC and on its zone's wall clock",
        [
            "hexeract scheduler next myapp.reminders.morning --count 5",
            "hexeract scheduler next myapp.backup.daily --until 7d --tz Asia/Tokyo",
        ],
        [tree.conn, tree.fmt],
        _next,
        description="Show the instants a schedule will fire at, as a running worker makes"
        " them: none while it is paused or once it ended; an overdue firing first (a worker"
        " fires it on its next cycle) unless it is later than its misfire grace; a retry in"
        " backoff at the end of its backoff, when it fires; then its rule's"
        " instants (a zoned rule on its zone's wall clock, daylight saving time included)."
        " Each is shown in UTC and in the schedule's zone (or --tz).",
    )
    sub.add_argument("schedule", metavar="ID|NAME", help="the schedule's UUID or name")
    arg(sub, "--count", N, "how many firings at most (default: 10)", default=10)
    arg(sub, "--until", POSITIVE_DURATION, "only those within this long from now (e.g. 7d)")
    sub.add_argument("--tz", metavar="ZONE", help="show local times on this IANA time zone")
    sub = tree.command(
        "runs",
        "show the run log: each dispatch attempt and each firing settled without one",
        [
            "hexeract scheduler runs --limit 20",
            "hexeract scheduler runs myapp.reminders.morning --outcome failed",
        ],
        [tree.conn, tree.fmt],
        _runs,
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


def _inspect(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        snapshot = SchedulerControl(store).inspect(schedule_id(args, store))
    ctx.show(lambda: snapshot_json(snapshot, detail=True), lambda: format_inspect(snapshot))
    return EXIT_OK


def _next(args: argparse.Namespace, ctx: Context) -> int:
    zone: str | None = args.tz
    if zone is not None:
        try:
            load_zone(zone)
        except InvalidTrigger as exc:
            raise UsageError(f"--tz {zone!r}: {exc}") from None
    with ctx.store(create=False, readonly=True) as store:
        control = SchedulerControl(store)
        instants = control.upcoming(args.schedule, count=args.count, until=args.until)
        snapshot = control.inspect(control.id_of(args.schedule))
    shown = zone or zone_of(snapshot)
    status = snapshot.status.value
    ctx.show(
        lambda: {
            "schedule_id": str(snapshot.schedule_id),
            "status": status,
            "zone": shown,
            "firings": [
                {
                    "at": ts(at),
                    "local": at.astimezone(load_zone(shown)).isoformat(timespec="milliseconds"),
                }
                for at in instants
            ],
        },
        lambda: (
            format_upcoming(instants, shown)
            if instants
            else f"Schedule {snapshot.schedule_id} has no upcoming firing ({status})."
        ),
    )
    return EXIT_OK


def format_runs(runs: list[RunRecord]) -> str:
    """The runs as a table."""
    rows = [
        (
            ts(run.finished),
            str(run.schedule_id),
            str(run.attempt),
            run.outcome.value,
            seconds(run.lag),
            seconds(run.duration),
            f"{run.host}:{run.pid}",
            one_line(run.error, 60),
        )
        for run in runs
    ]
    headers = ("FINISHED", "SCHEDULE", "ATTEMPT", "OUTCOME", "LAG", "DURATION", "WORKER", "ERROR")
    return format_table(headers, rows)


def _runs(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        runs = SchedulerControl(store).runs(args.schedule, limit=args.limit, outcome=args.outcome)
    ctx.show(
        lambda: [r.as_json() for r in runs],
        lambda: format_runs(runs) if runs else "No runs recorded.",
    )
    return EXIT_OK
