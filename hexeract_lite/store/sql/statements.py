"""The statements the PostgreSQL and MySQL dialects write alike, said once.

Each text is composed by the dialect's ``q``: ``{t}`` the table, ``{cols}`` the select
list, ``{now}`` the instant now, ``{deadline}`` a retry deadline, ``{not_terminal}`` a
live row's condition; parameters are ``%(name)s``, as both drivers take them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, LiteralString

__all__ = ["SharedStatements"]

_FENCE: LiteralString = (
    " WHERE schedule_id = %(id)s AND leased_until = %(lease)s AND {not_terminal}"
)


class SharedStatements:
    """The shared statements, as attributes of the dialect's statements."""

    def __init__(self, q: Callable[[LiteralString], Any]) -> None:
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
