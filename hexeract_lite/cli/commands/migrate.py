"""``hexeract scheduler schema`` and ``migrate``: print the table's DDL (offline); copy
every schedule, with its state, to another database."""

from __future__ import annotations

import argparse
import importlib

from ...connect import ConnTarget, open_store, parse_conn
from ...errors import StoreError, UsageError
from ...migrate import DEFAULT_BATCH_SIZE, migrate
from ...store.schema import DEFAULT_TABLE
from ...upkeep import Progress
from ..args import TABLE_ENV, parse_conn_arg
from ..context import EXIT_OK, Context
from ..options import TABLE, CommandTree, N, arg
from ..output import format_migration

_DDL = {
    "sqlite": ("...store.schema", "sqlite_ddl", "SQLite"),
    "postgres": ("...store.postgres.schema", "postgres_ddl", "PostgreSQL"),
    "mysql": ("...store.mysql.schema", "mysql_ddl", "MySQL"),
}
"""Each ``--dialect``: the module and function that write its DDL, and its name."""


def add_parser(tree: CommandTree) -> None:
    """Add ``schema``, ``migrate``."""
    schema = tree.command(
        "schema",
        "print the DDL of the table the stores create (offline, no database needed)",
        [
            "hexeract scheduler schema > schema.sql",
            "hexeract scheduler schema --dialect postgres --table app_schedules",
        ],
        [],
        _schema,
    )
    help_text = "sqlite (the default), postgres or mysql"
    arg(schema, "--dialect", None, help_text, choices=tuple(_DDL), default="sqlite")
    arg(schema, "--table", TABLE, f"the table name (default: ${TABLE_ENV}, else {DEFAULT_TABLE})")
    sub = tree.command(
        "migrate",
        "copy every schedule, with its state, to another database (e.g. SQLite to PostgreSQL)",
        [
            "hexeract scheduler migrate --from sqlite:////var/lib/myapp/scheduler.db"
            " --to postgresql://app@db.internal/app",
            "hexeract scheduler migrate --from postgresql://app@db.internal/app"
            " --to sqlite:///backup.db --format json",
        ],
        [tree.fmt],
        _migrate,
        description="Copy every schedule from one database to another with its whole state"
        " (attempts, lease, paused flag, last error, timestamps), whatever its status:"
        " SQLite to PostgreSQL, back, or between two tables. Idempotent: a schedule the"
        " destination already holds (same id) is skipped, never overwritten, so running it"
        " again copies only what is new and resumes a copy that stopped part-way. Prints"
        " how many rows were read, copied and skipped. Never creates the source; creates"
        " the destination's table when needed. Stop the workers on the source first: a"
        " change made there after a row was copied is not carried over.",
    )
    url = (parse_conn_arg, "URL")
    help_text = (
        "the database to copy from, spelled as --conn (sqlite:///path.db, a file path,"
        " postgresql://..., mysql://...); it must exist"
    )
    arg(sub, "--from", url, help_text, dest="from_conn", required=True)
    help_text = (
        "the database to copy to, spelled as --conn; a password is never printed"
        " (PGPASSWORD or ~/.pgpass keep it off the command line)"
    )
    arg(sub, "--to", url, help_text, dest="to_conn", required=True)
    arg(sub, "--table", TABLE, f"the source table (default: ${TABLE_ENV}, else {DEFAULT_TABLE})")
    arg(sub, "--to-table", TABLE, "the destination table (default: the source table's name)")
    help_text = f"rows per read and per write transaction (default: {DEFAULT_BATCH_SIZE})"
    arg(sub, "--batch-size", N, help_text, default=DEFAULT_BATCH_SIZE)


def _schema(args: argparse.Namespace, ctx: Context) -> int:
    module, function, name = _DDL[args.dialect]
    try:
        ddl = getattr(importlib.import_module(module, __package__), function)
    except ImportError as exc:
        raise StoreError(f"this build of hexeract_lite has no {name} schema ({exc})") from None
    ctx.print(ddl(ctx.table).rstrip("\n"))
    return EXIT_OK


def _same_database(a: ConnTarget, b: ConnTarget) -> bool:
    if a.kind == "sqlite" and b.kind == "sqlite":
        assert a.path is not None and b.path is not None
        return a.path.expanduser().resolve() == b.path.expanduser().resolve()
    return a.kind == b.kind and a.url == b.url


def _migrate(args: argparse.Namespace, ctx: Context) -> int:
    source, dest = parse_conn(args.from_conn), parse_conn(args.to_conn)
    source_table = ctx.table
    dest_table = args.to_table or source_table
    if _same_database(source, dest) and source_table == dest_table:
        raise UsageError(
            f"--from and --to name the same table ({source_table} in {source.display()}):"
            " nothing to copy"
        )
    # The source first: when it is missing, nothing (not even the destination) is created.
    with (
        open_store(source, table=source_table, create=False) as src,
        open_store(dest, table=dest_table, create=True) as dst,
        Progress("read") as progress,  # ends its line before any error is printed
    ):
        report = migrate(src, dst, batch_size=args.batch_size, progress=progress)
    return ctx.show(
        lambda: {
            "source": source.display(),
            "source_table": source_table,
            "destination": dest.display(),
            "destination_table": dest_table,
            **report.to_json_dict(),
        },
        lambda: (
            f"Migrated table {source_table} of {source.display()} to table {dest_table}"
            f" of {dest.display()}:\n{format_migration(report)}"
        ),
    )
