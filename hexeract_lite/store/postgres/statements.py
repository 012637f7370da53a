"""Every SQL statement of the PostgreSQL store, composed once per table and clock mode.

Instants are bound parameters from the store's clock (``now``, ``until``,
``deadline``), or, with ``use_database_clock``, the server's
``statement_timestamp()`` truncated to milliseconds; SQL reads no other clock.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import sql

from ...snapshot import ScheduleStatus
from ..columns import COLUMNS, ColumnKind
from ..listing import postgres_status_where
from ..schema import REPLAYED, counted
from ..sql.backfill import DELIVERED_KEEPS_WINDOW, rescheduled_keeps_window
from ..sql.statements import SharedStatements
from .codec import ARRAY_TYPES, select_list
from .schema import (
    LEASED_PREDICATE,
    PENDING_PREDICATE,
    RECLAIM_KEY,
    UNLEASED_PREDICATE,
)

__all__ = [
    "NOT_TERMINAL",
    "Statements",
    "list_statement",
    "prune_statements",
    "replay_statement",
    "stats_statement",
]

NOT_TERMINAL: LiteralString = (
    "delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL"
)
_PENDING: LiteralString = PENDING_PREDICATE


def _import_rows(t: sql.Identifier) -> sql.Composed:
    """``INSERT ... SELECT ... FROM unnest(<one array per column>)``: every column as
    given, the arrays sent in binary (quoting their text form cost more than the INSERT)."""
    names = sql.SQL(", ").join(sql.Identifier(c.name) for c in COLUMNS)
    picks = sql.SQL(", ").join(
        sql.SQL("u.{}::jsonb" if c.kind is ColumnKind.JSON else "u.{}").format(
            sql.Identifier(c.name)
        )
        for c in COLUMNS
    )
    arrays = sql.SQL(", ").join(
        sql.SQL("{}::{}[]").format(sql.Placeholder(c.name, "b"), sql.SQL(ARRAY_TYPES[c.kind]))
        for c in COLUMNS
    )
    return sql.SQL(
        "INSERT INTO {t} ({names}) SELECT {picks} FROM unnest({arrays}) AS u({names})"
        " ON CONFLICT (schedule_id) DO NOTHING"
    ).format(t=t, names=names, picks=picks, arrays=arrays)


_COUNTED = sql.SQL(counted("%(counted)s"))
_REPLAYED = sql.SQL(REPLAYED)


class Statements(SharedStatements):
    """Every statement of one store, composed once with the table name and the clock."""

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
                pending=sql.SQL(_PENDING),
                unleased=sql.SQL(UNLEASED_PREDICATE),
                leased=sql.SQL(LEASED_PREDICATE),
                reclaim_key=sql.SQL(RECLAIM_KEY),
                counted=_COUNTED,
                replayed=_REPLAYED,
                deadline=deadline,
                **extra,
            )

        super().__init__(q)

        self.insert = q(
            "INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
            " scheduled_for, target_kind, target_routing_key, attempts, max_attempts,"
            " leased_until, paused, last_error, created_at, name, misfire_grace_ms, end_at,"
            " max_firings, jitter_ms, jitter_offset_ms, catch_up, catch_up_limit)"
            " SELECT u.id, u.event_type, u.payload::jsonb, u.trigger_kind, u.cron_expr,"
            " u.scheduled_for, u.target_kind, u.routing_key, 0, %(max_attempts)s,"
            " NULL, FALSE, NULL, {now}, u.name, u.grace, u.end_at, u.max_firings,"
            " u.jitter_ms, u.jitter_offset_ms, u.catch_up, u.catch_up_limit"
            " FROM unnest(%(ids)s::uuid[], %(event_types)s::text[], %(payloads)s::text[],"
            " %(trigger_kinds)s::text[], %(cron_exprs)s::text[],"
            " %(scheduled_fors)s::timestamptz[], %(target_kinds)s::text[],"
            " %(routing_keys)s::text[], %(names)s::text[], %(graces)s::int8[],"
            " %(end_ats)s::timestamptz[], %(max_firings)s::int8[], %(jitter_ms)s::int8[],"
            " %(jitter_offset_ms)s::int8[], %(catch_ups)s::text[], %(catch_up_limits)s::int4[])"
            " AS u(id, event_type, payload, trigger_kind, cron_expr, scheduled_for,"
            " target_kind, routing_key, name, grace, end_at, max_firings, jitter_ms,"
            " jitter_offset_ms, catch_up, catch_up_limit)"
            " ON CONFLICT (schedule_id) DO NOTHING"
            " RETURNING schedule_id"
        )
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
        fence: LiteralString = (
            " WHERE schedule_id = %(id)s AND leased_until = %(lease)s AND {not_terminal}"
        )
        # a change made during the lease (next_after_lease) sets the next firing: the
        # acknowledgement of the firing in flight moves the schedule there instead
        self.mark_delivered = q(
            "UPDATE {t} SET {window}, delivered_at ="
            " CASE WHEN next_after_lease IS NULL THEN {now} END,"
            " scheduled_for = COALESCE(next_after_lease, scheduled_for),"
            " attempts = CASE WHEN next_after_lease IS NULL THEN attempts ELSE 0 END,"
            " last_error = CASE WHEN next_after_lease IS NULL THEN last_error END,"
            " snoozes = CASE WHEN next_after_lease IS NULL THEN snoozes END,"
            " {counted}, jitter_offset_ms = CASE WHEN next_after_lease IS NULL"
            " THEN jitter_offset_ms END,"
            " next_after_lease = NULL, leased_until = NULL" + fence,
            window=sql.SQL(DELIVERED_KEEPS_WINDOW),
        )
        self.reschedule = q(
            "UPDATE {t} SET {window}, scheduled_for = COALESCE(next_after_lease, %(next)s),"
            " attempts = 0, {counted}, jitter_offset_ms = CASE WHEN next_after_lease IS NULL"
            " THEN %(offset)s::int8 END,"
            " leased_until = NULL, last_error = NULL, next_after_lease = NULL, snoozes = NULL"
            + fence,
            window=sql.SQL(rescheduled_keeps_window("%(next)s")),
        )
        self.mark_failed = q(
            "UPDATE {t} SET leased_until = {deadline}, last_error = %(error)s" + fence
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
        self.replay = q(
            "UPDATE {t} SET scheduled_for = %(at)s, {replayed}, attempts = 0,"
            " leased_until = NULL, last_error = NULL, paused = FALSE, dead_lettered_at = NULL,"
            " next_after_lease = NULL WHERE schedule_id = %(id)s"
        )
        # a change in place (ensure, update, reschedule, run now): every column but the
        # id, as the plan computed it, on the row locked in the same transaction
        self.write_row = q(
            "UPDATE {t} SET {sets} WHERE schedule_id = %(schedule_id)s",
            sets=sql.SQL(", ").join(
                sql.SQL("{} = {}").format(
                    sql.Identifier(c.name),
                    sql.SQL("{}::jsonb" if c.kind is ColumnKind.JSON else "{}").format(
                        sql.Placeholder(c.name)
                    ),
                )
                for c in COLUMNS
                if c.name != "schedule_id"
            ),
        )
        # names of a group: the prefix compared byte for byte (left(), not LIKE, whose
        # wildcards a name may hold, and not a range, which the collation would decide)
        self.list_named = q(
            "SELECT {cols} FROM {t} WHERE name IS NOT NULL AND {not_terminal}"
            ' AND left(name, %(length)s) = %(prefix)s ORDER BY name COLLATE "C"'
        )
        self.lock_named = self.list_named + q(" FOR UPDATE")
        self.import_rows = _import_rows(t)


# -- upkeep: listing by id, replay, stats, prune (each count's WHERE repeats a partial
# index's condition, so the planner counts on that index)


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
        "UPDATE {t} SET scheduled_for = %(now)s, {replayed}, attempts = 0,"
        " leased_until = NULL, last_error = NULL, paused = FALSE, dead_lettered_at = NULL"
        " WHERE schedule_id = ANY(%(ids)s) AND dead_lettered_at IS NOT NULL"
    ).format(t=sql.Identifier(table), replayed=sql.SQL(REPLAYED))


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
    ``%(cut)s``, ``%(n)s`` rows per delete. The delete repeats the condition outside
    its subquery, so a row another transaction changed meanwhile is kept."""
    names = {"t": sql.Identifier(table), "c": sql.Identifier(column)}
    where: LiteralString = "{c} IS NOT NULL AND {c} < %(cut)s"
    count = sql.SQL("SELECT count(*) FROM {t} WHERE " + where).format(**names)
    delete = sql.SQL(
        "DELETE FROM {t} WHERE schedule_id IN (SELECT schedule_id FROM {t} WHERE "
        + where
        + " LIMIT %(n)s) AND "
        + where
    ).format(**names)
    return count, delete
