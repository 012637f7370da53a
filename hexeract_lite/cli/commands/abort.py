"""``hexeract scheduler abort``: ask the dispatch in flight of a schedule to stop."""

from __future__ import annotations

import argparse

from ..args import parse_name, parse_schedule_id
from ..context import EXIT_OK, Context, print_change
from ..options import CommandTree, arg, switch


def _id_or_name(text: str) -> tuple[str, object]:
    """A schedule id (a UUID) or else a schedule name."""
    try:
        return "id", parse_schedule_id(text)
    except argparse.ArgumentTypeError:
        return "name", parse_name(text)


def add_parser(tree: CommandTree) -> None:
    """Add ``abort``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "abort",
        "ask the dispatch in flight of a schedule to stop (recorded as aborted, or with"
        " --cancel the schedule cancelled too); the worker running it sees the request"
        " on its next heartbeat or poll",
        [
            "hexeract scheduler abort myapp.reports.render",
            "hexeract scheduler abort 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b --cancel",
        ],
        [conn, fmt],
        _run,
    )
    arg(sub, "target", (_id_or_name, "ID|NAME"), "the schedule's UUID or its name")
    switch(sub, "--cancel", "cancel the schedule once its dispatch has stopped")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    kind, value = args.target
    args.schedule_id = value if kind == "id" else None
    args.schedule_name = value if kind == "name" else None
    sid, asked, snapshot = ctx.change(
        args, lambda control, sid: control.abort(sid, cancel=args.cancel)
    )
    if asked:
        how = "abort and cancel" if args.cancel else "abort"
        result, text = "requested", f"Asked the dispatch in flight of schedule {sid} to {how}."
    else:
        result, text = "idle", f"Schedule {sid} has no dispatch in flight; nothing to abort."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK
