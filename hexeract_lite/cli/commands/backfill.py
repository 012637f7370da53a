"""``hexeract scheduler backfill``: fire a schedule's rule instants of a window."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..._time import rfc3339
from ...backfill import DEFAULT_BACKFILL_LIMIT
from ...control import SchedulerControl
from ..context import EXIT_OK, Context, print_change
from ..options import INSTANT, CommandTree, N, arg

if TYPE_CHECKING:
    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``backfill``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "backfill",
        "fire a recurring schedule's instants in a window, in order, with their own"
        " occurrence ids (then it goes on on its rule)",
        [
            "hexeract scheduler backfill myapp.report.hourly"
            " --start 2026-03-01T00:00:00Z --end 2026-03-01T23:59:59Z"
        ],
        [conn, fmt],
        _run,
    )
    sub.add_argument("schedule", metavar="ID|NAME", help="the schedule's UUID or name")
    help_text = "the window's start (kept), e.g. 2026-03-01T00:00:00Z"
    arg(sub, "--start", INSTANT, help_text, required=True)
    arg(sub, "--end", INSTANT, "the window's end (kept)", required=True)
    help_text = f"refuse a window of more than N instants (default: {DEFAULT_BACKFILL_LIMIT})"
    arg(sub, "--limit", N, help_text, default=DEFAULT_BACKFILL_LIMIT)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    sid = SchedulerControl.id_of(args.schedule)

    def act(store: ScheduleStore) -> tuple[int, ScheduleSnapshot]:
        control = SchedulerControl(store)
        count = control.backfill(args.schedule, args.start, args.end, limit=args.limit)
        return count, control.inspect(sid)

    count, snapshot = ctx.write(act, ids=[sid])
    text = (
        f"Schedule {sid}: backfilling {count} instant{'s' if count != 1 else ''} from"
        f" {rfc3339(args.start)} to {rfc3339(args.end)}; then on its rule."
    )
    if snapshot.leased_until is not None and not args.start <= snapshot.scheduled_for <= args.end:
        text = text[:-1] + " (after the firing in flight)."
    print_change(ctx, args, snapshot, "backfilling", text)
    return EXIT_OK
