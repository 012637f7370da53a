"""``hexeract scheduler prune``: delete delivered and cancelled (optionally
dead-lettered) schedules that ended long ago, in batches."""

from __future__ import annotations

import argparse

from ...store.listing import check_prune
from ...upkeep import DEFAULT_UPKEEP_BATCH, Progress
from ..context import EXIT_OK, Context
from ..options import POSITIVE_DURATION, CommandTree, N, arg, switch


def add_parser(tree: CommandTree) -> None:
    """Add ``prune``."""
    conn = tree.conn
    sub = tree.command(
        "prune",
        "delete delivered and cancelled schedules that ended long ago",
        [
            "hexeract scheduler prune --older-than 30d --dry-run",
            "hexeract scheduler prune --older-than 7d --include-dead-letters",
        ],
        [conn],
        _run,
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


def _run(args: argparse.Namespace, ctx: Context) -> int:
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
