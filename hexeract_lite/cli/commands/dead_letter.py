"""``hexeract scheduler dead-letter list`` and ``dead-letter replay`` (one, or all of
them in batches)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ...control import SchedulerControl
from ...errors import InvalidArgument
from ...store.listing import check_glob
from ...upkeep import DEFAULT_UPKEEP_BATCH, Progress, replay_all
from ..context import EXIT_OK, Context, schedule_id, target_ids
from ..options import (
    CommandTree,
    HelpFormatter,
    N,
    arg,
    example,
    filter_arguments,
    id_argument,
    switch,
)
from ..output import format_dead_letter, snapshot_json

if TYPE_CHECKING:
    import uuid

    from ...snapshot import MalformedSchedule
    from ...store.base import ScheduleStore


def add_parser(tree: CommandTree) -> None:
    """Add ``dead-letter`` and its ``list`` and ``replay``."""
    dead = tree.cmds.add_parser(
        "dead-letter",
        help="list and replay dead-lettered schedules",
        description="Dead-lettered schedules exhausted their attempts; inspect them, fix the"
        " cause, then replay them.",
        epilog=example(
            "hexeract scheduler dead-letter list",
            "hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b",
        ),
        formatter_class=HelpFormatter,
    )
    dead_cmds = dead.add_subparsers(
        dest="dead_command", metavar="COMMAND", required=True, help="what to do"
    )
    tree.command(
        "list",
        "list dead-lettered schedules, most recently dead-lettered first",
        ["hexeract scheduler dead-letter list --limit 10 --format json"],
        [tree.conn, tree.fmt, tree.limit],
        _list,
        into=dead_cmds,
    )
    sub = tree.command(
        "replay",
        "replay a dead-lettered schedule, or all of them: attempts reset, last error"
        " cleared, due now",
        [
            "hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b",
            "hexeract scheduler dead-letter replay --all --event-type 'invoice.*'",
        ],
        [tree.conn],
        _replay,
        into=dead_cmds,
        description="Replay a dead-lettered schedule, or all of them: attempts reset, last"
        " error cleared, due now. A replayed one-shot fires as a new occurrence (its"
        " scheduled time becomes now, so its occurrence id is new): a consumer that"
        " deduplicated the failed firing still receives the replay.",
    )
    id_argument(sub)
    switch(
        sub,
        "--all",
        "replay every dead letter (matching --event-type), in batches of --batch-size"
        " per transaction; prints how many were replayed",
    )
    filter_arguments(sub, statuses=False)
    help_text = f"rows per transaction with --all (default: {DEFAULT_UPKEEP_BATCH})"
    arg(sub, "--batch-size", N, help_text, default=DEFAULT_UPKEEP_BATCH)


def _list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        rows = SchedulerControl(store).list_dead_letter(args.limit)
    return ctx.show(lambda: [snapshot_json(s) for s in rows], lambda: format_dead_letter(rows))


def _replay(args: argparse.Namespace, ctx: Context) -> int:
    one = args.schedule_id is not None or args.schedule_name is not None
    if args.all == one:
        raise InvalidArgument(
            "give a SCHEDULE_ID, --name or --all (exactly one; not both, not neither)"
        )
    if args.event_type is not None and not args.all:
        raise InvalidArgument("--event-type only goes with --all")
    if args.all:
        check_glob(args.event_type)
        malformed: list[MalformedSchedule] = []
        with Progress("replayed") as progress, ctx.store(create=False) as store:
            count = replay_all(
                store,
                event_type=args.event_type,
                batch_size=args.batch_size,
                progress=progress,
                on_malformed=malformed.append,
            )
        ctx.print(f"Replayed {count} dead-lettered schedule{'' if count == 1 else 's'}.")
        if malformed:
            shown = "".join(f"\n  {m.raw_id}: {m.reason}" for m in malformed[:10])
            more = f"\n  ... and {len(malformed) - 10} more" if len(malformed) > 10 else ""
            print(
                f"Left {len(malformed)} malformed dead letter{'' if len(malformed) == 1 else 's'}"
                f" alone (a row another tool wrote that does not decode; fix or cancel"
                f" it):{shown}{more}",
                file=sys.stderr,
            )
        return EXIT_OK

    def act(store: ScheduleStore) -> uuid.UUID:
        sid = schedule_id(args, store)
        SchedulerControl(store).replay(sid)
        return sid

    sid = ctx.write(act, ids=target_ids(args))
    ctx.print(f"Replayed schedule {sid}.")
    return EXIT_OK
