"""``hexeract scheduler add`` and ``ensure``: create a schedule, or declare a named one
idempotently, from the message the command line describes."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from ..._time import rfc3339
from ...clock import SYSTEM_CLOCK
from ...control import SchedulerControl, default_grid_anchor
from ...errors import InvalidArgument, UsageError
from ...message import ScheduledMessage
from ...trigger import CronExpression
from ..args import Duration, parse_name, parse_schedule_id
from ..context import EXIT_OK, Context, print_change
from ..options import CommandTree, arg, message_arguments, policy_options
from ..output import snapshot_json, ts

if TYPE_CHECKING:
    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore
    from ...store.changes import EnsureResult


def add_parser(tree: CommandTree) -> None:
    """Add ``add``, ``ensure``."""
    sub = tree.command(
        "add",
        "create a schedule: once (--at, --in), on a cron rule (--cron) or every period (--every)",
        [
            "hexeract scheduler add --in 5m --event-type reminder.due --payload '{\"user\": 42}'",
            "hexeract scheduler add --cron '0 9 * * 1-5' --event-type report.daily"
            " --target bus:reports",
            "hexeract scheduler add --cron '0 9 * * 1-5' --tz Europe/Paris"
            " --event-type report.daily",
            "hexeract scheduler add --every 90m --event-type cache.refresh",
            "hexeract scheduler add --at 2026-03-01T12:00:00Z --event-type invoice.send"
            " --payload @invoice.json",
        ],
        [tree.conn, tree.fmt],
        _add,
        description="Create a schedule and print its id (the whole schedule with --format"
        " json). Creates the database and its table when they do not exist.",
    )
    message_arguments(sub, once_in=True)
    help_text = "use this id instead of a fresh UUIDv7 (an existing id is an error)"
    arg(sub, "--schedule-id", (parse_schedule_id, "UUID"), help_text)
    arg(
        sub,
        "--name",
        (parse_name, "NAME"),
        "name the schedule (its id is then derived from the name; an existing name is"
        " an error: use ensure to declare it idempotently)",
    )
    sub = tree.command(
        "ensure",
        "declare a named schedule idempotently: create it, leave it, or update it in place",
        [
            "hexeract scheduler ensure --name myapp.backup.daily --cron '0 3 * * *'"
            " --event-type backup.run",
        ],
        [tree.conn, tree.fmt],
        _ensure,
        description="Make the named schedule exist as given, and print what that took:"
        " created, updated (changed in place; a firing in flight completes under the old"
        " values) or unchanged. Safe to run at every start. Creates the database and its"
        " table when they do not exist.",
    )
    arg(sub, "--name", (parse_name, "NAME"), "the schedule's name", required=True)
    message_arguments(sub, once_in=False)


def message_from_args(
    args: argparse.Namespace, name: str | None, *, declared: bool = False
) -> ScheduledMessage:
    """The message ``add`` or ``ensure`` (``declared``) describes; a ``--first`` that
    is not an instant of the rule is kept (it fires then, then on the rule), with a
    note on stderr. ``--every`` without ``--first``: anchored one period from now, or
    for ``ensure`` on the epoch's grid."""
    payload = args.payload.value if args.payload is not None else {}
    now = SYSTEM_CLOCK.now()
    policy = policy_options(args)
    if policy and args.cron is None and args.every is None:
        flags = ", ".join("--" + name.replace("_", "-") for name in policy)
        raise UsageError(f"{flags} go(es) with --cron or --every only")
    schedule_id = getattr(args, "schedule_id", None)
    if args.first is not None and args.cron is None and args.every is None:
        raise UsageError("--first goes with --cron or --every only")
    if args.tz is not None and args.cron is None:
        raise UsageError(
            f"--tz {args.tz!r} goes with --cron only (a one-shot's --at names its own offset;"
            " an interval is a fixed period)"
        )
    if args.every is not None:
        try:
            if args.first is not None:
                anchor = args.first
            elif declared:
                anchor = default_grid_anchor(args.every, now)
            else:
                anchor = now + args.every
        except OverflowError:
            raise UsageError(f"--every {args.every.text!r} reaches past the year 9999") from None
        return ScheduledMessage.every(
            args.target,
            args.every,
            anchor,
            args.event_type,
            payload,
            schedule_id=schedule_id,
            name=name,
            misfire_grace=args.misfire_grace,
            **policy,
        )
    if args.cron is not None:
        expression = CronExpression.parse(args.cron, tz=args.tz)
        first = args.first
        if first is None:
            first = expression.next_occurrence(now)
            if first is None:
                raise InvalidArgument(f"cron expression {args.cron!r} has no instant after now")
        elif expression.next_occurrence(first - timedelta(milliseconds=1)) != first:
            print(
                f"note: --first {rfc3339(first)} is not an instant of the rule {args.cron!r}:"
                " the schedule fires then, then on the rule",
                file=sys.stderr,
            )
        return ScheduledMessage.cron(
            args.target,
            expression,
            first,
            args.event_type,
            payload,
            schedule_id=schedule_id,
            name=name,
            misfire_grace=args.misfire_grace,
            **policy,
        )
    in_: Duration | None = getattr(args, "in_", None)
    try:
        at = args.at if args.at is not None or in_ is None else now + in_
    except OverflowError:
        assert in_ is not None  # only a delay from now can overflow
        raise UsageError(f"--in {in_.text!r} reaches past the year 9999") from None
    return ScheduledMessage.delay(
        args.target,
        at,
        args.event_type,
        payload,
        schedule_id=schedule_id,
        name=name,
        misfire_grace=args.misfire_grace,
    )


def _add(args: argparse.Namespace, ctx: Context) -> int:
    if args.name is not None and args.schedule_id is not None:
        raise UsageError("--schedule-id and --name do not go together (a name gives the id)")
    message = message_from_args(args, args.name)

    def act(store: ScheduleStore) -> ScheduleSnapshot:
        control = SchedulerControl(store)
        control.schedule(message, max_attempts=args.max_attempts)
        return control.inspect(message.schedule_id)

    snapshot = ctx.write(act, ids=[message.schedule_id], create=True)
    ctx.show(lambda: snapshot_json(snapshot, detail=True), lambda: str(message.schedule_id))
    return EXIT_OK


def _ensure(args: argparse.Namespace, ctx: Context) -> int:
    message = message_from_args(args, args.name, declared=True)

    def act(store: ScheduleStore) -> tuple[EnsureResult, ScheduleSnapshot]:
        result = store.ensure(message, args.max_attempts)
        return result, SchedulerControl(store).inspect(message.schedule_id)

    result, snapshot = ctx.write(act, ids=[message.schedule_id], create=True)
    text = f"{result.value}: {args.name} ({message.schedule_id}); next firing"
    print_change(ctx, args, snapshot, result.value, f"{text} {ts(snapshot.scheduled_for)}")
    return EXIT_OK
