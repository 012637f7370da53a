"""``hexeract scheduler schema``: print the table's DDL (offline)."""

from __future__ import annotations

import argparse

from ...errors import StoreError
from ...store.schema import DEFAULT_TABLE
from ..args import TABLE_ENV
from ..context import EXIT_OK, Context
from ..options import TABLE, CommandTree, arg


def add_parser(tree: CommandTree) -> None:
    """Add ``schema``."""
    schema = tree.command(
        "schema",
        "print the DDL of the table the stores create (offline, no database needed)",
        [
            "hexeract scheduler schema > schema.sql",
            "hexeract scheduler schema --dialect postgres --table app_schedules",
        ],
        [],
        _run,
    )
    help_text = "sqlite (the default), postgres or mysql"
    arg(
        schema,
        "--dialect",
        None,
        help_text,
        choices=("sqlite", "postgres", "mysql"),
        default="sqlite",
    )
    arg(schema, "--table", TABLE, f"the table name (default: ${TABLE_ENV}, else {DEFAULT_TABLE})")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.dialect == "sqlite":
        from ...store.schema import sqlite_ddl

        ddl = sqlite_ddl(ctx.table)
    elif args.dialect == "mysql":
        from ...store.mysql.schema import mysql_ddl

        ddl = mysql_ddl(ctx.table)
    else:
        try:
            from ...store.postgres.schema import postgres_ddl
        except ImportError as exc:
            raise StoreError(
                f"this build of hexeract_lite has no PostgreSQL schema ({exc})"
            ) from None
        ddl = postgres_ddl(ctx.table)
    ctx.print(ddl.rstrip("\n"))
    return EXIT_OK
