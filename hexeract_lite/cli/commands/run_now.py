"""``hexeract scheduler run-now``: fire a schedule once as soon as a worker can."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ...control import SchedulerControl
from ..context import EXIT_OK, Context, print_change, schedule_id, target_ids
from ..options import CommandTree, id_argument

if TYPE_CHECKING:
    import uuid

    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``run-now``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "run-now",
        "fire a schedule once as soon as a worker can (a cron one then goes on on its rule)",
        ["hexeract scheduler run-now --name myapp.backup.daily"],
        [conn, fmt],
        run,
    )
    id_argument(sub)


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Make the schedule due now; say so."""

    def act(store: ScheduleStore) -> tuple[uuid.UUID, bool, ScheduleSnapshot]:
        sid = schedule_id(args, store)
        control = SchedulerControl(store)
        changed = control.run_now(sid)
        return sid, changed, control.inspect(sid)

    sid, changed, snapshot = ctx.write(act, ids=target_ids(args))
    if changed:
        result, text = "due", f"Schedule {sid} is due now; a worker fires it next."
    else:
        result, text = "in-flight", f"Schedule {sid} is being delivered now; nothing to do."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK
