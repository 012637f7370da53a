"""``hexeract scheduler stats``: counts by status, due, in flight, in backoff; the
oldest lag, the next wake-up and the file sizes."""

from __future__ import annotations

import argparse

from ..context import EXIT_OK, Context
from ..options import CommandTree
from ..output import format_stats


def add_parser(tree: CommandTree) -> None:
    """Add ``stats``."""
    conn, fmt = tree.conn, tree.fmt
    tree.command(
        "stats",
        "count schedules by status, due, in flight, in backoff; the oldest lag",
        ["hexeract scheduler stats", "hexeract scheduler stats --format json"],
        [conn, fmt],
        _run,
        description="Count schedules by status, those due now and not claimed, in flight"
        " and in retry backoff; show how late the oldest due one is, the next wake-up,"
        " and for SQLite the size of the file and its WAL. Reads only; counts on indexes,"
        " so it answers fast at any table size.",
    )


def _run(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        stats = store.stats()
    ctx.show(stats.as_json, lambda: format_stats(stats))
    return EXIT_OK
