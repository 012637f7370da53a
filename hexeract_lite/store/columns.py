"""The column registry: every column of the scheduler table, said once (a new column:
one entry in :data:`COLUMNS`, one upgrade step per dialect).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "POLICY_COLUMNS",
    "SELECT_LIST",
    "Column",
    "ColumnKind",
    "columns_of_kind",
]


class ColumnKind(enum.Enum):
    """What a column holds, which decides how each dialect encodes it."""

    ID = "id"
    """A UUID: 16 raw bytes in SQLite, ``UUID`` in PostgreSQL."""
    TEXT = "text"
    """Text (``VARCHAR`` or ``TEXT``)."""
    JSON = "json"
    """JSON text in SQLite, ``JSONB`` in PostgreSQL."""
    INSTANT = "instant"
    """An instant: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` text in SQLite, ``TIMESTAMPTZ`` in PostgreSQL."""
    INT = "int"
    """A 32-bit integer."""
    BIGINT = "bigint"
    """A 64-bit integer: ``INTEGER`` in SQLite, ``BIGINT`` in PostgreSQL."""
    BOOL = "bool"
    """A flag: ``INTEGER`` 0/1 in SQLite, ``BOOLEAN`` in PostgreSQL."""


class Column(NamedTuple):
    """One column: its name, what it holds, whether it is required, its SQLite and
    PostgreSQL declarations after the name, and whether the reference's table has it
    (False: hexeract_lite's own, added by an upgrade)."""

    name: str
    kind: ColumnKind
    required: bool
    sqlite: str
    postgres: str
    reference: bool = True


_K = ColumnKind

COLUMNS: tuple[Column, ...] = (
    Column("schedule_id", _K.ID, True, "BLOB PRIMARY KEY NOT NULL", "UUID NOT NULL PRIMARY KEY"),
    Column("event_type", _K.TEXT, True, "TEXT NOT NULL", "VARCHAR(64) NOT NULL"),
    Column("payload", _K.JSON, True, "TEXT NOT NULL", "JSONB NOT NULL"),
    Column("trigger_kind", _K.TEXT, True, "TEXT NOT NULL", "VARCHAR(16) NOT NULL"),
    Column("cron_expr", _K.TEXT, False, "TEXT", "TEXT"),
    Column("scheduled_for", _K.INSTANT, True, "TEXT NOT NULL", "TIMESTAMPTZ NOT NULL"),
    Column("target_kind", _K.TEXT, True, "TEXT NOT NULL", "VARCHAR(16) NOT NULL"),
    Column("target_routing_key", _K.TEXT, False, "TEXT", "TEXT"),
    Column("attempts", _K.INT, True, "INTEGER NOT NULL DEFAULT 0", "INTEGER NOT NULL DEFAULT 0"),
    Column("max_attempts", _K.INT, True, "INTEGER NOT NULL", "INTEGER NOT NULL"),
    Column("leased_until", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ"),
    Column("paused", _K.BOOL, True, "INTEGER NOT NULL DEFAULT 0", "BOOLEAN NOT NULL DEFAULT FALSE"),
    Column("last_error", _K.TEXT, False, "TEXT", "TEXT"),
    Column(
        "created_at",
        _K.INSTANT,
        True,
        "TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        "TIMESTAMPTZ NOT NULL DEFAULT now()",
    ),
    Column("delivered_at", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ"),
    Column("cancelled_at", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ"),
    Column("dead_lettered_at", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ"),
    # hexeract_lite's own columns (nullable, so the reference's statements still work):
    # the schedule's name, unique among rows that have one (a unique index, not a
    # column constraint, so that an upgrade can add it)
    Column("name", _K.TEXT, False, "TEXT", "TEXT", reference=False),
    # the next firing, set by a change made while a firing was in flight: the fenced
    # acknowledgement of that firing moves the schedule here instead
    Column("next_after_lease", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ", reference=False),
    # the schedule's misfire grace in milliseconds, NULL for none
    Column("misfire_grace_ms", _K.BIGINT, False, "INTEGER", "BIGINT", reference=False),
    # schedule policies: no firing after end_at; complete after max_firings deliveries
    # (firings counts them); each firing moved later by jitter_offset_ms, drawn below
    # jitter_ms (scheduled_for is the rule's instant plus the offset); what missed
    # firings do (catch_up "skip" or "all", up to catch_up_limit); a backfill window's
    # end; the note of a pause
    Column("end_at", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ", reference=False),
    Column("max_firings", _K.BIGINT, False, "INTEGER", "BIGINT", reference=False),
    Column("firings", _K.BIGINT, False, "INTEGER", "BIGINT", reference=False),
    Column("jitter_ms", _K.BIGINT, False, "INTEGER", "BIGINT", reference=False),
    Column("jitter_offset_ms", _K.BIGINT, False, "INTEGER", "BIGINT", reference=False),
    Column("catch_up", _K.TEXT, False, "TEXT", "TEXT", reference=False),
    Column("catch_up_limit", _K.INT, False, "INTEGER", "INTEGER", reference=False),
    Column("backfill_until", _K.INSTANT, False, "TEXT", "TIMESTAMPTZ", reference=False),
    Column("pause_note", _K.TEXT, False, "TEXT", "TEXT", reference=False),
    # long handlers: the snoozes of the current occurrence; a stop asked of the
    # dispatch in flight ("abort" or "cancel")
    Column("snoozes", _K.INT, False, "INTEGER", "INTEGER", reference=False),
    Column("abort_requested", _K.TEXT, False, "TEXT", "TEXT", reference=False),
)
"""The reference's columns, in its order, then hexeract_lite's own (``reference`` False)."""

COLUMN_NAMES: tuple[str, ...] = tuple(column.name for column in COLUMNS)

POLICY_COLUMNS = COLUMN_NAMES[
    COLUMN_NAMES.index("end_at") : COLUMN_NAMES.index("abort_requested") + 1
]
"""The nullable columns of schedule policies and long handlers (``end_at`` through
``abort_requested``), which one upgrade step adds in each dialect."""

SELECT_LIST = ", ".join(COLUMN_NAMES)
"""Every column, in registry order, as the SQL stores' ``SELECT`` lists them."""


def columns_of_kind(*kinds: ColumnKind, required: bool | None = None) -> tuple[str, ...]:
    """The names of the columns of the given kinds (and requiredness, when given), in order."""
    return tuple(
        c.name for c in COLUMNS if c.kind in kinds and (required is None or c.required is required)
    )
