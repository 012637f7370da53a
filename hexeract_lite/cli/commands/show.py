"""``hexeract scheduler stats``, ``prune``, ``vacuum``, ``inspect``, ``next`` and
``runs``: a store's figures and upkeep, one schedule's fields and next firings, the run
log."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ...errors import InvalidTrigger, UsageError
from ...runlog import RunOutcome, RunRecord
from ...store.listing import check_prune
from ...upkeep import DEFAULT_UPKEEP_BATCH, Progress
from ...zoned import load_zone
from ..context import EXIT_OK, Context, schedule_id
from ..options import POSITIVE_DURATION, CommandTree, N, arg, id_argument, switch
from ..output import (
    format_inspect,
    format_size,
    format_stats,
    format_table,
    format_upcoming,
    local_iso,
    one_line,
    seconds,
    snapshot_json,
    ts,
)


def add_parser(tree: CommandTree) -> None:
    """Add the commands of the module."""
    tree.command(
        "stats",
        "count schedules by status, due, in flight, in backoff; the oldest lag",
        ["hexeract scheduler stats", "hexeract scheduler stats --format json"],
        [tree.conn, tree.fmt],
        _stats,
        description="Count schedules by status, those due now and not claimed, in flight"
        " and in retry backoff; show how late the oldest due one is, the next wake-up,"
        " and for SQLite the size of the file and its WAL. Reads only; counts on indexes,"
        " so it answers fast at any table size.",
    )
    sub = tree.command(
        "prune",
        "delete delivered and cancelled schedules that ended long ago",
        [
            "hexeract scheduler prune --older-than 30d --dry-run",
            "hexeract scheduler prune --older-than 7d --include-dead-letters",
        ],
        [tree.conn],
        _prune,
        description="Delete delivered and cancelled schedules (and, with"
        " --include-dead-letters, dead-lettered ones) that ended more than --older-than"
        " ago, in batches of --batch-size rows per transaction so workers are never held"
        " up for long. Never touches a pending or paused schedule (a recurring one"
        " included). On SQLite the space goes back to the file system (files created by"
        " older versions need `hexeract scheduler vacuum` once). Also deletes the run"
        " log's records that finished more than --runs-older-than ago (default: the same"
        " age as --older-than; given alone, only the run log is pruned). Prints how many"
        " were deleted; --dry-run only counts them.",
    )
    help_text = "how long ago a schedule must have ended (e.g. 30d, 12h)"
    arg(sub, "--older-than", POSITIVE_DURATION, help_text)
    help_text = "how long ago a run must have finished (default: --older-than)"
    arg(sub, "--runs-older-than", POSITIVE_DURATION, help_text)
    switch(sub, "--include-dead-letters", "also delete old dead letters")
    switch(sub, "--dry-run", "count, delete nothing")
    help_text = f"rows per transaction (default: {DEFAULT_UPKEEP_BATCH})"
    arg(sub, "--batch-size", N, help_text, default=DEFAULT_UPKEEP_BATCH)
    tree.command(
        "vacuum",
        "rebuild a SQLite file so that it shrinks and prune gives space back",
        ["hexeract scheduler vacuum --conn /var/lib/myapp/scheduler.db"],
        [tree.conn],
        _vacuum,
        description="Rebuild a SQLite file with incremental auto-vacuum (files created"
        " before this version lack it) and return its free pages to the file system. Holds"
        " the write lock while it copies the file: run it when the workers are quiet."
        " SQLite only (PostgreSQL and MySQL servers reclaim space themselves).",
    )
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


def _stats(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        stats = store.stats()
    return ctx.show(stats.as_json, lambda: format_stats(stats))


def _prune(args: argparse.Namespace, ctx: Context) -> int:
    statuses = ["delivered", "cancelled"]
    if args.include_dead_letters:
        statuses.append("dead-lettered")
    older_than = args.older_than
    if older_than is None and args.runs_older_than is None:
        raise UsageError("give --older-than, --runs-older-than or both")
    if older_than is not None:
        older_than, _ = check_prune(older_than, statuses)  # before the store opens
    count = None
    with Progress("pruned") as progress, ctx.store(create=False, readonly=args.dry_run) as store:
        if older_than is not None:
            count = store.prune(
                older_than,
                statuses=statuses,
                batch_size=args.batch_size,
                dry_run=args.dry_run,
                progress=progress,
            )
        runs = store.prune_runs(args.runs_older_than or older_than, dry_run=args.dry_run)
    verb = "Would prune" if args.dry_run else "Pruned"
    if count is not None:
        ctx.print(f"{verb} {count} {'schedule' if count == 1 else 'schedules'}.")
    if runs or count is None:  # with schedules too and no old run: one line, as before
        ctx.print(f"{verb} {runs} run record{'' if runs == 1 else 's'}.")
    return EXIT_OK


def _vacuum(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False) as store:
        before = store.stats().file_bytes
        store.vacuum()
        after = store.stats().file_bytes
    ctx.print(f"Vacuumed: {format_size(before)} -> {format_size(after)}.")
    return EXIT_OK


def _inspect(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        snapshot = SchedulerControl(store).inspect(schedule_id(args, store))
    return ctx.show(lambda: snapshot_json(snapshot, detail=True), lambda: format_inspect(snapshot))


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
        later = [] if instants or args.until is None else control.upcoming(args.schedule, count=1)
    shown = zone or snapshot.trigger.zone
    status = snapshot.status.value
    none = f"Schedule {snapshot.schedule_id} has no upcoming firing ({status})."
    if later:
        none = (
            f"Schedule {snapshot.schedule_id} has no firing within --until {args.until.text};"
            f" the next is at {ts(later[0])}."
        )
    return ctx.show(
        lambda: {
            "schedule_id": str(snapshot.schedule_id),
            "status": status,
            "zone": shown,
            "firings": [{"at": ts(at), "local": local_iso(at, shown)} for at in instants],
        },
        lambda: format_upcoming(instants, shown) if instants else none,
    )


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
    return ctx.show(
        lambda: [r.as_json() for r in runs],
        lambda: format_runs(runs) if runs else "No runs recorded.",
    )
