"""``hexeract scheduler ensure``: declare a named schedule idempotently."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ...control import SchedulerControl
from ..args import parse_name
from ..context import EXIT_OK, Context, print_change
from ..options import CommandTree, arg, message_arguments
from ..output import ts
from .add import message_from_args

if TYPE_CHECKING:
    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore
    from ...store.changes import EnsureResult


def add_parser(tree: CommandTree) -> None:
    """Add ``ensure``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "ensure",
        "declare a named schedule idempotently: create it, leave it, or update it in place",
        [
            "hexeract scheduler ensure --name myapp.backup.daily --cron '0 3 * * *'"
            " --event-type backup.run",
        ],
        [conn, fmt],
        _run,
        description="Make the named schedule exist as given, and print what that took:"
        " created, updated (changed in place; a firing in flight completes under the old"
        " values) or unchanged. Safe to run at every start. Creates the database and its"
        " table when they do not exist.",
    )
    arg(sub, "--name", (parse_name, "NAME"), "the schedule's name", required=True)
    message_arguments(sub, once_in=False)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    message = message_from_args(args, args.name, declared=True)

    def act(store: ScheduleStore) -> tuple[EnsureResult, ScheduleSnapshot]:
        result = store.ensure(message, args.max_attempts)
        return result, SchedulerControl(store).inspect(message.schedule_id)

    result, snapshot = ctx.write(act, ids=[message.schedule_id], create=True)
    text = f"{result.value}: {args.name} ({message.schedule_id}); next firing"
    print_change(ctx, args, snapshot, result.value, f"{text} {ts(snapshot.scheduled_for)}")
    return EXIT_OK
