"""Every SQL statement of the MySQL store, built once per table. With no ``UPDATE ...
RETURNING``, a claim locks the due rows (``claim_fresh``, ``claim_expired``), leases
the first ``batch_size`` (``lease``) and reselects them (``leased``)."""

from __future__ import annotations

from ..columns import COLUMN_NAMES, SELECT_LIST
from ..sql.statements import INSERT_COLUMNS, NOT_TERMINAL, SharedStatements


class Statements(SharedStatements):
    """Every statement of one store (the SQL base's names, and the claim's)."""

    _prune_delete = "DELETE FROM {t} WHERE {w} ORDER BY {c} LIMIT %(n)s"

    def __init__(self, table: str) -> None:
        t = f"`{table}`"
        cols = SELECT_LIST
        super().__init__(
            lambda text: text.format(
                t=t,
                cols=cols,
                now="%(now)s",
                deadline="%(until)s",
                not_terminal=NOT_TERMINAL,
                regexp="REGEXP",
                in_ids="IN %(ids)s",
                int8="",
                jsonb="",
            )
        )
        values = ", ".join(f"%({name})s" for name in INSERT_COLUMNS)
        self.insert = (
            f"INSERT INTO {t} ({', '.join(INSERT_COLUMNS)}, max_attempts, created_at)"
            f" VALUES ({values}, %(max_attempts)s, %(now)s)"
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
        # a group's names: the prefix compared byte for byte (not LIKE, whose wildcards
        # a name may hold, and not the collation, which pads spaces)
        self.list_named = (
            f"SELECT {cols} FROM {t} WHERE name IS NOT NULL AND {NOT_TERMINAL}"
            " AND CAST(LEFT(name, %(length)s) AS BINARY) = CAST(%(prefix)s AS BINARY)"
            " ORDER BY CAST(name AS BINARY)"
        )
        self.lock_named = self.list_named + " FOR UPDATE"
        self.stats = _stats(t)


def _stats(t: str) -> str:
    """One row: fresh, leased, paused, delivered, cancelled, dead-lettered, due fresh,
    oldest fresh, due reclaimable, oldest reclaimable, in backoff, in flight."""
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
