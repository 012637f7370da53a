"""The PostgreSQL store's upkeep statements: ``stats`` and ``prune`` (issue 15).

Each count's WHERE repeats a partial index's condition, so the planner counts on that
index and never reads rows of another status.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

from .postgres_schema import LEASED_PREDICATE, UNLEASED_PREDICATE

__all__ = ["stats_statement"]


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
