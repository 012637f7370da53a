"""The MySQL/MariaDB table (no driver imported): the reference's layout in
``utf8mb4_bin``, our nullable columns, and indexed ``VIRTUAL`` generated columns in
place of partial indexes; ``create=True`` adds what is missing, under a named lock."""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING, Any

from ...errors import StoreError
from ..columns import COLUMNS
from ..schema import DEFAULT_TABLE, META_TABLE, check_table, short_name, validate_table_name
from .runs import runs_ddl, runs_table_name

if TYPE_CHECKING:
    import pymysql

SCHEMA_VERSION = 3
"""The schema version this code writes and understands."""

MYSQL_TYPES: dict[str, str] = {
    "schedule_id": "BINARY(16) NOT NULL PRIMARY KEY",
    "event_type": "VARCHAR(64) NOT NULL",
    "payload": "JSON NOT NULL",
    "trigger_kind": "VARCHAR(16) NOT NULL",
    "cron_expr": "TEXT NULL",
    "scheduled_for": "DATETIME(6) NOT NULL",
    "target_kind": "VARCHAR(16) NOT NULL",
    "target_routing_key": "TEXT NULL",
    "attempts": "INT NOT NULL DEFAULT 0",
    "max_attempts": "INT NOT NULL",
    "leased_until": "DATETIME(6) NULL",
    "paused": "BOOLEAN NOT NULL DEFAULT FALSE",
    "last_error": "TEXT NULL",
    "created_at": "DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
    "delivered_at": "DATETIME(6) NULL",
    "cancelled_at": "DATETIME(6) NULL",
    "dead_lettered_at": "DATETIME(6) NULL",
    "name": "VARCHAR(200) NULL",
    "next_after_lease": "DATETIME(6) NULL",
    "misfire_grace_ms": "BIGINT NULL",
    "end_at": "DATETIME(6) NULL",
    "max_firings": "BIGINT NULL",
    "firings": "BIGINT NULL",
    "jitter_ms": "BIGINT NULL",
    "jitter_offset_ms": "BIGINT NULL",
    "catch_up": "VARCHAR(16) NULL",
    "catch_up_limit": "INT NULL",
    "backfill_until": "DATETIME(6) NULL",
    "pause_note": "TEXT NULL",
    "snoozes": "INT NULL",
    "abort_requested": "VARCHAR(16) NULL",
}
"""Every column of the registry with its MySQL declaration."""
assert set(MYSQL_TYPES) == {c.name for c in COLUMNS}

PENDING = (
    "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL AND paused = 0"
)
"""A pending row: not terminal, not paused."""

_GENERATED: tuple[tuple[str, str], ...] = (
    ("hxl_due", f"IF(leased_until IS NULL AND {PENDING}, scheduled_for, NULL)"),
    (
        "hxl_reclaim",
        f"IF(leased_until IS NOT NULL AND {PENDING}, GREATEST(scheduled_for, leased_until), NULL)",
    ),
    (
        "hxl_exhausted",
        f"IF(attempts >= max_attempts AND {PENDING},"
        " COALESCE(leased_until, TIMESTAMP'1000-01-01 00:00:00'), NULL)",
    ),
)
"""The generated columns of version 1, ``(name, expression)``."""

_OURS: tuple[str, ...] = tuple(c.name for c in COLUMNS if not c.reference)
_NEEDED: tuple[str, ...] = _OURS + tuple(name for name, _ in _GENERATED)
"""The columns of ours the store's statements name."""

_INDEXES: tuple[tuple[str, str, bool], ...] = (
    ("name", "name", True),
    ("due", "hxl_due, schedule_id", False),
    ("reclaim", "hxl_reclaim", False),
    ("exhausted", "hxl_exhausted", False),
    ("delivered", "delivered_at", False),
    ("cancelled", "cancelled_at", False),
)
"""Version 1's indexes, ``(suffix, keys, unique)``."""


def _q(name: str) -> str:
    return f"`{name}`"


def index_name(table: str, suffix: str) -> str:
    """``idx_<table>_<suffix>`` within MySQL's 64 characters (see :func:`short_name`)."""
    return short_name("idx_", table, suffix, 64)


def reference_ddl(table: str = DEFAULT_TABLE) -> str:
    """The reference's table and its two indexes, nothing of ours."""
    validate_table_name(table)
    lines = [f"    {c.name} {MYSQL_TYPES[c.name]}" for c in COLUMNS if c.reference]
    lines.append(f"    INDEX {_q(index_name(table, 'pending'))} (scheduled_for)")
    lines.append(f"    INDEX {_q(index_name(table, 'dead_letter'))} (dead_lettered_at)")
    body = ",\n".join(lines)
    return (
        f"CREATE TABLE IF NOT EXISTS {_q(table)} (\n{body}\n)"
        " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;\n"
    )


def _additions(table: str, columns: set[str], indexes: set[str]) -> list[str]:
    """The ALTER clauses that bring ``table`` (with these columns and index names) to
    :data:`SCHEMA_VERSION`."""
    clauses = [f"ADD COLUMN {n} {MYSQL_TYPES[n]}" for n in _OURS if n not in columns]
    clauses += [
        f"ADD COLUMN {n} DATETIME(6) AS ({expr}) VIRTUAL"
        for n, expr in _GENERATED
        if n not in columns
    ]
    for suffix, keys, unique in _INDEXES:
        name = index_name(table, suffix)
        if name not in indexes:
            clauses.append(f"ADD {'UNIQUE ' if unique else ''}INDEX {_q(name)} ({keys})")
    return clauses


def mysql_ddl(table: str = DEFAULT_TABLE) -> str:
    """The reference's ``CREATE TABLE``, then one ``ALTER TABLE`` adding ours (which
    fails on a table that has them: the store adds only what is missing)."""
    validate_table_name(table)
    alter = ",\n    ".join(_additions(table, set(), set()))
    return reference_ddl(table) + f"ALTER TABLE {_q(table)}\n    {alter};\n" + runs_ddl(table)


def _lock_name(table: str) -> str:
    return "hexeract_lite:" + hashlib.sha256(table.encode()).hexdigest()[:40]


def _one(conn: pymysql.Connection[Any], sql: str, args: Any = None) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()


def _all(conn: pymysql.Connection[Any], sql: str, args: Any = None) -> set[str]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return {str(row[0]) for row in cur.fetchall()}


def _has_table(conn: pymysql.Connection[Any], name: str) -> bool:
    return bool(
        _one(
            conn,
            "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE()"
            " AND table_name = %s",
            [name],
        )
    )


def _state(conn: pymysql.Connection[Any], table: str) -> tuple[set[str], set[str], int | None]:
    """(the table's columns, its index names, its recorded version); no columns: no table."""
    columns = _all(
        conn,
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = DATABASE() AND table_name = %s",
        [table],
    )
    indexes = _all(
        conn,
        "SELECT DISTINCT index_name FROM information_schema.statistics"
        " WHERE table_schema = DATABASE() AND table_name = %s",
        [table],
    )
    version = None
    if _has_table(conn, META_TABLE):
        row = _one(conn, f"SELECT version FROM {META_TABLE} WHERE table_name = %s", [table])
        version = None if row is None else int(row[0])
    return columns, indexes, version


_check = functools.partial(
    check_table,
    understood=SCHEMA_VERSION,
    ours=_NEEDED,
    no_table="create it with `hexeract scheduler schema --dialect mysql` or open with create=True",
)


def ensure_schema(
    conn: pymysql.Connection[Any], table: str, *, create: bool, where: str, lock_wait: int
) -> int:
    """Check ``table`` on an autocommit connection, create or upgrade it when allowed
    (``create=False`` writes nothing); its version after the call. ``lock_wait``:
    seconds to wait for another process creating or upgrading it."""
    columns, indexes, version = _state(conn, table)
    _check(table, where, columns or None, version, create=create)
    if not create or (
        columns
        and version == SCHEMA_VERSION
        and not _additions(table, columns, indexes)
        and _has_table(conn, runs_table_name(table))
    ):
        return version or 0
    got = _one(conn, "SELECT GET_LOCK(%s, %s)", [_lock_name(table), lock_wait])
    if not got or got[0] != 1:
        raise StoreError(
            f"cannot open table {table!r} at {where}: another process held the schema"
            f" lock for more than {lock_wait} s"
        )
    try:
        columns, indexes, version = _state(conn, table)  # again, under the lock
        _check(table, where, columns or None, version, create=create)
        with conn.cursor() as cur:
            if not columns:
                cur.execute(reference_ddl(table))
            clauses = _additions(table, columns, indexes)
            if clauses:
                cur.execute(f"ALTER TABLE {_q(table)} " + ", ".join(clauses))
            cur.execute(runs_ddl(table))
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {META_TABLE} (table_name VARCHAR(64) NOT NULL"
                " PRIMARY KEY, version INT NOT NULL) ENGINE=InnoDB"
            )
            cur.execute(
                f"INSERT INTO {META_TABLE} (table_name, version) VALUES (%s, %s)"
                " ON DUPLICATE KEY UPDATE version = VALUES(version)",
                [table, SCHEMA_VERSION],
            )
    finally:
        _one(conn, "SELECT RELEASE_LOCK(%s)", [_lock_name(table)])
    return SCHEMA_VERSION
