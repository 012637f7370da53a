"""``hexeract scheduler reschedule``: move a schedule's next firing."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..._time import rfc3339
from ...clock import SYSTEM_CLOCK
from ...errors import UsageError
from ..context import EXIT_OK, Context, print_change
from ..options import DURATION, INSTANT, CommandTree, arg, id_argument

if TYPE_CHECKING:
    import uuid
    from datetime import datetime

    from ...control import SchedulerControl


def add_parser(tree: CommandTree) -> None:
    """Add ``reschedule``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "reschedule",
        "move a schedule's next firing",
        ["hexeract scheduler reschedule --name myapp.backup.daily --at 2026-03-01T04:00:00Z"],
        [conn, fmt],
        _run,
    )
    id_argument(sub)
    when = sub.add_argument_group("when (exactly one)").add_mutually_exclusive_group(required=True)
    arg(when, "--at", INSTANT, "the next firing")
    arg(when, "--in", DURATION, "from now: 5m, 2h", dest="in_")


def _run(args: argparse.Namespace, ctx: Context) -> int:

    def act(control: SchedulerControl, sid: uuid.UUID) -> tuple[datetime, bool]:
        try:
            at = args.at if args.at is not None else SYSTEM_CLOCK.now() + args.in_
        except OverflowError:
            raise UsageError(f"--in {args.in_.text!r} reaches past the year 9999") from None
        return at, control.reschedule(sid, at)

    sid, (at, changed), snapshot = ctx.change(args, act)
    result = "rescheduled" if changed else "unchanged"
    text = f"Schedule {sid}: next firing {rfc3339(at)}"
    if snapshot.leased_until is not None and snapshot.scheduled_for != at:
        text += " (after the firing in flight)"
    print_change(ctx, args, snapshot, result, text + ".")
    return EXIT_OK
