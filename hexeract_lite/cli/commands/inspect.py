"""``hexeract scheduler inspect``: one schedule, every field."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ..context import EXIT_OK, Context, schedule_id
from ..options import CommandTree, id_argument
from ..output import format_inspect, snapshot_json


def add_parser(tree: CommandTree) -> None:
    """Add ``inspect``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "inspect",
        "show one schedule, every field",
        ["hexeract scheduler inspect 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b --format json"],
        [conn, fmt],
        _run,
        description="Show one schedule, every field. 'occurrence id' is the id of its current"
        " firing (derived from the schedule id and 'scheduled for'), the one a consumer"
        " deduplicates on. A delivered schedule whose earlier attempt failed shows that"
        " failure as 'error before delivery'; 'last error' is the failure the schedule is"
        " waiting out or was dead-lettered with.",
    )
    id_argument(sub)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        snapshot = SchedulerControl(store).inspect(schedule_id(args, store))
    ctx.show(lambda: snapshot_json(snapshot, detail=True), lambda: format_inspect(snapshot))
    return EXIT_OK
