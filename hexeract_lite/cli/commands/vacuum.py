"""``hexeract scheduler vacuum``: rebuild a SQLite file so that it shrinks and prune
gives space back."""

from __future__ import annotations

import argparse

from ..context import EXIT_OK, Context
from ..options import CommandTree
from ..output import format_size


def add_parser(tree: CommandTree) -> None:
    """Add ``vacuum``."""
    conn = tree.conn
    tree.command(
        "vacuum",
        "rebuild a SQLite file so that it shrinks and prune gives space back",
        ["hexeract scheduler vacuum --conn /var/lib/myapp/scheduler.db"],
        [conn],
        _run,
        description="Rebuild a SQLite file with incremental auto-vacuum (files created"
        " before this version lack it) and return its free pages to the file system. Holds"
        " the write lock while it copies the file: run it when the workers are quiet."
        " SQLite only (PostgreSQL and MySQL servers reclaim space themselves).",
    )


def _run(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(create=False) as store:
        before = store.stats().file_bytes
        store.vacuum()
        after = store.stats().file_bytes
    ctx.print(f"Vacuumed: {format_size(before)} -> {format_size(after)}.")
    return EXIT_OK
