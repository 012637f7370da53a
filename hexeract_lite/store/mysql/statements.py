"""Every SQL statement of the MySQL store, built once per table.

Parameters are PyMySQL's ``%(name)s``; instants are bound from the store's clock
(SQL reads no clock). MySQL evaluates an UPDATE's assignments left to right, each
seeing the ones before it: every statement that reads ``next_after_lease`` clears it
last. The claim is three statements in one transaction (MySQL has no ``UPDATE ...
RETURNING``): :attr:`Statements.claim_fresh` and :attr:`Statements.claim_expired`
select and lock (``FOR UPDATE SKIP LOCKED``) due rows on the generated columns'
indexes, :attr:`Statements.lease` leases the first ``batch_size`` and consumes an
attempt, :attr:`Statements.leased` reselects them.
"""

from __future__ import annotations

from ...snapshot import ScheduleStatus
from ..columns import COLUMN_NAMES, SELECT_LIST
from ..listing import postgres_status_where
from ..schema import REPLAYED, counted
from ..sql.backfill import DELIVERED_KEEPS_WINDOW, rescheduled_keeps_window
from ..sql.statements import SharedStatements

__all__ = [
    "Statements",
    "list_statement",
    "prune_statements",
    "replay_statement",
    "stats_statement",
]

NOT_TERMINAL = "delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL"


_COUNTED = counted("%(counted)s")


class Statements(SharedStatements):
    """Every statement of one store (the SQL base's names, and the claim's)."""

    def __init__(self, table: str) -> None:
        t = f"`{table}`"
        cols = SELECT_LIST
        fence = f" WHERE schedule_id = %(id)s AND leased_until = %(lease)s AND {NOT_TERMINAL}"
        super().__init__(
            lambda text: text.format(
                t=t, cols=cols, now="%(now)s", deadline="%(until)s", not_terminal=NOT_TERMINAL
            )
        )
        self.insert = (
            f"INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
            " scheduled_for, target_kind, target_routing_key, max_attempts, created_at, name,"
            " misfire_grace_ms, end_at, max_firings, jitter_ms, jitter_offset_ms, catch_up,"
            " catch_up_limit) VALUES (%(id)s, %(event_type)s, %(payload)s, %(trigger_kind)s,"
            " %(cron_expr)s, %(scheduled_for)s, %(target_kind)s, %(routing_key)s,"
            " %(max_attempts)s, %(now)s, %(name)s, %(grace)s, %(end_at)s, %(max_firings)s,"
            " %(jitter_ms)s, %(jitter_offset_ms)s, %(catch_up)s, %(catch_up_limit)s)"
        )
        self.import_row = (
            f"INSERT INTO {t} ({cols}) VALUES ("
            + ", ".join(f"%({name})s" for name in COLUMN_NAMES)
            + ")"
        )
        self.existing = f"SELECT schedule_id FROM {t} WHERE schedule_id IN %(ids)s FOR UPDATE"
        self.claim_fresh = (
            f"SELECT schedule_id, scheduled_for FROM {t} WHERE hxl_due <= %(now)s"
            " AND attempts < max_attempts ORDER BY hxl_due, schedule_id"
            " LIMIT %(batch_size)s FOR UPDATE SKIP LOCKED"
        )
        self.claim_expired = (
            f"SELECT schedule_id, scheduled_for FROM {t} WHERE hxl_reclaim <= %(now)s"
            " AND attempts < max_attempts ORDER BY scheduled_for, schedule_id"
            " LIMIT %(batch_size)s FOR UPDATE SKIP LOCKED"
        )
        self.lease = (
            f"UPDATE {t} SET attempts = attempts + 1, leased_until = %(until)s,"
            " abort_requested = NULL WHERE schedule_id IN %(ids)s"
        )
        self.leased = f"SELECT {cols} FROM {t} WHERE schedule_id IN %(ids)s"
        self.mark_delivered = (
            f"UPDATE {t} SET {DELIVERED_KEEPS_WINDOW},"
            " delivered_at = CASE WHEN next_after_lease IS NULL THEN %(now)s END,"
            " scheduled_for = COALESCE(next_after_lease, scheduled_for),"
            " attempts = CASE WHEN next_after_lease IS NULL THEN attempts ELSE 0 END,"
            " last_error = CASE WHEN next_after_lease IS NULL THEN last_error END,"
            " snoozes = CASE WHEN next_after_lease IS NULL THEN snoozes END,"
            f" {_COUNTED}, jitter_offset_ms = CASE WHEN next_after_lease IS NULL"
            " THEN jitter_offset_ms END, leased_until = NULL, next_after_lease = NULL" + fence
        )
        self.reschedule = (
            f"UPDATE {t} SET {rescheduled_keeps_window('%(next)s')},"
            " scheduled_for = COALESCE(next_after_lease, %(next)s),"
            f" attempts = 0, {_COUNTED}, jitter_offset_ms = CASE WHEN next_after_lease IS NULL"
            " THEN %(offset)s END,"
            " last_error = NULL, leased_until = NULL, next_after_lease = NULL, snoozes = NULL"
            + fence
        )
        self.mark_failed = (
            f"UPDATE {t} SET last_error = %(error)s, leased_until = %(until)s" + fence
        )
        self.sweep = (
            f"UPDATE {t} SET dead_lettered_at = %(now)s, last_error ="
            " CASE WHEN last_error IS NULL THEN %(error)s ELSE CONCAT(%(kept)s, last_error) END,"
            " leased_until = NULL WHERE hxl_exhausted <= %(now)s"
        )
        self.sweep_probe = f"SELECT 1 FROM {t} WHERE hxl_exhausted <= %(now)s LIMIT 1"
        self.next_wakeup = (
            f"SELECT (SELECT MIN(hxl_due) FROM {t}), (SELECT MIN(hxl_reclaim) FROM {t})"
        )
        self.lock_row = f"SELECT {cols} FROM {t} WHERE schedule_id = %(id)s FOR UPDATE"
        self.replay = (
            f"UPDATE {t} SET scheduled_for = %(at)s, {REPLAYED}, attempts = 0, leased_until = NULL,"
            " last_error = NULL, paused = 0, dead_lettered_at = NULL, next_after_lease = NULL"
            " WHERE schedule_id = %(id)s"
        )
        self.write_row = (
            f"UPDATE {t} SET "
            + ", ".join(f"{name} = %({name})s" for name in COLUMN_NAMES[1:])
            + " WHERE schedule_id = %(schedule_id)s"
        )
        # a group's names: the prefix compared byte for byte (not LIKE, whose wildcards
        # a name may hold, and not the collation, which pads spaces)
        self.list_named = (
            f"SELECT {cols} FROM {t} WHERE name IS NOT NULL AND {NOT_TERMINAL}"
            " AND CAST(LEFT(name, %(length)s) AS BINARY) = CAST(%(prefix)s AS BINARY)"
            " ORDER BY CAST(name AS BINARY)"
        )
        self.lock_named = self.list_named + " FOR UPDATE"


def list_statement(
    table: str, status: ScheduleStatus | None, glob: bool, after: bool, name: bool
) -> str:
    """A page of the listing in schedule id order (``regex``, ``name_regex``,
    ``after``, ``limit`` bound as the flags say)."""
    where = [postgres_status_where(status)]
    if glob:
        where.append("event_type REGEXP %(regex)s")
    if name:
        where.append("name REGEXP %(name_regex)s")
    if after:
        where.append("schedule_id > %(after)s")
    return (
        f"SELECT {SELECT_LIST} FROM `{table}` WHERE {' AND '.join(where)}"
        " ORDER BY schedule_id LIMIT %(limit)s"
    )


def replay_statement(table: str) -> str:
    """Replay the rows of ``ids`` still dead-lettered, at ``now``."""
    return (
        f"UPDATE `{table}` SET scheduled_for = %(now)s, {REPLAYED}, attempts = 0,"
        " leased_until = NULL, last_error = NULL, paused = 0, dead_lettered_at = NULL"
        " WHERE schedule_id IN %(ids)s AND dead_lettered_at IS NOT NULL"
    )


def stats_statement(table: str) -> str:
    """One row: fresh, leased, paused, delivered, cancelled, dead-lettered, due fresh,
    oldest fresh, due reclaimable, oldest reclaimable, in backoff, in flight."""
    t = f"`{table}`"
    counts = (
        "count(*) FROM {t} WHERE hxl_due IS NOT NULL",
        "count(*) FROM {t} WHERE hxl_reclaim IS NOT NULL",
        "count(*) FROM {t} WHERE " + NOT_TERMINAL + " AND paused = 1",
        "count(*) FROM {t} WHERE delivered_at IS NOT NULL",
        "count(*) FROM {t} WHERE cancelled_at IS NOT NULL",
        "count(*) FROM {t} WHERE dead_lettered_at IS NOT NULL",
        "count(*) FROM {t} WHERE hxl_due <= %(now)s",
        "min(hxl_due) FROM {t} WHERE hxl_due <= %(now)s",
        "count(*) FROM {t} WHERE hxl_reclaim <= %(now)s",
        "min(scheduled_for) FROM {t} WHERE hxl_reclaim <= %(now)s",
        "count(*) FROM {t} WHERE hxl_reclaim IS NOT NULL AND leased_until > %(now)s"
        " AND last_error IS NOT NULL",
        "count(*) FROM {t} WHERE hxl_reclaim IS NOT NULL AND leased_until > %(now)s"
        " AND last_error IS NULL",
    )
    return "SELECT " + ", ".join(f"(SELECT {c.format(t=t)})" for c in counts)


def prune_statements(table: str, column: str) -> tuple[str, str]:
    """(count, delete ``n``) of the rows whose ``column`` (an end instant) is before
    ``cut``, found on the column's index."""
    where = f"{column} IS NOT NULL AND {column} < %(cut)s"
    count = f"SELECT count(*) FROM `{table}` WHERE {where}"
    delete = f"DELETE FROM `{table}` WHERE {where} ORDER BY {column} LIMIT %(n)s"
    return count, delete
