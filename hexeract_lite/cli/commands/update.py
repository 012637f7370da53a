"""``hexeract scheduler update``: change a schedule in place."""

from __future__ import annotations

import argparse
from typing import Any

from ...errors import UsageError
from ..args import parse_payload, parse_stored_duration, parse_target
from ..context import EXIT_OK, Context, print_change
from ..options import (
    CLEAR,
    CommandTree,
    N,
    arg,
    clearable,
    id_argument,
    policy_arguments,
    policy_options,
)


def add_parser(tree: CommandTree) -> None:
    """Add ``update``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "update",
        "change a schedule in place: payload, cron rule, target, event type, attempt budget",
        ["hexeract scheduler update --name myapp.backup.daily --cron '0 4 * * *'"],
        [conn, fmt],
        _run,
    )
    id_argument(sub)
    arg(sub, "--cron", None, "the new rule (a cron schedule only)", metavar="EXPR")
    arg(
        sub,
        "--tz",
        None,
        "with --cron: read the new rule on this IANA time zone's wall clock"
        " (default: the schedule's own zone; --tz UTC for UTC)",
        metavar="ZONE",
    )
    help_text = "the new misfire grace (e.g. 10m; none: no grace, every late firing delivered)"
    arg(sub, "--misfire-grace", (clearable(parse_stored_duration), "DURATION"), help_text)
    policy_arguments(sub, clear=True)
    arg(sub, "--event-type", None, "the new event type", metavar="TYPE")
    arg(sub, "--payload", (parse_payload, "JSON"), "the new payload")
    arg(sub, "--target", (parse_target, "TARGET"), "the new target")
    arg(sub, "--max-attempts", N, "the new attempt budget")


def _clears(args: argparse.Namespace) -> bool:
    """True when an option was given as ``none`` (a value set back to its default)."""
    names = ("misfire_grace", "end_at", "max_firings", "jitter", "catch_up_limit")
    return any(getattr(args, name) == CLEAR for name in names)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.tz is not None and args.cron is None:
        raise UsageError(f"--tz {args.tz!r} goes with --cron only")
    fields: dict[str, Any] = {
        "cron": args.cron,
        "event_type": args.event_type,
        "target": args.target,
        "max_attempts": args.max_attempts,
    }
    if args.payload is not None:
        fields["payload"] = args.payload.value
    if args.misfire_grace is not None:
        fields["misfire_grace"] = None if args.misfire_grace == CLEAR else args.misfire_grace
    fields.update(policy_options(args))
    if all(v is None for v in fields.values()) and not _clears(args):
        raise UsageError(
            "give at least one of --payload, --cron, --target, --event-type, --max-attempts,"
            " --misfire-grace, --end-at, --max-firings, --jitter, --catch-up, --catch-up-limit"
        )
    if args.tz is not None:
        fields["tz"] = args.tz
    if args.cron is not None:  # a bad rule is refused before the store opens
        from ...trigger import CronExpression

        CronExpression.parse(args.cron, tz=args.tz)
    sid, changed, snapshot = ctx.change(args, lambda control, sid: control.update(sid, **fields))
    result = "updated" if changed else "unchanged"
    text = f"Updated schedule {sid}." if changed else f"Schedule {sid} already has these values."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK
