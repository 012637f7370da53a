"""The SQLite store's upkeep statements: ``stats`` and ``prune`` (issue 15).

Every count reads a partial index that holds only the rows it counts (the planner
picks it: each WHERE repeats an index's condition word for word, see
:data:`~hexeract_lite.store.schema.LIVE`); no statement reads a row of another status.
Instants are canonical text (``YYYY-MM-DDTHH:MM:SS.mmmZ``), compared as text.
"""

from __future__ import annotations

import pathlib

from ...snapshot import ScheduleStatus
from ..listing import sqlite_status_where
from ..schema import LIVE, validate_sqlite_table_name
from .codec import SELECT_LIST

__all__ = ["file_sizes", "list_sql", "prune_sql", "replay_sql", "stats_sql"]


def list_sql(
    table: str,
    status: ScheduleStatus | None,
    glob: bool,
    after: bool,
    name: bool = False,
    select_list: str = SELECT_LIST,
) -> str:
    """A page of the listing in schedule id order: ``:glob``, ``:after``, ``:limit`` bound
    as the flags say; the status condition is constant text. ``select_list``: the
    store's (``NULL AS <column>`` for a column an older table lacks, read-only)."""
    t = validate_sqlite_table_name(table)
    where = [sqlite_status_where(status)]
    if glob:
        where.append("event_type GLOB :glob")
    if name:
        where.append("name GLOB :name")
    if after:
        where.append("schedule_id > :after")
    return (
        f"SELECT {select_list} FROM {t} WHERE {' AND '.join(where)}"
        " ORDER BY schedule_id LIMIT :limit"
    )


def replay_sql(table: str) -> str:
    """Replay one row if it is still dead-lettered (``:id``, ``:now``)."""
    t = validate_sqlite_table_name(table)
    return (
        f"UPDATE {t} SET scheduled_for = :now, attempts = 0, leased_until = NULL,"
        " last_error = NULL, paused = 0, dead_lettered_at = NULL"
        " WHERE schedule_id = :id AND dead_lettered_at IS NOT NULL"
    )


def stats_sql(table: str, *, indexed: bool = True) -> str:
    """One row: fresh, leased, paused, delivered, cancelled, dead-lettered, due fresh,
    oldest fresh, due reclaimable, oldest reclaimable, in backoff, in flight (``:now`` bound)."""
    t = validate_sqlite_table_name(table)
    pending = f"{LIVE} AND paused = 0"
    fresh = f"{pending} AND leased_until IS NULL"
    leased = f"{pending} AND leased_until IS NOT NULL"
    # The planner would count fresh rows on the reference's pending index, reading each
    # row for its lease; the due index holds exactly them (a count reads it alone).
    due = f"{t} INDEXED BY idx_{t}_due" if indexed else t
    held = f"{t} INDEXED BY idx_{t}_leased" if indexed else t
    return (
        "SELECT"
        f" (SELECT count(*) FROM {due} WHERE {fresh}),"
        f" (SELECT count(*) FROM {held} WHERE {leased}),"
        f" (SELECT count(*) FROM {t} WHERE {LIVE} AND paused <> 0),"
        f" (SELECT count(*) FROM {t} WHERE delivered_at IS NOT NULL),"
        f" (SELECT count(*) FROM {t} WHERE cancelled_at IS NOT NULL),"
        f" (SELECT count(*) FROM {t} WHERE dead_lettered_at IS NOT NULL),"
        f" (SELECT count(*) FROM {due} WHERE {fresh} AND scheduled_for <= :now),"
        f" (SELECT min(scheduled_for) FROM {due} WHERE {fresh} AND scheduled_for <= :now),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until <= :now"
        " AND scheduled_for <= :now),"
        f" (SELECT min(scheduled_for) FROM {held} WHERE {leased} AND leased_until <= :now"
        " AND scheduled_for <= :now),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until > :now"
        " AND last_error IS NOT NULL),"
        f" (SELECT count(*) FROM {held} WHERE {leased} AND leased_until > :now"
        " AND last_error IS NULL)"
    )


def file_sizes(path: pathlib.Path) -> tuple[int | None, int | None]:
    """The size in bytes of the database file and of its WAL (None: no such file)."""
    sizes: list[int | None] = []
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            sizes.append(candidate.stat().st_size)
        except OSError:
            sizes.append(None)
    return sizes[0], sizes[1]


def prune_sql(table: str, column: str) -> tuple[str, str]:
    """(count, delete a batch) of the rows whose ``column`` (an end instant, from
    :data:`~hexeract_lite.store.listing.PRUNE_COLUMN`) is before ``:cut``; ``:n`` rows
    per delete, found on the column's partial index."""
    t = validate_sqlite_table_name(table)
    where = f"{column} IS NOT NULL AND {column} < :cut"
    return (
        f"SELECT count(*) FROM {t} WHERE {where}",
        f"DELETE FROM {t} WHERE rowid IN (SELECT rowid FROM {t} WHERE {where} LIMIT :n)",
    )
