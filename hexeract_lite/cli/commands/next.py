"""``hexeract scheduler next``: the firings a schedule has ahead of it, in UTC and local time."""

from __future__ import annotations

import argparse

from ...control import SchedulerControl
from ...errors import InvalidTrigger, UsageError
from ...zoned import load_zone
from ..context import EXIT_OK, Context
from ..options import POSITIVE_DURATION, CommandTree, N, arg
from ..output import dump_json, format_upcoming, ts, zone_of


def add_parser(tree: CommandTree) -> None:
    """Add ``next``."""
    conn, fmt = tree.conn, tree.fmt
    sub = tree.command(
        "next",
        "show a schedule's next firings, in UTC and on its zone's wall clock",
        [
            "hexeract scheduler next myapp.reminders.morning --count 5",
            "hexeract scheduler next myapp.backup.daily --until 7d --tz Asia/Tokyo",
        ],
        [conn, fmt],
        _run,
        description="Show the instants a schedule will fire at, as a running worker makes"
        " them: none while it is paused or once it ended; an overdue firing first (a worker"
        " fires it on its next cycle) unless it is later than its misfire grace; a retry in"
        " backoff at the end of its backoff, when it fires; then its rule's"
        " instants (a zoned rule on its zone's wall clock, daylight saving time included)."
        " Each is shown in UTC and in the schedule's zone (or --tz).",
    )
    sub.add_argument("schedule", metavar="ID|NAME", help="the schedule's UUID or name")
    arg(sub, "--count", N, "how many firings at most (default: 10)", default=10)
    arg(sub, "--until", POSITIVE_DURATION, "only those within this long from now (e.g. 7d)")
    sub.add_argument("--tz", metavar="ZONE", help="show local times on this IANA time zone")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    zone: str | None = args.tz
    if zone is not None:
        try:
            load_zone(zone)
        except InvalidTrigger as exc:
            raise UsageError(f"--tz {zone!r}: {exc}") from None
    with ctx.store(create=False, readonly=True) as store:
        control = SchedulerControl(store)
        instants = control.upcoming(args.schedule, count=args.count, until=args.until)
        snapshot = control.inspect(control.id_of(args.schedule))
    shown = zone or zone_of(snapshot)
    if args.format == "json":
        zone_info = load_zone(shown)
        firings = [
            {"at": ts(at), "local": at.astimezone(zone_info).isoformat(timespec="milliseconds")}
            for at in instants
        ]
        ctx.print(
            dump_json(
                {
                    "schedule_id": str(snapshot.schedule_id),
                    "status": snapshot.status.value,
                    "zone": shown,
                    "firings": firings,
                }
            )
        )
    elif instants:
        ctx.print(format_upcoming(instants, shown))
    else:
        ctx.print(
            f"Schedule {snapshot.schedule_id} has no upcoming firing ({snapshot.status.value})."
        )
    return EXIT_OK
