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

Step = Callable[[apsw.Connection, str], None]

_INSTANT_COLUMNS = tuple(
    c.name for c in COLUMNS if c.kind is ColumnKind.INSTANT and c.reference
)  # step 1's: the reference's instants (the table has no others yet)


def _upgrade_to_1(conn: apsw.Connection, table: str) -> None:
    """The reference's indexes; instants in another layout rewritten canonical, so
    that text order is time order."""
    _run(sqlite_reference_index_ddl)(conn, table)
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
    """An index's text as ``sqlite_schema`` keeps it."""
    return " ".join(sql.replace(" IF NOT EXISTS", "").rstrip(";").split())


def _upgrade_to_2(conn: apsw.Connection, table: str) -> None:
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_spaced")
    for ddl in sqlite_extra_index_ddl(table):
        _as_defined(conn, ddl)


def _upgrade_to_3(conn: apsw.Connection, table: str) -> None:
    _add_columns(("name", "next_after_lease"))(conn, table)
    _run(sqlite_unique_index_ddl)(conn, table)


def _add_columns(names: tuple[str, ...]) -> Step:
    """The step adding each of ``names`` the table lacks."""

    def step(conn: apsw.Connection, table: str) -> None:
        present = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        for column in COLUMNS:
            if column.name in names and column.name not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column.name} {column.sqlite}")

    return step


def _run(ddl_of: Callable[[str], list[str]]) -> Step:
    """The step running each statement of ``ddl_of(table)``."""

    def step(conn: apsw.Connection, table: str) -> None:
        for ddl in ddl_of(table):
            conn.execute(ddl)

    return step


def _upgrade_to_6(conn: apsw.Connection, table: str) -> None:
    """``idx_<table>_noncanonical`` rebuilt with the WHERE of
    :data:`~hexeract_lite.store.schema.OFF_LAYOUT`."""
    name = f"idx_{table}_noncanonical"
    [ddl] = [ddl for ddl in sqlite_extra_index_ddl(table) if _index_name(ddl) == name]
    _as_defined(conn, ddl)


def _upgrade_to_9(conn: apsw.Connection, table: str) -> None:
    """The run log's instants as integer milliseconds: made again and its rows copied
    over (a row whose required instants do not read is left out)."""
    runs = f"{table}_runs"
    declared = {str(row[1]): str(row[2]) for row in conn.execute(f"PRAGMA table_info({runs})")}
    if declared.get("finished", "").upper() == "INTEGER":
        return
    conn.execute(f"ALTER TABLE {runs} RENAME TO {runs}_text")
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_runs_finished")
    conn.execute(f"DROP INDEX IF EXISTS idx_{table}_runs_schedule")
    _run(sqlite_runs_ddl)(conn, table)
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


def _index_name(ddl: str) -> str:
    match = _INDEX_NAME.match(ddl)
    assert match is not None, ddl
    return match.group(1)


def _as_defined(conn: apsw.Connection, ddl: str) -> None:
    """The index of ``ddl`` exactly so: rebuilt when its definition differs."""
    name = _index_name(ddl)
    rows = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = ?", (name,)
    ).fetchall()
    if rows and _normal(str(rows[0][0])) != _normal(ddl):
        conn.execute(f"DROP INDEX {name}")
    conn.execute(ddl)


UPGRADES: list[Step] = [
    _upgrade_to_1,
    _upgrade_to_2,  # hexeract_lite's extra indexes
    _upgrade_to_3,  # named schedules
    _add_columns(("misfire_grace_ms",)),
    _run(sqlite_retention_index_ddl),
    _upgrade_to_6,
    _run(sqlite_runs_ddl),  # the run log
    _add_columns(POLICY_COLUMNS),  # policy and long-handler columns
    _upgrade_to_9,
]
"""``UPGRADES[v]`` moves a table from version v to v + 1; run in order, in one transaction."""
