"""``hexeract scheduler pause``, ``resume`` and ``cancel``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ...control import SchedulerControl
from ...errors import SchedulerError, UsageError
from ...names import check_group
from ...snapshot import ScheduleStatus
from ..args import parse_name
from ..context import EXIT_OK, Context, schedule_id, target_ids
from ..options import CommandTree, arg, id_argument
from ..output import ts

if TYPE_CHECKING:
    import uuid

    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``pause``, ``resume`` and ``cancel``."""
    for name, verb, what in (
        ("pause", "pause", "a paused schedule is never claimed until resumed"),
        (
            "resume",
            "resume",
            "a cron schedule whose instant passed while paused moves to its next instant",
        ),
        ("cancel", "cancel", "a cancelled schedule never fires again"),
    ):
        sub = tree.command(
            name,
            f"{verb} a schedule ({what})",
            [f"hexeract scheduler {name} 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b"],
            [tree.conn],
            _run,
        )
        sub.set_defaults(action=name)
        id_argument(sub)
        if name != "cancel":
            help_text = f"{verb} every schedule named GROUP.<...> instead, in one transaction"
            arg(sub, "--group", (parse_name, "GROUP"), help_text, dest="name_group")
        if name == "pause":
            arg(sub, "--note", None, "why: shown by inspect until resumed", metavar="TEXT")


class _Malformed(Exception):
    """The schedule's row does not decode: whether the action applied, and why."""

    def __init__(self, sid: uuid.UUID, changed: bool, reason: str) -> None:
        super().__init__(reason)
        self.sid, self.changed, self.reason = sid, changed, reason


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if getattr(args, "name_group", None) is not None:
        return _run_group(args, ctx)
    note = getattr(args, "note", None)

    def act(store: ScheduleStore) -> tuple[uuid.UUID, ScheduleSnapshot, bool, ScheduleSnapshot]:
        from ...store.sql.dialect import MalformedRowError

        sid = schedule_id(args, store)
        control = SchedulerControl(store)
        try:
            before = control.inspect(sid)
        except MalformedRowError as exc:
            if args.action == "resume":
                raise  # resuming computes the next firing from the row: it must decode
            if note is not None:
                raise  # a note is written with the whole row: it must decode
            changed = bool(getattr(control, args.action)(sid))  # plain SQL: it applies
            raise _Malformed(sid, changed, exc.reason) from None
        if note is not None:
            changed = control.pause(sid, note=note)
        else:
            changed = bool(getattr(control, args.action)(sid))
        return sid, before, changed, control.inspect(sid)

    try:
        sid, before, changed, after = ctx.write(act, ids=target_ids(args))
    except _Malformed as odd:
        done = {"pause": "Paused", "cancel": "Cancelled"}[args.action]
        if odd.changed:
            ctx.print(f"{done} schedule {odd.sid} (its row is malformed: {odd.reason}).")
        else:
            ctx.print(
                f"Schedule {odd.sid} is not live or already {done.lower()}; nothing to"
                f" {args.action} (its row is malformed: {odd.reason})."
            )
        return EXIT_OK
    if args.action == "pause":
        if changed:
            ctx.print(f"Paused schedule {sid}.")
        elif before.status is ScheduleStatus.PAUSED:
            ctx.print(f"Schedule {sid} is already paused.")
        else:
            ctx.print(f"Schedule {sid} is {before.status}; nothing to pause.")
    elif args.action == "resume":
        if changed:
            ctx.print(f"Resumed schedule {sid}; next firing {ts(after.scheduled_for)}.")
        elif after.status is ScheduleStatus.PAUSED:
            # A paused cron schedule whose rule has no instant after now stays paused.
            raise SchedulerError(
                f"schedule {sid} stays paused: its cron expression has no instant after now"
            )
        else:
            ctx.print(f"Schedule {sid} is {before.status}, not paused; nothing to resume.")
    elif changed:
        ctx.print(f"Cancelled schedule {sid}.")
    else:
        ctx.print(f"Schedule {sid} is {before.status}; nothing to cancel.")
    return EXIT_OK


def _run_group(args: argparse.Namespace, ctx: Context) -> int:
    """``pause --group`` / ``resume --group``: the whole group in one transaction."""
    if args.schedule_id is not None or args.schedule_name is not None:
        raise UsageError("give either SCHEDULE_ID, --name or --group, not both")
    group = check_group(args.name_group)

    def act(store: ScheduleStore) -> int:
        control = SchedulerControl(store)
        if args.action == "pause":
            return control.pause_group(group, note=args.note)
        return control.resume_group(group)

    count = ctx.write(act, ids=(), named=group + ".")
    verb = "Paused" if args.action == "pause" else "Resumed"
    ctx.print(f"{verb} {count} schedule{'' if count == 1 else 's'} of group {group!r}.")
    return EXIT_OK
