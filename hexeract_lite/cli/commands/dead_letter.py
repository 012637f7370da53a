"""``hexeract scheduler dead-letter list`` and ``dead-letter replay``."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ..context import EXIT_OK, Context, schedule_id
from ..options import CommandTree, HelpFormatter, example, id_argument
from ..output import dump_json, format_dead_letter, snapshot_json


def add_parser(tree: CommandTree) -> None:
    """Add ``dead-letter`` and its ``list`` and ``replay``."""
    conn, fmt, limit = tree.conn, tree.fmt, tree.limit
    dead = tree.cmds.add_parser(
        "dead-letter",
        help="list and replay dead-lettered schedules",
        description="Dead-lettered schedules exhausted their attempts; inspect them, fix the"
        " cause, then replay them.",
        epilog=example(
            "hexeract scheduler dead-letter list",
            "hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b",
        ),
        formatter_class=HelpFormatter,
    )
    dead_cmds = dead.add_subparsers(
        dest="dead_command", metavar="COMMAND", required=True, help="what to do"
    )
    tree.command(
        "list",
        "list dead-lettered schedules, most recently dead-lettered first",
        ["hexeract scheduler dead-letter list --limit 10 --format json"],
        [conn, fmt, limit],
        list_dead_letters,
        into=dead_cmds,
    )
    sub = tree.command(
        "replay",
        "replay a dead-lettered schedule: attempts reset, last error cleared, due now",
        ["hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b"],
        [conn],
        replay,
        into=dead_cmds,
    )
    id_argument(sub)


def list_dead_letters(args: argparse.Namespace, ctx: Context) -> int:
    """Print the dead-lettered schedules, most recently dead-lettered first."""
    with ctx.store(create=False, readonly=True) as store:
        rows = SchedulerControl(store).list_dead_letter(args.limit)
    if args.format == "json":
        ctx.print(dump_json([snapshot_json(s) for s in rows]))
    else:
        ctx.print(format_dead_letter(rows))
    return EXIT_OK


def replay(args: argparse.Namespace, ctx: Context) -> int:
    """Replay the dead-lettered schedule: attempts reset, last error cleared, due now."""
    with ctx.store(create=False) as store:
        sid = schedule_id(args, store)
        SchedulerControl(store).replay(sid)
    ctx.print(f"Replayed schedule {sid}.")
    return EXIT_OK
