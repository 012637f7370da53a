"""The PostgreSQL store's upkeep statements: ``stats`` and ``prune`` (issue 15).

Each count's WHERE repeats a partial index's condition, so the planner counts on that
index and never reads rows of another status.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

from ...snapshot import ScheduleStatus
from ..listing import postgres_status_where
from .codec import select_list
from .schema import LEASED_PREDICATE, UNLEASED_PREDICATE

__all__ = ["list_statement", "prune_statements", "replay_statement", "stats_statement"]


def list_statement(
    table: str, status: ScheduleStatus | None, glob: bool, after: bool, name: bool = False
) -> sql.Composed:
    """A page of the listing in schedule id order (``%(regex)s``, ``%(after)s``,
    ``%(limit)s`` bound as the flags say); the status condition is constant text."""
    where: list[sql.Composable] = [sql.SQL(postgres_status_where(status))]
    if glob:
        where.append(sql.SQL("event_type ~ %(regex)s"))
    if name:
        where.append(sql.SQL("name ~ %(name_regex)s"))
    if after:
        where.append(sql.SQL("schedule_id > %(after)s"))
    text: LiteralString = (
        "SELECT {cols} FROM {t} WHERE {where} ORDER BY schedule_id LIMIT %(limit)s"
    )
    return sql.SQL(text).format(
        cols=select_list(), t=sql.Identifier(table), where=sql.SQL(" AND ").join(where)
    )


def replay_statement(table: str) -> sql.Composed:
    """Replay the rows of ``%(ids)s`` still dead-lettered, at ``%(now)s``."""
    return sql.SQL(
        "UPDATE {t} SET scheduled_for = %(now)s, attempts = 0, leased_until = NULL,"
        " last_error = NULL, paused = FALSE, dead_lettered_at = NULL"
        " WHERE schedule_id = ANY(%(ids)s) AND dead_lettered_at IS NOT NULL"
    ).format(t=sql.Identifier(table))


def stats_statement(table: str, now: sql.Composable) -> sql.Composed:
    """One row: now, fresh, leased, paused, delivered, cancelled, dead-lettered, due
    fresh, oldest fresh, due reclaimable, oldest reclaimable, in backoff, in flight."""
    text: LiteralString = (
        "SELECT {now},"
        " (SELECT count(*) FROM {t} WHERE {fresh}),"
        " (SELECT count(*) FROM {t} WHERE {leased}),"
        " (SELECT count(*) FROM {t} WHERE {live} AND paused = TRUE),"
        " (SELECT count(*) FROM {t} WHERE delivered_at IS NOT NULL),"
        " (SELECT count(*) FROM {t} WHERE cancelled_at IS NOT NULL),"
        " (SELECT count(*) FROM {t} WHERE dead_lettered_at IS NOT NULL),"
        " (SELECT count(*) FROM {t} WHERE {fresh} AND scheduled_for <= {now}),"
        " (SELECT min(scheduled_for) FROM {t} WHERE {fresh} AND scheduled_for <= {now}),"
        " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until <= {now}"
        " AND scheduled_for <= {now}),"
        " (SELECT min(scheduled_for) FROM {t} WHERE {leased} AND leased_until <= {now}"
        " AND scheduled_for <= {now}),"
        " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until > {now}"
        " AND last_error IS NOT NULL),"
        " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until > {now}"
        " AND last_error IS NULL)"
    )
    return sql.SQL(text).format(
        t=sql.Identifier(table),
        now=now,
        fresh=sql.SQL(UNLEASED_PREDICATE),
        leased=sql.SQL(LEASED_PREDICATE),
        live=sql.SQL("delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"),
    )


def prune_statements(table: str, column: str) -> tuple[sql.Composed, sql.Composed]:
    """(count, delete a batch) of the rows whose ``column`` (an end instant) is before
    ``%(cut)s``; ``%(n)s`` rows per delete, found on the column's partial index."""
    names = {"t": sql.Identifier(table), "c": sql.Identifier(column)}
    where: LiteralString = "{c} IS NOT NULL AND {c} < %(cut)s"
    count = sql.SQL("SELECT count(*) FROM {t} WHERE " + where).format(**names)
    delete = sql.SQL(
        "DELETE FROM {t} WHERE schedule_id IN (SELECT schedule_id FROM {t} WHERE "
        + where
        + " LIMIT %(n)s)"
    ).format(**names)
    return count, delete
