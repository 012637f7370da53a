"""``hexeract scheduler list``: pending and paused schedules, soonest first; or every
schedule matching a status, event type or name filter, in schedule id order."""

from __future__ import annotations

import argparse

from ...connect import ConnTarget, parse_conn
from ...store.listing import check_glob
from ..args import parse_schedule_id
from ..context import EXIT_OK, Context
from ..options import CommandTree, arg, filter_arguments
from ..output import format_pending, pending_cells, pending_table, snapshot_json


def add_parser(tree: CommandTree) -> None:
    """Add ``list``."""
    sub = tree.command(
        "list",
        "list pending and paused schedules, soonest first; or filter by status",
        [
            "hexeract scheduler list --limit 20",
            "hexeract scheduler list --format json | jq .",
            "hexeract scheduler list --status delivered --event-type 'invoice.*' --limit 500",
        ],
        [tree.conn, tree.fmt, tree.limit],
        _run,
        description="List schedules. Without --status, --event-type or --after: pending and"
        " paused ones, soonest first. With any of them: every schedule that matches, in"
        " schedule id order; page through a large table with --after set to the last id"
        " printed. JSON output includes each payload.",
    )
    filter_arguments(sub, statuses=True)
    help_text = "list only schedules whose id sorts after this one (keyset pagination)"
    arg(sub, "--after", (parse_schedule_id, "SCHEDULE_ID"), help_text)


def _run(args: argparse.Namespace, ctx: Context) -> int:
    filters = (args.status, args.event_type, args.after, args.name_glob)
    filtered = any(value is not None for value in filters)
    check_glob(args.event_type)  # before the store opens: bad input touches nothing
    check_glob(args.name_glob, "name")
    if not filtered and args.format == "text":  # a SQLite file, read without the store
        target = parse_conn(ctx.conn)
        text = pending_text(target, ctx.table, args.limit) if target.kind == "sqlite" else None
        if text is not None:
            ctx.print(text)
            return EXIT_OK
    with ctx.store(create=False, readonly=True) as store:
        if filtered:
            rows = store.list_schedules(
                status=args.status,
                event_type=args.event_type,
                after=args.after,
                limit=args.limit,
                name=args.name_glob,
            )
        else:
            rows = store.list_pending(args.limit)  # what SchedulerControl.list_pending runs
    return ctx.show(
        lambda: [snapshot_json(s, payload=True) for s in rows],
        lambda: "no matching schedules" if filtered and not rows else format_pending(rows),
    )


def pending_text(target: ConnTarget, table: str, limit: int) -> str | None:
    """The text of ``scheduler list --limit <limit>`` for the SQLite file ``target``
    names, read without the store (:mod:`hexeract_lite.store.sqlite.plain`); None when
    a row needs the store's decoding. Raises what the read-only store's open raises."""
    from ...store.schema import validate_sqlite_table_name
    from ...store.sqlite.plain import plain_pending, read_pending

    table = validate_sqlite_table_name(table)
    # None, as open_store passes it: the default database's folders are the store's to find
    rows = read_pending(None if target.source == "default" else target.path, table, limit)
    if rows is None:
        return None
    cells = []
    for row in rows:
        values = plain_pending(row)
        if values is None:
            return None
        cells.append(pending_cells(*values))
    return pending_table(cells)
