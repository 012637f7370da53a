"""``hexeract scheduler reschedule``, ``update``, ``run-now``, ``backfill`` and
``abort``: change one schedule in place."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..._time import rfc3339
from ...backfill import DEFAULT_BACKFILL_LIMIT
from ...clock import SYSTEM_CLOCK
from ...control import SchedulerControl
from ...errors import UsageError
from ..args import parse_name, parse_payload, parse_schedule_id, parse_stored_duration, parse_target
from ..context import EXIT_OK, Context, print_change
from ..options import (
    CLEAR,
    DURATION,
    INSTANT,
    CommandTree,
    N,
    arg,
    clearable,
    id_argument,
    policy_arguments,
    policy_options,
    switch,
)

if TYPE_CHECKING:
    import uuid
    from datetime import datetime

    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``reschedule``, ``update``, ``run-now``, ``backfill``, ``abort``."""
    sub = tree.command(
        "reschedule",
        "move a schedule's next firing",
        ["hexeract scheduler reschedule --name myapp.backup.daily --at 2026-03-01T04:00:00Z"],
        [tree.conn, tree.fmt],
        _reschedule,
    )
    id_argument(sub)
    when = sub.add_argument_group("when (exactly one)").add_mutually_exclusive_group(required=True)
    arg(when, "--at", INSTANT, "the next firing")
    arg(when, "--in", DURATION, "from now: 5m, 2h", dest="in_")
    sub = tree.command(
        "update",
        "change a schedule in place: payload, cron rule, target, event type, attempt budget",
        ["hexeract scheduler update --name myapp.backup.daily --cron '0 4 * * *'"],
        [tree.conn, tree.fmt],
        _update,
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
    sub = tree.command(
        "run-now",
        "fire a schedule once as soon as a worker can (a cron one then goes on on its rule)",
        ["hexeract scheduler run-now --name myapp.backup.daily"],
        [tree.conn, tree.fmt],
        _run_now,
    )
    id_argument(sub)
    sub = tree.command(
        "backfill",
        "fire a recurring schedule's instants in a window, in order, with their own"
        " occurrence ids (then it goes on on its rule)",
        [
            "hexeract scheduler backfill myapp.report.hourly"
            " --start 2026-03-01T00:00:00Z --end 2026-03-01T23:59:59Z"
        ],
        [tree.conn, tree.fmt],
        _backfill,
    )
    sub.add_argument("schedule", metavar="ID|NAME", help="the schedule's UUID or name")
    help_text = "the window's start (kept), e.g. 2026-03-01T00:00:00Z"
    arg(sub, "--start", INSTANT, help_text, required=True)
    arg(sub, "--end", INSTANT, "the window's end (kept)", required=True)
    help_text = f"refuse a window of more than N instants (default: {DEFAULT_BACKFILL_LIMIT})"
    arg(sub, "--limit", N, help_text, default=DEFAULT_BACKFILL_LIMIT)
    sub = tree.command(
        "abort",
        "ask the dispatch in flight of a schedule to stop (recorded as aborted, or with"
        " --cancel the schedule cancelled too); the worker running it sees the request"
        " on its next heartbeat or poll",
        [
            "hexeract scheduler abort myapp.reports.render",
            "hexeract scheduler abort 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b --cancel",
        ],
        [tree.conn, tree.fmt],
        _abort,
    )
    arg(sub, "target", (_id_or_name, "ID|NAME"), "the schedule's UUID or its name")
    switch(sub, "--cancel", "cancel the schedule once its dispatch has stopped")


def _reschedule(args: argparse.Namespace, ctx: Context) -> int:

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


def _clears(args: argparse.Namespace) -> bool:
    """True when an option was given as ``none`` (a value set back to its default)."""
    names = ("misfire_grace", "end_at", "max_firings", "jitter", "catch_up_limit")
    return any(getattr(args, name) == CLEAR for name in names)


def _update(args: argparse.Namespace, ctx: Context) -> int:
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


def _run_now(args: argparse.Namespace, ctx: Context) -> int:
    sid, changed, snapshot = ctx.change(args, lambda control, sid: control.run_now(sid))
    if changed:
        result, text = "due", f"Schedule {sid} is due now; a worker fires it next."
    else:
        result, text = "in-flight", f"Schedule {sid} is being delivered now; nothing to do."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK


def _backfill(args: argparse.Namespace, ctx: Context) -> int:
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


def _id_or_name(text: str) -> tuple[str, object]:
    """A schedule id (a UUID) or else a schedule name."""
    try:
        return "id", parse_schedule_id(text)
    except argparse.ArgumentTypeError:
        return "name", parse_name(text)


def _abort(args: argparse.Namespace, ctx: Context) -> int:
    kind, value = args.target
    args.schedule_id = value if kind == "id" else None
    args.schedule_name = value if kind == "name" else None
    sid, asked, snapshot = ctx.change(
        args, lambda control, sid: control.abort(sid, cancel=args.cancel)
    )
    if asked:
        how = "abort and cancel" if args.cancel else "abort"
        result, text = "requested", f"Asked the dispatch in flight of schedule {sid} to {how}."
    else:
        result, text = "idle", f"Schedule {sid} has no dispatch in flight; nothing to abort."
    print_change(ctx, args, snapshot, result, text)
    return EXIT_OK
