"""``hexeract scheduler add``: create a schedule (once, on a cron rule, every period);
also the message an ``add`` or ``ensure`` command line describes."""

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
from ..context import EXIT_OK, Context
from ..options import CommandTree, arg, message_arguments, policy_options
from ..output import snapshot_json

if TYPE_CHECKING:
    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``add``."""
    conn, fmt = tree.conn, tree.fmt
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
        [conn, fmt],
        _run,
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


def _run(args: argparse.Namespace, ctx: Context) -> int:
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
