"""The statements the PostgreSQL and MySQL dialects write alike, said once.

Each text is composed by the dialect's ``q``: ``{t}`` the table, ``{cols}`` the select
list, ``{now}`` the instant now, ``{deadline}`` a retry deadline, ``{not_terminal}`` a
live row's condition, ``{regexp}`` the regex operator, ``{in_ids}`` the test of a list
bound as ``ids``, ``{int8}`` and ``{jsonb}`` the casts a bound value may need;
parameters are ``%(name)s``, as both drivers take them. MySQL evaluates an UPDATE's
assignments left to right: every statement that reads ``next_after_lease`` clears it last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, LiteralString

from ...snapshot import ScheduleStatus
from ..columns import COLUMN_NAMES
from ..listing import postgres_status_where
from ..schema import REPLAYED, counted

__all__ = ["INSERT_COLUMNS", "NOT_TERMINAL", "SharedStatements"]

NOT_TERMINAL: LiteralString = (
    "delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL"
)

INSERT_COLUMNS = (
    "schedule_id",
    "event_type",
    "payload",
    "trigger_kind",
    "cron_expr",
    "scheduled_for",
    "target_kind",
    "target_routing_key",
    "name",
    "misfire_grace_ms",
    "end_at",
    "max_firings",
    "jitter_ms",
    "jitter_offset_ms",
    "catch_up",
    "catch_up_limit",
)
"""The columns an insert binds per message (``max_attempts`` and ``now`` once)."""

_FENCE: LiteralString = (
    " WHERE schedule_id = %(id)s AND leased_until = %(lease)s AND {not_terminal}"
)
_COUNTED: LiteralString = counted("%(counted)s")
_JSONB = {"payload": "{jsonb}"}
_REPLAYED: LiteralString = (
    "UPDATE {t} SET " + REPLAYED + ", attempts = 0, leased_until = NULL, last_error = NULL,"
    " paused = FALSE, dead_lettered_at = NULL, next_after_lease = NULL, scheduled_for = "
)


class SharedStatements:
    """The shared statements, as attributes of the dialect's statements."""

    _prune_delete: LiteralString
    """The dialect's delete of ``%(n)s`` rows where ``{w}`` holds, ``{c}`` the column."""

    def __init__(self, q: Callable[[LiteralString], Any]) -> None:
        self._q = q
        self.mark_dead_lettered = q(
            "UPDATE {t} SET dead_lettered_at = {now}, last_error = %(error)s,"
            " leased_until = NULL" + _FENCE
        )
        self.release = q(
            "UPDATE {t} SET attempts = GREATEST(attempts - 1, 0), leased_until = NULL" + _FENCE
        )
        self.extend_lease = q("UPDATE {t} SET leased_until = %(until)s" + _FENCE)
        self.snooze = q(
            "UPDATE {t} SET attempts = GREATEST(attempts - 1, 0),"
            " snoozes = COALESCE(snoozes, 0) + 1, leased_until = {deadline}" + _FENCE
        )
        self.cancel_leased = q("UPDATE {t} SET cancelled_at = {now}, leased_until = NULL" + _FENCE)
        # a change made during the lease (next_after_lease) sets the next firing: the
        # acknowledgement of the firing in flight moves the schedule there instead;
        # backfill_until is kept while the next firing is inside the window (assigned
        # first: MySQL reads the values already assigned)
        self.mark_delivered = q(
            "UPDATE {t} SET backfill_until = CASE WHEN next_after_lease <= backfill_until"
            " THEN backfill_until END,"
            " delivered_at = CASE WHEN next_after_lease IS NULL THEN {now} END,"
            " scheduled_for = COALESCE(next_after_lease, scheduled_for),"
            " attempts = CASE WHEN next_after_lease IS NULL THEN attempts ELSE 0 END,"
            " last_error = CASE WHEN next_after_lease IS NULL THEN last_error END,"
            " snoozes = CASE WHEN next_after_lease IS NULL THEN snoozes END,"
            " " + _COUNTED + ", jitter_offset_ms = CASE WHEN next_after_lease IS NULL"
            " THEN jitter_offset_ms END, leased_until = NULL, next_after_lease = NULL" + _FENCE
        )
        self.reschedule = q(
            "UPDATE {t} SET backfill_until = CASE WHEN COALESCE(next_after_lease, %(next)s)"
            " <= backfill_until THEN backfill_until END,"
            " scheduled_for = COALESCE(next_after_lease, %(next)s),"
            " attempts = 0, " + _COUNTED + ", jitter_offset_ms = CASE WHEN next_after_lease"
            " IS NULL THEN %(offset)s{int8} END, last_error = NULL, leased_until = NULL,"
            " next_after_lease = NULL, snoozes = NULL" + _FENCE
        )
        self.mark_failed = q(
            "UPDATE {t} SET last_error = %(error)s, leased_until = {deadline}" + _FENCE
        )
        self.request_abort = q(
            "UPDATE {t} SET abort_requested = %(how)s WHERE schedule_id = %(id)s"
            " AND {not_terminal} AND leased_until IS NOT NULL"
        )
        self.abort_request = q("SELECT abort_requested FROM {t} WHERE schedule_id = %(id)s")
        self.exists = q("SELECT 1 FROM {t} WHERE schedule_id = %(id)s")
        self.cancel = q(
            "UPDATE {t} SET cancelled_at = {now}, leased_until = NULL"
            " WHERE schedule_id = %(id)s AND {not_terminal}"
        )
        self.set_paused = q(
            "UPDATE {t} SET paused = %(paused)s, pause_note = NULL"
            " WHERE schedule_id = %(id)s AND {not_terminal} AND paused <> %(paused)s"
        )
        self.replay = q(_REPLAYED + "%(at)s WHERE schedule_id = %(id)s")
        self.replay_many = q(
            _REPLAYED + "%(now)s WHERE schedule_id {in_ids} AND dead_lettered_at IS NOT NULL"
        )
        # a change in place (ensure, update, reschedule, run now): every column but the
        # id, as the plan computed it, on the row locked in the same transaction
        self.write_row = q(
            "UPDATE {t} SET "
            + ", ".join(f"{n} = %({n})s" + _JSONB.get(n, "") for n in COLUMN_NAMES[1:])
            + " WHERE schedule_id = %(schedule_id)s"
        )
        self.select_one = q("SELECT {cols} FROM {t} WHERE schedule_id = %(id)s")
        self.list_pending = q(
            "SELECT {cols} FROM {t} WHERE {not_terminal}"
            " ORDER BY scheduled_for, schedule_id LIMIT %(limit)s"
        )
        self.list_dead_letter = q(
            "SELECT {cols} FROM {t} WHERE dead_lettered_at IS NOT NULL"
            " ORDER BY dead_lettered_at DESC, schedule_id LIMIT %(limit)s"
        )
        # export pages walk the primary key
        self.export_first = q("SELECT {cols} FROM {t} ORDER BY schedule_id LIMIT %(limit)s")
        self.export_after = q(
            "SELECT {cols} FROM {t} WHERE schedule_id > %(after)s"
            " ORDER BY schedule_id LIMIT %(limit)s"
        )

    def listing(self, status: ScheduleStatus | None, glob: bool, after: bool, name: bool) -> Any:
        """A page of the listing in schedule id order (``regex``, ``name_regex``,
        ``after``, ``limit`` bound as the flags say); the status condition is constant text."""
        where = [postgres_status_where(status)]
        if glob:
            where.append("event_type {regexp} %(regex)s")
        if name:
            where.append("name {regexp} %(name_regex)s")
        if after:
            where.append("schedule_id > %(after)s")
        return self._q(
            "SELECT {cols} FROM {t} WHERE "
            + " AND ".join(where)
            + " ORDER BY schedule_id LIMIT %(limit)s"
        )

    def prune(self, column: str) -> tuple[Any, Any]:
        """(count, delete ``%(n)s``) of the rows whose ``column`` (an end instant) is
        before ``%(cut)s``."""
        where = f"{column} IS NOT NULL AND {column} < %(cut)s"
        delete = self._prune_delete.replace("{w}", where).replace("{c}", column)
        return self._q("SELECT count(*) FROM {t} WHERE " + where), self._q(delete)
