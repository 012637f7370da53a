"""``hexeract scheduler run-now``: fire a schedule once as soon as a worker can."""

from __future__ import annotations

import argparse

from ..context import EXIT_OK, Context, print_change
from ..options import CommandTree, id_argument


def add_parser(tree: CommandTree) -> None:
    """Add ``run-now``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "run-now",
        "fire a schedule once as soon as a worker can (a cron one then goes on on its rule)",
        ["hexeract scheduler run-now --name myapp.backup.daily"],
        [conn, fmt],
        _run,
    )
    id_argument(sub)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    sid, changed, snapshot = ctx.change(args, lambda control, sid: control.run_now(sid))
    if changed:
        result, text = "due", f"Schedule {sid} is due now; a worker fires it next."
    else:
        result, text = "in-flight", f"Schedule {sid} is being delivered now; nothing to do."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK
