"""The upgrade ladder of a SQLite scheduler table: :data:`UPGRADES`, one step per schema
version, run in order by :func:`~hexeract_lite.store.sqlite.schema.ensure_schema` in
one transaction."""

from __future__ import annotations

import re
from collections.abc import Callable

import apsw

from ..._time import format_ts, parse_ts
from ..columns import COLUMNS, POLICY_COLUMNS, ColumnKind
from ..schema import (
    sqlite_epoch_ms,
    sqlite_extra_index_ddl,
    sqlite_reference_index_ddl,
    sqlite_retention_index_ddl,
    sqlite_runs_ddl,
    sqlite_unique_index_ddl,
)

__all__ = ["UPGRADES"]

NAMED_COLUMNS = ("name", "next_after_lease")
"""The columns step 2 → 3 adds."""
GRACE_COLUMNS = ("misfire_grace_ms",)
"""The column step 3 → 4 adds."""
_INSTANT_COLUMNS = tuple(
    c.name for c in COLUMNS if c.kind is ColumnKind.INSTANT and c.reference
)  # step 1's: the reference's instants (the table has no others yet)


def _upgrade_to_1(conn: apsw.Connection, table: str) -> None:
    """0 → 1: the reference's indexes ensured; instants in another layout (such as
    ``YYYY-MM-DD HH:MM:SS``) rewritten as ``YYYY-MM-DDTHH:MM:SS.mmmZ``, the same
    instant, so that text order is time order."""
    for ddl in sqlite_reference_index_ddl(table):
        conn.execute(ddl)
    for column in _INSTANT_COLUMNS:
        odd = conn.execute(
            f"SELECT schedule_id, {column} FROM {table} WHERE {column} IS NOT NULL"
            f" AND (length({column}) <> 24 OR substr({column}, 11, 1) <> 'T'"
            f" OR substr({column}, 24, 1) <> 'Z')"
        ).fetchall()
        for sid, text in odd:
            try:
                canonical = format_ts(parse_ts(str(text)))
            except ValueError:
                continue  # not a timestamp at all: left for a human to look at
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE schedule_id = ?", (canonical, sid))


_INDEX_NAME = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+) ")


def _normal(sql: str) -> str:
    """An index's text as ``sqlite_schema`` keeps it, for comparison: without ``IF NOT
    EXISTS`` and the closing semicolon, whitespace collapsed."""
    return " ".join(sql.replace(" IF NOT EXISTS", "").rstrip(";").split())


def _upgrade_to_2(conn: apsw.Connection, table: str) -> None:
    """1 → 2: hexeract_lite's extra indexes exactly as defined now (a version-1 file
    may hold ``idx_<table>_spaced``, dropped, or other definitions, rebuilt)."""
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_spaced")
    for ddl in sqlite_extra_index_ddl(table):
        _as_defined(conn, ddl)


def _upgrade_to_3(conn: apsw.Connection, table: str) -> None:
    """2 → 3: named schedules: the nullable ``name`` and ``next_after_lease`` columns
    (unless the table has them) and the unique index on ``name``. The reference's
    statements name their columns and work as before."""
    _add_columns(conn, table, NAMED_COLUMNS)
    for ddl in sqlite_unique_index_ddl(table):
        conn.execute(ddl)


def _upgrade_to_4(conn: apsw.Connection, table: str) -> None:
    """3 → 4: the nullable ``misfire_grace_ms`` column (NULL: no grace), unless the
    table has it."""
    _add_columns(conn, table, GRACE_COLUMNS)


def _add_columns(conn: apsw.Connection, table: str, names: tuple[str, ...]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for each of ``names`` the table lacks."""
    present = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
    for column in COLUMNS:
        if column.name in names and column.name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column.name} {column.sqlite}")


def _upgrade_to_5(conn: apsw.Connection, table: str) -> None:
    """4 → 5: the retention indexes (delivered and cancelled rows by end instant)."""
    for ddl in sqlite_retention_index_ddl(table):
        conn.execute(ddl)


def _upgrade_to_6(conn: apsw.Connection, table: str) -> None:
    """5 → 6: ``idx_<table>_noncanonical`` rebuilt with the WHERE
    :data:`~hexeract_lite.store.schema.OFF_LAYOUT` (kept when it already is so)."""
    name = f"idx_{table}_noncanonical"
    [ddl] = [ddl for ddl in sqlite_extra_index_ddl(table) if _index_name(ddl) == name]
    _as_defined(conn, ddl)


def _upgrade_to_7(conn: apsw.Connection, table: str) -> None:
    """6 → 7: the run log, a table of its own beside the table."""
    for ddl in sqlite_runs_ddl(table):
        conn.execute(ddl)


def _upgrade_to_8(conn: apsw.Connection, table: str) -> None:
    """7 → 8: the nullable policy and long-handler columns
    (:data:`~hexeract_lite.store.columns.POLICY_COLUMNS`), unless the table has them."""
    _add_columns(conn, table, POLICY_COLUMNS)


def _upgrade_to_9(conn: apsw.Connection, table: str) -> None:
    """8 → 9: the run log's instants as integer milliseconds: a text run log is made
    again and its rows copied over, converted (a row whose required instants do not
    read as instants is left out)."""
    runs = f"{table}_runs"
    declared = {str(row[1]): str(row[2]) for row in conn.execute(f"PRAGMA table_info({runs})")}
    if declared.get("finished", "").upper() == "INTEGER":
        return
    conn.execute(f"ALTER TABLE {runs} RENAME TO {runs}_text")
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_runs_finished")
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_runs_schedule")
    for ddl in sqlite_runs_ddl(table):
        conn.execute(ddl)
    ms = {column: sqlite_epoch_ms(column) for column in ("scheduled_for", "started", "finished")}
    values = ", ".join(ms.get(column, column) for column in _V8_RUN_COLUMNS)
    conn.execute(
        f"INSERT INTO {runs} (run_id, {', '.join(_V8_RUN_COLUMNS)})"
        f" SELECT run_id, {values} FROM {runs}_text"
        f" WHERE {ms['scheduled_for']} IS NOT NULL AND {ms['finished']} IS NOT NULL"
    )
    conn.execute(f"DROP TABLE {runs}_text")


_V8_RUN_COLUMNS = (
    "schedule_id", "scheduled_for", "attempt", "started", "finished", "outcome", "lag_ms",
    "duration_ms", "host", "pid", "error",
)  # fmt: skip
"""The run log's columns at version 8 (``run_id`` aside), which step 9 copies."""


def _index_name(ddl: str) -> str:
    match = _INDEX_NAME.match(ddl)
    assert match is not None, ddl
    return match.group(1)


def _as_defined(conn: apsw.Connection, ddl: str) -> None:
    """Make the index of ``ddl`` exist exactly so: dropped and rebuilt when its
    definition differs, created when missing, left alone when it matches."""
    name = _index_name(ddl)
    rows = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?", (name,)
    ).fetchall()
    if rows and _normal(str(rows[0][0])) != _normal(ddl):
        conn.execute(f"DROP INDEX {name}")
    conn.execute(ddl)


UPGRADES: list[Callable[[apsw.Connection, str], None]] = [
    _upgrade_to_1,
    _upgrade_to_2,
    _upgrade_to_3,
    _upgrade_to_4,
    _upgrade_to_5,
    _upgrade_to_6,
    _upgrade_to_7,
    _upgrade_to_8,
    _upgrade_to_9,
]
"""``UPGRADES[v]`` moves a table from version v to v + 1; run in order, in one transaction."""
