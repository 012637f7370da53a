"""The PostgreSQL store's run log: ``<table>_runs`` (schema version 6)."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import sql

from ..._time import to_utc_ms
from ..sql.runs import RUN_COLUMNS, RunStatements
from .codec import same
from .schema import quote_ident, runs_table_name

__all__ = ["RUNS_VERSION", "run_statements", "sweep_runs"]

RUNS_VERSION = 6
"""The first schema version with the runs table."""


def _decode_id(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _decode_instant(value: Any) -> Any:
    return to_utc_ms(value, "timestamp")


def run_statements(table: str) -> RunStatements:
    """The run-log statements of ``table`` (already validated)."""
    return RunStatements(
        quote_ident(runs_table_name(table)),
        hour="date_trunc('hour', finished AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'",
        encode_id=same,
        encode_instant=same,
        decode_id=_decode_id,
        decode_instant=_decode_instant,
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
