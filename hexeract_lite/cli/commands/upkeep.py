"""``hexeract scheduler stats``, ``prune`` and ``vacuum``: a store's figures and its upkeep."""

from __future__ import annotations

import argparse

from ...store.listing import check_prune
from ...upkeep import DEFAULT_UPKEEP_BATCH, Progress
from ..context import EXIT_OK, Context
from ..options import POSITIVE_DURATION, CommandTree, N, arg, switch
from ..output import format_size, format_stats


def add_parser(tree: CommandTree) -> None:
    """Add ``stats``, ``prune``, ``vacuum``."""
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
        " age as --older-than). Prints how many were deleted; --dry-run only counts them.",
    )
    help_text = "how long ago a schedule must have ended (e.g. 30d, 12h)"
    arg(sub, "--older-than", POSITIVE_DURATION, help_text, required=True)
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


def _stats(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        stats = store.stats()
    ctx.show(stats.as_json, lambda: format_stats(stats))
    return EXIT_OK


def _prune(args: argparse.Namespace, ctx: Context) -> int:
    statuses = ["delivered", "cancelled"]
    if args.include_dead_letters:
        statuses.append("dead-lettered")
    older_than, _ = check_prune(args.older_than, statuses)  # before the store opens
    with Progress("pruned") as progress, ctx.store(create=False, readonly=args.dry_run) as store:
        count = store.prune(
            older_than,
            statuses=statuses,
            batch_size=args.batch_size,
            dry_run=args.dry_run,
            progress=progress,
        )
        runs = store.prune_runs(args.runs_older_than or older_than, dry_run=args.dry_run)
    noun = "schedule" if count == 1 else "schedules"
    verb = "Would prune" if args.dry_run else "Pruned"
    ctx.print(f"{verb} {count} {noun}.")
    if runs:  # a store without a run log, or with nothing old in it: one line, as before
        ctx.print(f"{verb} {runs} run record{'' if runs == 1 else 's'}.")
    return EXIT_OK


def _vacuum(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False) as store:
        before = store.stats().file_bytes
        store.vacuum()
        after = store.stats().file_bytes
    ctx.print(f"Vacuumed: {format_size(before)} -> {format_size(after)}.")
    return EXIT_OK
