"""The reference's PostgreSQL table layout, as DDL text.

Pure Python (no psycopg import), so ``hexeract scheduler schema --dialect postgres``
works without the ``postgres`` extra. :class:`~hexeract_lite.store.postgres.PostgresScheduleStore`
runs exactly this text when it creates its table.

The columns are the SQLite layout's, typed for PostgreSQL: ``UUID`` ids,
``VARCHAR(64)`` event types, a ``JSONB`` payload, ``VARCHAR(16)`` kinds,
``TIMESTAMPTZ`` instants (written at millisecond precision), ``INTEGER`` counters and
a ``BOOLEAN`` paused flag; with the reference's two partial indexes.
"""

from __future__ import annotations

import hashlib

from .schema import DEFAULT_TABLE, MAX_TABLE_NAME_BYTES, validate_table_name

__all__ = ["POSTGRES_COLUMNS", "postgres_ddl", "postgres_index_name", "quote_ident"]

POSTGRES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("schedule_id", "UUID NOT NULL PRIMARY KEY"),
    ("event_type", "VARCHAR(64) NOT NULL"),
    ("payload", "JSONB NOT NULL"),
    ("trigger_kind", "VARCHAR(16) NOT NULL"),
    ("cron_expr", "TEXT"),
    ("scheduled_for", "TIMESTAMPTZ NOT NULL"),
    ("target_kind", "VARCHAR(16) NOT NULL"),
    ("target_routing_key", "TEXT"),
    ("attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("max_attempts", "INTEGER NOT NULL"),
    ("leased_until", "TIMESTAMPTZ"),
    ("paused", "BOOLEAN NOT NULL DEFAULT FALSE"),
    ("last_error", "TEXT"),
    ("created_at", "TIMESTAMPTZ NOT NULL DEFAULT now()"),
    ("delivered_at", "TIMESTAMPTZ"),
    ("cancelled_at", "TIMESTAMPTZ"),
    ("dead_lettered_at", "TIMESTAMPTZ"),
)
"""Every column of the table, in order, with its PostgreSQL type and constraints."""

PENDING_PREDICATE = (
    "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL AND paused = FALSE"
)
"""The WHERE clause of the pending index: non-terminal, not paused."""


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (case kept, reserved words safe)."""
    return '"' + name.replace('"', '""') + '"'


def postgres_index_name(table: str, suffix: str) -> str:
    """``idx_<table>_<suffix>``, kept within PostgreSQL's 63-byte identifier limit.

    PostgreSQL silently truncates longer names, which would give the pending and the
    dead-letter indexes of a long table name the same (truncated) name. When the plain
    name is too long, the table part is cut and an 8-hex-digit hash of the full table
    name keeps it unique: ``idx_<table prefix>_<hash>_<suffix>``.
    """
    name = f"idx_{table}_{suffix}"
    if len(name.encode()) <= MAX_TABLE_NAME_BYTES:
        return name
    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    room = MAX_TABLE_NAME_BYTES - len(f"idx__{digest}_{suffix}".encode())
    return f"idx_{table[:room]}_{digest}_{suffix}"


def postgres_ddl(table: str = DEFAULT_TABLE) -> str:
    """The statements that create the table and its indexes, idempotently.

    ``table`` is validated (:func:`~hexeract_lite.store.schema.validate_table_name`)
    before it is put into the text, and quoted, so mixed-case names and reserved words
    are kept as written. Every statement uses ``IF NOT EXISTS``: running the text on a
    database that already has the table changes nothing.
    """
    validate_table_name(table)
    qtable = quote_ident(table)
    width = max(len(name) for name, _ in POSTGRES_COLUMNS)
    columns = ",\n".join(f"    {name.ljust(width)} {decl}" for name, decl in POSTGRES_COLUMNS)
    pending = quote_ident(postgres_index_name(table, "pending"))
    dead = quote_ident(postgres_index_name(table, "dead_letter"))
    return (
        f"CREATE TABLE IF NOT EXISTS {qtable} (\n{columns}\n);\n"
        f"CREATE INDEX IF NOT EXISTS {pending}\n"
        f"    ON {qtable} (scheduled_for)\n"
        f"    WHERE {PENDING_PREDICATE};\n"
        f"CREATE INDEX IF NOT EXISTS {dead}\n"
        f"    ON {qtable} (dead_lettered_at)\n"
        f"    WHERE dead_lettered_at IS NOT NULL;\n"
    )
