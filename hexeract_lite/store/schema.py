"""Table names and DDL shared by the SQL stores and the CLI's ``schema`` command."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from ..errors import InvalidConfiguration, StoreError
from .columns import COLUMNS

__all__ = [
    "CANONICAL_TS",
    "DEFAULT_TABLE",
    "META_TABLE",
    "REFERENCE_COLUMNS",
    "NONCANONICAL",
    "OFF_LAYOUT",
    "TABLE_NAME_RE",
    "check_table",
    "short_name",
    "sqlite_ddl",
    "sqlite_epoch_ms",
    "sqlite_extra_index_ddl",
    "sqlite_reference_index_ddl",
    "sqlite_retention_index_ddl",
    "sqlite_runs_ddl",
    "sqlite_noncanonical",
    "sqlite_table_ddl",
    "sqlite_unique_index_ddl",
    "validate_sqlite_table_name",
    "validate_table_name",
]

DEFAULT_TABLE = "scheduled_messages"
TABLE_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
MAX_TABLE_NAME_BYTES = 63
META_TABLE = "hexeract_lite_schema"
"""Where a server store records each table's schema version: ``(table_name, version)``."""


def short_name(prefix: str, table: str, suffix: str, limit: int = MAX_TABLE_NAME_BYTES) -> str:
    """``<prefix><table>_<suffix>``, at most ``limit`` characters (names are ASCII): when
    too long, the table part is cut and an 8-hex-digit hash of the table keeps it unique."""
    name = f"{prefix}{table}_{suffix}"
    if len(name) <= limit:
        return name
    import hashlib  # not on import: a listing does without

    digest = hashlib.sha256(table.encode()).hexdigest()[:8]
    room = limit - len(f"{prefix}_{digest}_{suffix}")
    return f"{prefix}{table[:room]}_{digest}_{suffix}"


def check_table(
    table: str,
    where: str,
    columns: set[str] | None,
    version: int | None,
    *,
    create: bool,
    understood: int,
    ours: Iterable[str],
    no_table: str,
) -> None:
    """Refuse a server table (``columns`` None: there is none) with a version newer than
    ``understood``, missing with ``create=False`` (saying ``no_table``), lacking a
    column of the reference's, or lacking one of ``ours`` with ``create=False``."""
    if version is not None and version > understood:
        raise StoreError(
            f"table {table!r} at {where} has schema version {version}, newer than this"
            f" hexeract_lite understands ({understood}); upgrade hexeract_lite"
        )
    if columns is None:
        if not create:
            raise StoreError(f"no table {table!r} at {where}: {no_table}")
        return
    missing = [c.name for c in COLUMNS if c.reference and c.name not in columns]
    if missing:
        raise StoreError(
            f"table {table!r} at {where} is not a hexeract scheduler table:"
            f" it lacks the column(s) {', '.join(missing)}"
        )
    lacking = [name for name in ours if name not in columns]
    if lacking and not create:
        raise StoreError(
            f"table {table!r} at {where} has schema version {version or 0}, older than"
            f" this hexeract_lite's {understood}: it lacks the column(s)"
            f" {', '.join(lacking)}; open it with create=True once to upgrade it in place"
        )


def validate_table_name(name: object) -> str:
    """``name`` if it is a plain identifier of at most 63 bytes not starting with
    ``sqlite_``; else :class:`InvalidConfiguration`.
    """
    if not isinstance(name, str) or not TABLE_NAME_RE.fullmatch(name):
        raise InvalidConfiguration(
            f"invalid table name {name!r}: it must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
        )
    if name[:7].lower() == "sqlite_":
        raise InvalidConfiguration(
            f"invalid table name {name!r}: names beginning with sqlite_ are SQLite's own"
        )
    if len(name.encode()) > MAX_TABLE_NAME_BYTES:
        raise InvalidConfiguration(
            f"invalid table name {name!r}: {len(name)} characters; at most"
            f" {MAX_TABLE_NAME_BYTES} are allowed"
        )
    return name


def validate_sqlite_table_name(name: object) -> str:
    """:func:`validate_table_name`, and not a word SQLite reads as a keyword (its
    statements name the table unquoted).
    """
    name = validate_table_name(name)
    if not _sqlite_takes(name):
        raise InvalidConfiguration(
            f"invalid table name {name!r} for SQLite: SQL reads it as a keyword (its"
            " statements name the table unquoted, as the reference's do)"
        )
    return name


@functools.cache
def _sqlite_takes(name: str) -> bool:
    """True when SQLite parses ``name`` unquoted as a table name in the stores' statements."""
    import apsw  # not on import: the CLI loads the driver only when it needs it

    conn = apsw.Connection(":memory:")
    try:
        for _ in conn.execute(
            f"CREATE TABLE {name} (x INTEGER); CREATE INDEX idx_{name}_x ON {name} (x);"
            f" INSERT INTO {name} (x) VALUES (1);"
            f" SELECT x FROM {name} INDEXED BY idx_{name}_x WHERE x = 1;"
            f" UPDATE {name} SET x = 2 WHERE x = 1; DELETE FROM {name} WHERE x = 2"
        ):
            pass
    except apsw.SQLError:
        return False
    finally:
        conn.close()
    return True


# -- SQLite ---------------------------------------------------------------------

REFERENCE_COLUMNS: tuple[tuple[str, str, bool], ...] = tuple(
    (column.name, column.sqlite.split()[0], column.required)
    for column in COLUMNS
    if column.reference
)
"""The reference's SQLite columns, in order: (name, declared type, NOT NULL)."""

LIVE = "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"
"""A non-terminal row, word for word as the indexes' WHERE (SQLite needs it so)."""


def counted(flag: str) -> str:
    """The assignment that adds one to ``firings`` when the bound ``flag`` is true."""
    return f"firings = CASE WHEN {flag} THEN coalesce(firings, 0) + 1 ELSE firings END"


REPLAYED = "jitter_offset_ms = NULL"
"""What a replay also sets: the firing it makes (due now) has no jitter."""


CANONICAL_TS = "'%Y-%m-%dT%H:%M:%fZ'"
"""The ``strftime`` format of stored instants (the reference's layout)."""
_DATE_GLOB = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*'"


def sqlite_epoch_ms(column: str) -> str:
    """SQL of a stored text instant as integer milliseconds since the epoch."""
    return f"CAST(round((julianday({column}) - 2440587.5) * 86400000.0) AS INTEGER)"


def sqlite_noncanonical(column: str) -> str:
    """SQL true when ``column`` holds an instant SQLite can rewrite in the canonical
    layout but is not in it.
    """
    return (
        f"({column} GLOB {_DATE_GLOB}"
        f" AND (length({column}) <> 24 OR substr({column}, 11, 1) <> 'T'"
        f" OR substr({column}, 24, 1) <> 'Z')"
        f" AND strftime({CANONICAL_TS}, {column}) IS NOT NULL)"
    )


NONCANONICAL = (
    f"{LIVE} AND ({sqlite_noncanonical('scheduled_for')} OR {sqlite_noncanonical('leased_until')})"
)
"""A live row with an instant in another layout, which the store rewrites before it
compares (text order is time order only in the canonical layout)."""

_LAYOUT_GLOB = "'????-??-??T??:??:??.???Z'"

OFF_LAYOUT = (
    f"{LIVE} AND (scheduled_for NOT GLOB {_LAYOUT_GLOB} OR leased_until NOT GLOB {_LAYOUT_GLOB})"
)
"""The WHERE of ``idx_<table>_noncanonical``, a superset of :data:`NONCANONICAL`."""


def sqlite_table_ddl(table: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for the reference's layout (its ``created_at``
    default kept; hexeract_lite binds its own).
    """
    t = validate_sqlite_table_name(table)
    body = ",\n".join(f"    {column.name} {column.sqlite}" for column in COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {t} (\n{body}\n);"


def sqlite_reference_index_ddl(table: str) -> list[str]:
    """The reference's two partial indexes, with its names and definitions."""
    t = validate_sqlite_table_name(table)
    return [
        f"CREATE INDEX IF NOT EXISTS idx_{t}_pending ON {t} (scheduled_for)\n"
        f"    WHERE {LIVE} AND paused = 0;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_dead_letter ON {t} (dead_lettered_at)\n"
        "    WHERE dead_lettered_at IS NOT NULL;",
    ]


def sqlite_extra_index_ddl(table: str) -> list[str]:
    """hexeract_lite's own partial indexes, which keep every worker query O(log n): due,
    leased, exhausted, paused and noncanonical rows.
    """
    t = validate_sqlite_table_name(table)
    return [
        f"CREATE INDEX IF NOT EXISTS idx_{t}_due ON {t} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NULL;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_leased ON {t} (leased_until, scheduled_for)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NOT NULL;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_exhausted ON {t} (leased_until)\n"
        f"    WHERE {LIVE} AND paused = 0 AND attempts >= max_attempts;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_paused ON {t} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused <> 0;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_noncanonical ON {t} (schedule_id)\n"
        f"    WHERE {OFF_LAYOUT};",
    ]


def sqlite_retention_index_ddl(table: str) -> list[str]:
    """Ended rows by when they ended, for ``stats`` and ``prune``."""
    t = validate_sqlite_table_name(table)
    return [
        f"CREATE INDEX IF NOT EXISTS idx_{t}_delivered ON {t} (delivered_at)\n"
        "    WHERE delivered_at IS NOT NULL;",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_cancelled ON {t} (cancelled_at)\n"
        "    WHERE cancelled_at IS NOT NULL;",
    ]


def sqlite_unique_index_ddl(table: str) -> list[str]:
    """A schedule name is unique among the rows that have one."""
    t = validate_sqlite_table_name(table)
    return [
        f"CREATE UNIQUE INDEX IF NOT EXISTS idx_{t}_name ON {t} (name)\n"
        "    WHERE name IS NOT NULL;",
    ]


def sqlite_runs_ddl(table: str) -> list[str]:
    """The run log ``<table>_runs``, instants in epoch milliseconds."""
    t = validate_sqlite_table_name(table)
    return [
        f"CREATE TABLE IF NOT EXISTS {t}_runs (\n"
        "    run_id INTEGER PRIMARY KEY,\n"
        "    schedule_id BLOB NOT NULL,\n"
        "    scheduled_for INTEGER NOT NULL,\n"
        "    attempt INTEGER NOT NULL,\n"
        "    started INTEGER,\n"
        "    finished INTEGER NOT NULL,\n"
        "    outcome TEXT NOT NULL,\n"
        "    lag_ms INTEGER NOT NULL,\n"
        "    duration_ms REAL,\n"
        "    host TEXT NOT NULL,\n"
        "    pid INTEGER NOT NULL,\n"
        "    error TEXT\n"
        ");",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_runs_finished ON {t}_runs (finished);",
        f"CREATE INDEX IF NOT EXISTS idx_{t}_runs_schedule ON {t}_runs (schedule_id, finished);",
    ]


def sqlite_ddl(table: str = DEFAULT_TABLE) -> str:
    """The whole SQLite schema of ``table``, idempotent; what ``schema`` prints."""
    statements = [
        sqlite_table_ddl(table),
        *sqlite_reference_index_ddl(table),
        *sqlite_extra_index_ddl(table),
        *sqlite_unique_index_ddl(table),
        *sqlite_retention_index_ddl(table),
        *sqlite_runs_ddl(table),
    ]
    return "\n".join(statements) + "\n"
