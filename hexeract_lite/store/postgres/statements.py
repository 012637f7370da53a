"""Every SQL statement of the PostgreSQL store, composed once per table and clock mode:
instants bound from the store's clock, or (``use_database_clock``) the server's
``statement_timestamp()`` in milliseconds."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, LiteralString

from psycopg import sql

from ..columns import COLUMN_NAMES, COLUMNS, ColumnKind
from ..sql.runs import RUN_COLUMNS, RunStatements
from ..sql.statements import INSERT_COLUMNS, NOT_TERMINAL, SharedStatements
from .codec import ARRAY_TYPES, decode_instant, same, select_list
from .schema import (
    LEASED_PREDICATE,
    PENDING_PREDICATE,
    RECLAIM_KEY,
    UNLEASED_PREDICATE,
    quote_ident,
    runs_table_name,
)

_KIND = {c.name: c.kind for c in COLUMNS}


def _unnest(
    t: sql.Identifier,
    names: Sequence[str],
    fmt: str,
    more: LiteralString = "",
    values: LiteralString = "",
    **extra: sql.Composable,
) -> sql.Composed:
    """``INSERT ... SELECT ... FROM unnest(<one array per column>)``, ``more`` columns
    set to ``values``; an id already stored is skipped."""
    columns = sql.SQL(", ").join(sql.Identifier(n) for n in names)
    picks = sql.SQL(", ").join(
        sql.SQL("u.{}::jsonb" if _KIND[n] is ColumnKind.JSON else "u.{}").format(sql.Identifier(n))
        for n in names
    )
    arrays = sql.SQL(", ").join(
        sql.SQL("{}::{}[]").format(sql.Placeholder(n, fmt), sql.SQL(ARRAY_TYPES[_KIND[n]]))
        for n in names
    )
    return sql.SQL(
        "INSERT INTO {t} ({columns}" + more + ") SELECT {picks}" + values + " FROM"
        " unnest({arrays}) AS u({columns}) ON CONFLICT (schedule_id) DO NOTHING"
    ).format(t=t, columns=columns, picks=picks, arrays=arrays, **extra)


class Statements(SharedStatements):
    """Every statement of one store, composed once with the table name and the clock."""

    # the delete repeats the condition outside its subquery, so a row another
    # transaction changed meanwhile is kept
    _prune_delete = (
        "DELETE FROM {t} WHERE schedule_id IN (SELECT schedule_id FROM {t} WHERE {w}"
        " LIMIT %(n)s) AND {w}"
    )

    def __init__(self, table: str, use_database_clock: bool) -> None:
        t = sql.Identifier(table)
        if use_database_clock:
            now: sql.Composable = sql.SQL("date_trunc('milliseconds', statement_timestamp())")
            plus_ms = sql.SQL("({} + {} * INTERVAL '1 millisecond')")
            until: sql.Composable = plus_ms.format(now, sql.Placeholder("lease_ms"))
            deadline: sql.Composable = plus_ms.format(now, sql.Placeholder("retry_in"))
        else:
            now = sql.Placeholder("now")
            until = sql.Placeholder("until")
            deadline = sql.Placeholder("until")  # the settle plan's name for the retry deadline
        cols = select_list()

        def q(text: LiteralString, **extra: sql.Composable) -> sql.Composed:
            return sql.SQL(text).format(
                t=t,
                now=now,
                cols=cols,
                not_terminal=sql.SQL(NOT_TERMINAL),
                pending=sql.SQL(PENDING_PREDICATE),
                unleased=sql.SQL(UNLEASED_PREDICATE),
                leased=sql.SQL(LEASED_PREDICATE),
                reclaim_key=sql.SQL(RECLAIM_KEY),
                deadline=deadline,
                regexp=sql.SQL("~"),
                in_ids=sql.SQL("= ANY(%(ids)s)"),
                int8=sql.SQL("::int8"),
                jsonb=sql.SQL("::jsonb"),
                **extra,
            )

        super().__init__(q)

        self.insert = _unnest(
            t,
            INSERT_COLUMNS,
            "s",
            ", attempts, max_attempts, leased_until, paused, last_error, created_at",
            ", 0, %(max_attempts)s, NULL, FALSE, NULL, {now}",
            now=now,
        ) + sql.SQL(" RETURNING schedule_id")
        # One statement over two indexes: fresh rows from idx_due, expired leases from
        # idx_reclaim, each locked skipping rows another claim holds, merged. The
        # always-true lower bound makes the planner read idx_reclaim as a small range
        # (it has no statistics for a partial index's expression). The caller sorts.
        self.claim = q(
            "WITH fresh AS (SELECT schedule_id, scheduled_for FROM {t}"
            " WHERE scheduled_for <= {now} AND {unleased} AND attempts < max_attempts"
            " ORDER BY scheduled_for, schedule_id LIMIT %(batch_size)s"
            " FOR UPDATE SKIP LOCKED),"
            " expired AS (SELECT schedule_id, scheduled_for FROM {t}"
            " WHERE {reclaim_key} <= {now} AND {reclaim_key} >= '-infinity'"
            " AND {leased} AND attempts < max_attempts"
            " ORDER BY scheduled_for, schedule_id LIMIT %(batch_size)s"
            " FOR UPDATE SKIP LOCKED),"
            " picked AS (SELECT schedule_id FROM"
            " (SELECT * FROM fresh UNION ALL SELECT * FROM expired) AS u"
            " ORDER BY scheduled_for, schedule_id LIMIT %(batch_size)s)"
            " UPDATE {t} AS t SET attempts = t.attempts + 1, leased_until = {until},"
            " abort_requested = NULL"
            " FROM picked WHERE t.schedule_id = picked.schedule_id"
            " RETURNING {returning}",
            until=until,
            returning=select_list("t"),
        )
        self.sweep = q(
            "UPDATE {t} SET dead_lettered_at = {now}, leased_until = NULL, last_error ="
            " CASE WHEN last_error IS NULL THEN %(error)s ELSE %(kept)s || last_error END"
            " WHERE {pending} AND attempts >= max_attempts"
            " AND (leased_until IS NULL OR leased_until <= {now})"
        )
        # min over non-terminal, non-paused rows of max(scheduled_for, leased_until):
        # the first entry of idx_due and the first of idx_reclaim
        self.next_wakeup = q(
            "SELECT LEAST("
            "(SELECT scheduled_for FROM {t} WHERE {unleased}"
            " ORDER BY scheduled_for, schedule_id LIMIT 1),"
            "(SELECT {reclaim_key} FROM {t} WHERE {leased} ORDER BY {reclaim_key} LIMIT 1))"
        )
        self.lock_row = q("SELECT {cols}, {now} FROM {t} WHERE schedule_id = %(id)s FOR UPDATE")
        # names of a group: the prefix compared byte for byte (left(), not LIKE, whose
        # wildcards a name may hold, and not a range, which the collation would decide)
        self.list_named = q(
            "SELECT {cols} FROM {t} WHERE name IS NOT NULL AND {not_terminal}"
            ' AND left(name, %(length)s) = %(prefix)s ORDER BY name COLLATE "C"'
        )
        self.lock_named = self.list_named + q(" FOR UPDATE")
        self.import_rows = _unnest(t, COLUMN_NAMES, "b")
        # now, fresh, leased, paused, delivered, cancelled, dead-lettered, due fresh, oldest
        # fresh, due reclaimable, oldest reclaimable, in backoff, in flight
        self.stats = q(
            "SELECT {now},"
            " (SELECT count(*) FROM {t} WHERE {unleased}),"
            " (SELECT count(*) FROM {t} WHERE {leased}),"
            " (SELECT count(*) FROM {t} WHERE {not_terminal} AND paused = TRUE),"
            " (SELECT count(*) FROM {t} WHERE delivered_at IS NOT NULL),"
            " (SELECT count(*) FROM {t} WHERE cancelled_at IS NOT NULL),"
            " (SELECT count(*) FROM {t} WHERE dead_lettered_at IS NOT NULL),"
            " (SELECT count(*) FROM {t} WHERE {unleased} AND scheduled_for <= {now}),"
            " (SELECT min(scheduled_for) FROM {t} WHERE {unleased} AND scheduled_for <= {now}),"
            " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until <= {now}"
            " AND scheduled_for <= {now}),"
            " (SELECT min(scheduled_for) FROM {t} WHERE {leased} AND leased_until <= {now}"
            " AND scheduled_for <= {now}),"
            " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until > {now}"
            " AND last_error IS NOT NULL),"
            " (SELECT count(*) FROM {t} WHERE {leased} AND leased_until > {now}"
            " AND last_error IS NULL)"
        )
        self.sweep_with_runs = sweep_runs(table, self.sweep)  # with version >= RUNS_VERSION
        for name, statement in vars(self).items():  # rendered once, not at each execute
            if isinstance(statement, sql.Composable):
                setattr(self, name, statement.as_bytes(None))


# -- the run log: <table>_runs (schema version 6)

RUNS_VERSION = 6
"""The first schema version with the runs table."""


def _decode_id(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def run_statements(table: str) -> RunStatements:
    """The run-log statements of ``table`` (already validated)."""
    return RunStatements(
        quote_ident(runs_table_name(table)),
        hour="date_trunc('hour', finished AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
        encode_id=same,
        encode_instant=same,
        decode_id=_decode_id,
        decode_instant=decode_instant,
    )


def sweep_runs(table: str, sweep: sql.Composable) -> sql.Composed:
    """The sweep (``sweep``, an UPDATE) and its ``swept`` runs in one statement; its
    row count is how many rows it swept. Binds the sweep's parameters, ``host`` and
    ``pid``."""
    return sql.SQL(
        "WITH swept AS ({sweep} RETURNING schedule_id, scheduled_for, attempts,"
        " dead_lettered_at, last_error)"
        " INSERT INTO {runs} ({columns})"
        " SELECT schedule_id, scheduled_for, attempts, NULL, dead_lettered_at, 'swept',"
        " round(extract(epoch FROM dead_lettered_at - scheduled_for) * 1000)::bigint,"
        " NULL, %(host)s, %(pid)s, last_error FROM swept"
    ).format(
        sweep=sweep,
        runs=sql.Identifier(runs_table_name(table)),
        columns=sql.SQL(", ").join(sql.Identifier(c) for c in RUN_COLUMNS),
    )
