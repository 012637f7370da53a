"""``hexeract scheduler list``: pending and paused schedules, soonest first."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ..context import EXIT_OK, Context
from ..options import CommandTree
from ..output import dump_json, format_pending, snapshot_json


def add_parser(tree: CommandTree) -> None:
    """Add ``list``."""
    conn, fmt, limit = tree.conn, tree.fmt, tree.limit
    tree.command(
        "list",
        "list pending and paused schedules, soonest first",
        ["hexeract scheduler list --limit 20", "hexeract scheduler list --format json | jq ."],
        [conn, fmt, limit],
        run,
    )


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Print the pending and paused schedules, soonest first."""
    with ctx.store(create=False, readonly=True) as store:
        rows = SchedulerControl(store).list_pending(args.limit)
    if args.format == "json":
        ctx.print(dump_json([snapshot_json(s) for s in rows]))
    else:
        ctx.print(format_pending(rows))
    return EXIT_OK
