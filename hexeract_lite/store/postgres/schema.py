"""The PostgreSQL table (no psycopg imported): its DDL, its schema version (none
recorded: 0, the reference's) and the upgrade ladder, one step per version."""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any

from ..columns import COLUMNS, POLICY_COLUMNS
from ..schema import DEFAULT_TABLE, check_table, short_name, validate_table_name
from ..schema import META_TABLE as META_TABLE

if TYPE_CHECKING:
    import psycopg

SCHEMA_VERSION = 7
"""The schema version this code writes and understands."""

POSTGRES_COLUMNS: tuple[tuple[str, str], ...] = tuple((c.name, c.postgres) for c in COLUMNS)
"""Every column of the table, in order, with its PostgreSQL type and constraints."""

PENDING_PREDICATE = (
    "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL AND paused = FALSE"
)
"""The WHERE clause of the pending index: non-terminal, not paused."""

REFERENCE_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("pending", "scheduled_for", PENDING_PREDICATE),
    ("dead_letter", "dead_lettered_at", "dead_lettered_at IS NOT NULL"),
)
"""The reference's two indexes, ``(suffix, key columns, WHERE clause)``."""

UNLEASED_PREDICATE = f"leased_until IS NULL AND {PENDING_PREDICATE}"
"""The WHERE clause of ``idx_<table>_due``: pending rows that hold no lease."""

LEASED_PREDICATE = f"leased_until IS NOT NULL AND {PENDING_PREDICATE}"
"""The WHERE clause of ``idx_<table>_reclaim``: pending rows that hold a lease."""

RECLAIM_KEY = "GREATEST(scheduled_for, leased_until)"
"""When a leased row becomes claimable again (its lease ran out and it is due)."""

RETENTION_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("delivered", "delivered_at", "delivered_at IS NOT NULL"),
    ("cancelled", "cancelled_at", "cancelled_at IS NOT NULL"),
)
"""Ended rows by when they ended, for ``stats`` and ``prune``."""

CLAIM_INDEXES: tuple[tuple[str, str, str], ...] = (
    ("due", "scheduled_for, schedule_id", UNLEASED_PREDICATE),
    ("reclaim", f"({RECLAIM_KEY})", LEASED_PREDICATE),
)
"""What a claim reads: unleased rows by due instant, leased ones by when they come back."""

EXTRA_INDEXES: tuple[tuple[str, str, str], ...] = (
    *CLAIM_INDEXES,
    ("exhausted", "leased_until", f"attempts >= max_attempts AND {PENDING_PREDICATE}"),
    *RETENTION_INDEXES,
)
"""hexeract_lite's own indexes at :data:`SCHEMA_VERSION`, ``(suffix, keys, WHERE)``."""

INDEXES: tuple[tuple[str, str, str], ...] = REFERENCE_INDEXES + EXTRA_INDEXES
"""Every index, ``(suffix, key columns, WHERE clause)``, named ``idx_<table>_<suffix>``."""

UNIQUE_INDEXES: tuple[tuple[str, str, str], ...] = (("name", "name", "name IS NOT NULL"),)
"""Unique indexes (version 3): a schedule name is unique among rows that have one."""

LATER_COLUMNS: dict[str, int] = {
    "name": 3,
    "next_after_lease": 3,
    "misfire_grace_ms": 4,
    **dict.fromkeys(POLICY_COLUMNS, 7),
}
"""Columns of ours, by the version that added them."""


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (case kept, reserved words safe)."""
    return '"' + name.replace('"', '""') + '"'


def postgres_index_name(table: str, suffix: str) -> str:
    """``idx_<table>_<suffix>``, kept within the identifier limit
    (``idx_<table prefix>_<hash>_<suffix>``)."""
    return short_name("idx_", table, suffix)


def _table_ddl(table: str, declared: tuple[tuple[str, str], ...] = POSTGRES_COLUMNS) -> str:
    width = max(len(name) for name, _ in declared)
    columns = ",\n".join(f"    {name.ljust(width)} {decl}" for name, decl in declared)
    return f"CREATE TABLE IF NOT EXISTS {quote_ident(table)} (\n{columns}\n);\n"


def _index_ddl(
    table: str, indexes: tuple[tuple[str, str, str], ...], *, unique: bool = False
) -> str:
    qtable = quote_ident(table)
    kind = "UNIQUE INDEX" if unique else "INDEX"
    text = ""
    for suffix, keys, where in indexes:
        name = quote_ident(postgres_index_name(table, suffix))
        text += (
            f"CREATE {kind} IF NOT EXISTS {name}\n    ON {qtable} ({keys})\n    WHERE {where};\n"
        )
    return text


def runs_table_name(table: str) -> str:
    """``<table>_runs``, kept within the identifier limit (as :func:`postgres_index_name`)."""
    return short_name("", table, "runs")


def postgres_runs_ddl(table: str) -> str:
    """The runs table and its indexes (by ``finished``, and by schedule), idempotently."""
    name = runs_table_name(table)
    runs = quote_ident(name)
    return (
        f"CREATE TABLE IF NOT EXISTS {runs} (\n"
        "    run_id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
        "    schedule_id   UUID NOT NULL,\n"
        "    scheduled_for TIMESTAMPTZ NOT NULL,\n"
        "    attempt       INTEGER NOT NULL,\n"
        "    started       TIMESTAMPTZ,\n"
        "    finished      TIMESTAMPTZ NOT NULL,\n"
        "    outcome       TEXT NOT NULL,\n"
        "    lag_ms        BIGINT NOT NULL,\n"
        "    duration_ms   DOUBLE PRECISION,\n"
        "    host          TEXT NOT NULL,\n"
        "    pid           INTEGER NOT NULL,\n"
        "    error         TEXT\n"
        ");\n"
        f"CREATE INDEX IF NOT EXISTS {quote_ident(postgres_index_name(name, 'finished'))}\n"
        f"    ON {runs} (finished);\n"
        f"CREATE INDEX IF NOT EXISTS {quote_ident(postgres_index_name(name, 'schedule'))}\n"
        f"    ON {runs} (schedule_id, finished);\n"
    )


def postgres_ddl(table: str = DEFAULT_TABLE) -> str:
    """The statements that create the table and its indexes, idempotently, ``table``
    validated and quoted. A table made from this text alone (no version record) is
    adopted as version 0 and upgraded, changing only the record."""
    validate_table_name(table)
    return (
        _table_ddl(table)
        + _index_ddl(table, INDEXES)
        + _index_ddl(table, UNIQUE_INDEXES, unique=True)
        + postgres_runs_ddl(table)
    )


def reference_ddl(table: str = DEFAULT_TABLE) -> str:
    """The reference's own DDL: the table and its two indexes, nothing of ours."""
    validate_table_name(table)
    columns = tuple((n, d) for n, d in POSTGRES_COLUMNS if n not in LATER_COLUMNS)
    return _table_ddl(table, columns) + _index_ddl(table, REFERENCE_INDEXES)


# -- the upgrade ladder ----------------------------------------------------------------


def _steps(table: str) -> tuple[str, ...]:
    """``_steps(table)[v]`` moves a table from version v to v + 1, idempotently (an index
    still in use by its current definition, a dropped one by its own): the ladder run
    again from 0 on a table further along repairs it and changes nothing else."""
    add = f"ALTER TABLE {quote_ident(table)} ADD COLUMN IF NOT EXISTS"
    pending = PENDING_PREDICATE
    declared = dict(POSTGRES_COLUMNS)
    return (
        _index_ddl(
            table,
            (
                *REFERENCE_INDEXES,
                ("claim", "scheduled_for, schedule_id", pending),
                ("leased", "leased_until", f"leased_until IS NOT NULL AND {pending}"),
                ("exhausted", "leased_until", f"attempts >= max_attempts AND {pending}"),
            ),
        ),
        _index_ddl(table, CLAIM_INDEXES)
        + "".join(
            f"DROP INDEX IF EXISTS {quote_ident(postgres_index_name(table, suffix))};\n"
            for suffix in ("claim", "leased")
        ),
        f"{add} name TEXT;\n{add} next_after_lease TIMESTAMPTZ;\n"
        + _index_ddl(table, UNIQUE_INDEXES, unique=True),
        f"{add} misfire_grace_ms BIGINT",
        _index_ddl(table, RETENTION_INDEXES),
        postgres_runs_ddl(table),
        f"ALTER TABLE {quote_ident(table)} "
        + ", ".join(f"ADD COLUMN IF NOT EXISTS {n} {declared[n]}" for n in POLICY_COLUMNS),
    )


assert len(_steps(DEFAULT_TABLE)) == SCHEMA_VERSION


def lock_key(table: str) -> int:
    """A signed 64-bit advisory-lock key for creating or upgrading ``table``."""
    digest = hashlib.sha256(f"hexeract_lite:create:{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_META_LOCK_KEY = lock_key(META_TABLE)


def _state(conn: psycopg.Connection[Any], table: str) -> tuple[set[str] | None, int | None]:
    """(the columns of ``table``, None when there is none; its recorded version or None)."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
        [quote_ident(table), quote_ident(META_TABLE)],
    ).fetchone()
    assert row is not None
    exists, has_meta = bool(row[0]), bool(row[1])
    if not exists:
        return None, None
    found = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attnum > 0 AND NOT attisdropped",
        [quote_ident(table)],
    ).fetchall()
    columns = {row[0] for row in found}
    if not has_meta:
        return columns, None
    version = conn.execute(
        f"SELECT version FROM {quote_ident(META_TABLE)} WHERE table_name = %s".encode(), [table]
    ).fetchone()
    return columns, None if version is None else int(version[0])


_check = functools.partial(
    check_table,
    understood=SCHEMA_VERSION,
    ours=LATER_COLUMNS,
    no_table="create it with `hexeract scheduler schema --dialect postgres`"
    " or open with create=True",
)


def _missing_indexes(conn: psycopg.Connection[Any], table: str) -> list[str]:
    """The indexes ``table`` lacks (a table another tool made again keeps its record)."""
    names = [postgres_index_name(table, suffix) for suffix, _, _ in INDEXES + UNIQUE_INDEXES]
    runs = runs_table_name(table)
    names += [postgres_index_name(runs, "finished"), postgres_index_name(runs, "schedule")]
    rows = conn.execute(
        "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(quote_ident(name)) IS NULL",
        [names],
    ).fetchall()
    return [row[0] for row in rows]


def ensure_schema(conn: psycopg.Connection[Any], table: str, *, create: bool, where: str) -> int:
    """Check ``table`` on an autocommit connection, create or upgrade it (one
    transaction, advisory locks) when allowed (``create=False`` writes nothing); its
    schema version after the call."""
    columns, version = _state(conn, table)
    _check(table, where, columns, version, create=create)
    if columns is not None and (
        not create or (version == SCHEMA_VERSION and not _missing_indexes(conn, table))
    ):
        return version or 0
    with conn.transaction():
        # workers starting together must not race on CREATE ... IF NOT EXISTS
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(table)])
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_META_LOCK_KEY])
        conn.execute("SET LOCAL statement_timeout = 0")
        columns, version = _state(conn, table)  # again, under the locks
        _check(table, where, columns, version, create=True)
        if columns is None:
            conn.execute(postgres_ddl(table).encode())
        else:
            start = 0 if version is None or _missing_indexes(conn, table) else version
            for step in _steps(table)[start:]:
                conn.execute(step.encode())
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {quote_ident(META_TABLE)}"
            " (table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)".encode()
        )
        conn.execute(
            f"INSERT INTO {quote_ident(META_TABLE)} (table_name, version) VALUES (%s, %s)"
            " ON CONFLICT (table_name) DO UPDATE SET version = excluded.version".encode(),
            [table, SCHEMA_VERSION],
        )
    return SCHEMA_VERSION
