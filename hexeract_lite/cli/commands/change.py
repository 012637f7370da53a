"""The commands that write a schedule: ``pause``, ``resume``, ``cancel``, ``add``,
``ensure``, ``reschedule``, ``update``, ``run-now``, ``backfill`` and ``abort``; and the
message an ``add`` or ``ensure`` command line describes."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..._time import rfc3339
from ...backfill import DEFAULT_BACKFILL_LIMIT
from ...clock import SYSTEM_CLOCK
from ...control import SchedulerControl, default_grid_anchor
from ...errors import InvalidArgument, SchedulerError, UsageError
from ...message import ScheduledMessage
from ...names import check_group
from ...policy import POLICY_FIELDS
from ...snapshot import ScheduleStatus
from ...store.pausing import check_note
from ...trigger import CronExpression
from ..args import (
    Duration,
    parse_name,
    parse_payload,
    parse_schedule_id,
    parse_target,
)
from ..context import EXIT_OK, Context, NoneToChange, schedule_id, target_ids
from ..options import (
    DURATION,
    INSTANT,
    STORED_DURATION,
    CommandTree,
    N,
    arg,
    clearable,
    given,
    id_argument,
    message_arguments,
    policy_arguments,
    switch,
)
from ..output import snapshot_json, ts

if TYPE_CHECKING:
    import uuid
    from collections.abc import Callable
    from datetime import datetime

    from ...snapshot import ScheduleSnapshot
    from ...store.base import ScheduleStore
    from ...store.changes import EnsureResult


def add_parser(tree: CommandTree) -> None:
    """Add the commands of the module."""
    for name, what in (
        ("pause", "a paused schedule is never claimed until resumed"),
        ("resume", "a cron schedule whose instant passed while paused moves to its next instant"),
        ("cancel", "a cancelled schedule never fires again"),
    ):
        sub = tree.command(
            name,
            f"{name} a schedule ({what})",
            [f"hexeract scheduler {name} 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b"],
            [tree.conn],
            _control,
        )
        sub.set_defaults(action=name)
        id_argument(sub)
        if name != "cancel":
            help_text = f"{name} every schedule named GROUP.<...> instead, in one transaction"
            arg(sub, "--group", (parse_name, "GROUP"), help_text, dest="name_group")
        if name == "pause":
            arg(sub, "--note", None, "why: shown by inspect until resumed", metavar="TEXT")
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
    arg(sub, "--misfire-grace", clearable(STORED_DURATION), help_text)
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
    arg(sub, "target", (_id_or_name, "ID|NAME"), "the schedule's UUID or name")
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


def _print_change(ctx: Context, snapshot: ScheduleSnapshot, result: str, text: str) -> int:
    """Print ``text``, or with ``--format json`` the result and the schedule; exit 0."""
    return ctx.show(
        lambda: {"result": result, "schedule": snapshot_json(snapshot, detail=True)}, lambda: text
    )


def _control(args: argparse.Namespace, ctx: Context) -> int:
    done = {"pause": "Paused", "resume": "Resumed", "cancel": "Cancelled"}[args.action]
    if getattr(args, "name_group", None) is not None:
        return _run_group(args, ctx, done)
    note = getattr(args, "note", None)

    def act(store: ScheduleStore) -> tuple[uuid.UUID, bool, str | list[ScheduleSnapshot]]:
        """The id, whether it changed, the schedule before and after (or why its row does
        not decode)."""
        from ...store.sql.dialect import MalformedRowError

        sid = schedule_id(args, store)
        control = SchedulerControl(store)
        apply = getattr(control, args.action)
        try:
            before = control.inspect(sid)
        except MalformedRowError as exc:
            # resuming computes the next firing from the row, and a note is written with
            # the whole row: both need it to decode; the rest is plain SQL, which applies
            if args.action == "resume" or note is not None:
                raise
            return sid, bool(apply(sid)), exc.reason
        changed = bool(apply(sid) if note is None else apply(sid, note=note))
        return sid, changed, [before, control.inspect(sid)]

    sid, changed, state = ctx.write(act, ids=target_ids(args))
    if isinstance(state, str):
        if changed:
            ctx.print(f"{done} schedule {sid} (its row is malformed: {state}).")
        else:
            ctx.print(
                f"Schedule {sid} is not live or already {done.lower()}; nothing to"
                f" {args.action} (its row is malformed: {state})."
            )
        return EXIT_OK
    before, after = state
    resume = args.action == "resume"
    if changed:
        then = f"; next firing {ts(after.scheduled_for)}" if resume else ""
        ctx.print(f"{done} schedule {sid}{then}.")
    elif resume and after.status is ScheduleStatus.PAUSED:
        # A paused cron schedule whose rule has no instant after now stays paused.
        raise SchedulerError(
            f"schedule {sid} stays paused: its cron expression has no instant after now"
        )
    elif args.action == "pause" and before.status is ScheduleStatus.PAUSED:
        ctx.print(f"Schedule {sid} is already paused.")
    else:
        not_paused = ", not paused" if resume else ""
        ctx.print(f"Schedule {sid} is {before.status}{not_paused}; nothing to {args.action}.")
    return EXIT_OK


def _run_group(args: argparse.Namespace, ctx: Context, done: str) -> int:
    """``pause --group`` / ``resume --group``: the whole group in one transaction;
    ``done`` the verb that reports it."""
    if args.schedule_id is not None or args.schedule_name is not None:
        raise UsageError("give either SCHEDULE_ID, --name or --group, not both")
    group, note = check_group(args.name_group), check_note(getattr(args, "note", None))

    def act(store: ScheduleStore) -> int:
        control = SchedulerControl(store)
        try:
            if args.action == "pause":
                return control.pause_group(group, note=note)
            return control.resume_group(group)
        except InvalidArgument as exc:  # none live: the group and the note are checked above
            raise NoneToChange(str(exc)) from None

    count = ctx.write(act, ids=(), named=group + ".")
    ctx.print(f"{done} {count} schedule{'' if count == 1 else 's'} of group {group!r}.")
    return EXIT_OK


def message_from_args(args: argparse.Namespace, *, declared: bool = False) -> ScheduledMessage:
    """The message ``add`` or ``ensure`` (``declared``) describes; a ``--first`` that
    is not an instant of the rule is kept (it fires then, then on the rule), with a
    note on stderr. ``--every`` without ``--first``: anchored one period from now, or
    for ``ensure`` on the epoch's grid."""
    payload = args.payload.value if args.payload is not None else {}
    now = SYSTEM_CLOCK.now()
    policy = given(args, POLICY_FIELDS)
    recurring = args.cron is not None or args.every is not None
    if policy and not recurring:
        *others, last = ("--" + name.replace("_", "-") for name in policy)
        flags = f"{', '.join(others)} and {last} go" if others else f"{last} goes"
        raise UsageError(f"{flags} with --cron or --every only")
    if args.first is not None and not recurring:
        raise UsageError("--first goes with --cron or --every only")
    if args.tz is not None and args.cron is None:
        raise UsageError(
            f"--tz {args.tz!r} goes with --cron only (a one-shot's --at names its own offset;"
            " an interval is a fixed period)"
        )
    when: tuple[Any, ...]  # the factory's arguments between the target and the event type
    if args.every is not None:
        if args.first is not None:
            anchor = args.first
        elif declared:
            anchor = default_grid_anchor(args.every, now)
        else:
            anchor = _later(now, args.every, "--every")
        kind, when = "every", (args.every, anchor)
    elif args.cron is not None:
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
        kind, when = "cron", (expression, first)
    else:
        in_: Duration | None = getattr(args, "in_", None)
        at = args.at if args.at is not None or in_ is None else _later(now, in_, "--in")
        kind, when = "delay", (at,)  # and no policy: refused above
    keywords: dict[str, Any] = {
        "schedule_id": getattr(args, "schedule_id", None),  # add's --schedule-id
        "name": args.name,
        "misfire_grace": args.misfire_grace,
    }
    make: Callable[..., ScheduledMessage] = getattr(ScheduledMessage, kind)
    return make(args.target, *when, args.event_type, payload, **keywords, **policy)


def _later(now: datetime, duration: Duration, flag: str) -> datetime:
    """``now + duration``, the instant ``flag`` names; past the year 9999: a usage error."""
    try:
        return now + duration
    except OverflowError:
        raise UsageError(f"{flag} {duration.text!r} reaches past the year 9999") from None


def _add(args: argparse.Namespace, ctx: Context) -> int:
    if args.name is not None and args.schedule_id is not None:
        raise UsageError("--schedule-id and --name do not go together (a name gives the id)")
    message = message_from_args(args)

    def act(store: ScheduleStore) -> ScheduleSnapshot:
        control = SchedulerControl(store)
        control.schedule(message, max_attempts=args.max_attempts)
        return control.inspect(message.schedule_id)

    snapshot = ctx.write(act, ids=[message.schedule_id], create=True)
    return ctx.show(lambda: snapshot_json(snapshot, detail=True), lambda: str(message.schedule_id))


def _ensure(args: argparse.Namespace, ctx: Context) -> int:
    message = message_from_args(args, declared=True)

    def act(store: ScheduleStore) -> tuple[EnsureResult, ScheduleSnapshot]:
        result = store.ensure(message, args.max_attempts)
        return result, SchedulerControl(store).inspect(message.schedule_id)

    result, snapshot = ctx.write(act, ids=[message.schedule_id], create=True)
    text = f"{result.value}: {args.name} ({message.schedule_id}); next firing"
    return _print_change(ctx, snapshot, result.value, f"{text} {ts(snapshot.scheduled_for)}")


def _reschedule(args: argparse.Namespace, ctx: Context) -> int:
    def act(control: SchedulerControl, sid: uuid.UUID) -> tuple[datetime, bool]:
        at = args.at if args.at is not None else _later(SYSTEM_CLOCK.now(), args.in_, "--in")
        return at, control.reschedule(sid, at)

    sid, (at, changed), snapshot = ctx.change(args, act)
    result = "rescheduled" if changed else "unchanged"
    text = f"Schedule {sid}: next firing {rfc3339(at)}"
    if snapshot.leased_until is not None and snapshot.scheduled_for != at:
        text += " (after the firing in flight)"
    return _print_change(ctx, snapshot, result, text + ".")


def _update(args: argparse.Namespace, ctx: Context) -> int:
    if args.tz is not None and args.cron is None:
        raise UsageError(f"--tz {args.tz!r} goes with --cron only")
    fields = given(
        args, ("cron", "event_type", "target", "max_attempts", "misfire_grace", *POLICY_FIELDS)
    )
    if args.payload is not None:  # a JSON null is a payload too
        fields["payload"] = args.payload.value
    if not fields:
        raise UsageError(
            "give at least one of --payload, --cron, --target, --event-type, --max-attempts,"
            " --misfire-grace, --end-at, --max-firings, --jitter, --catch-up, --catch-up-limit"
        )
    if args.tz is not None:
        fields["tz"] = args.tz
    if args.cron is not None:  # a bad rule is refused before the store opens
        CronExpression.parse(args.cron, tz=args.tz)
    sid, changed, snapshot = ctx.change(args, lambda control, sid: control.update(sid, **fields))
    result = "updated" if changed else "unchanged"
    text = f"Updated schedule {sid}." if changed else f"Schedule {sid} already has these values."
    return _print_change(ctx, snapshot, result, text)


def _run_now(args: argparse.Namespace, ctx: Context) -> int:
    sid, changed, snapshot = ctx.change(args, lambda control, sid: control.run_now(sid))
    if changed:
        result, text = "due", f"Schedule {sid} is due now; a worker fires it next."
    else:
        result, text = "in-flight", f"Schedule {sid} is being delivered now; nothing to do."
    return _print_change(ctx, snapshot, result, text)


def _backfill(args: argparse.Namespace, ctx: Context) -> int:
    sid, count, snapshot = ctx.change(
        _by_id_or_name(args),
        lambda control, sid: control.backfill(sid, args.start, args.end, limit=args.limit),
    )
    text = (
        f"Schedule {sid}: backfilling {count} instant{'s' if count != 1 else ''} from"
        f" {rfc3339(args.start)} to {rfc3339(args.end)}; then on its rule."
    )
    if snapshot.leased_until is not None and not args.start <= snapshot.scheduled_for <= args.end:
        text = text[:-1] + " (after the firing in flight)."
    return _print_change(ctx, snapshot, "backfilling", text)


def _id_or_name(text: str) -> uuid.UUID | str:
    """A schedule id (a UUID) or else a schedule name."""
    try:
        return parse_schedule_id(text)
    except argparse.ArgumentTypeError:
        return parse_name(text)


def _by_id_or_name(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the ``ID|NAME`` argument as SCHEDULE_ID or ``--name``, for
    :meth:`Context.change`."""
    named = isinstance(args.target, str)
    args.schedule_id, args.schedule_name = (None, args.target) if named else (args.target, None)
    return args


def _abort(args: argparse.Namespace, ctx: Context) -> int:
    sid, asked, snapshot = ctx.change(
        _by_id_or_name(args), lambda control, sid: control.abort(sid, cancel=args.cancel)
    )
    if asked:
        how = "abort and cancel" if args.cancel else "abort"
        result, text = "requested", f"Asked the dispatch in flight of schedule {sid} to {how}."
    else:
        result, text = "idle", f"Schedule {sid} has no dispatch in flight; nothing to abort."
    return _print_change(ctx, snapshot, result, text)
