"""The SQLite store's run log: ``<table>_runs`` (schema version 7)."""

from __future__ import annotations

from ..._time import format_us
from ..sql.runs import RUN_COLUMNS, RunStatements
from . import codec

__all__ = ["RUNS_VERSION", "run_statements", "sweep_runs"]

RUNS_VERSION = 7
"""The first schema version with the runs table."""


def run_statements(table: str) -> RunStatements:
    """The run-log statements of ``table`` (already validated)."""
    return RunStatements(
        f"{table}_runs",
        ph="?",
        param=lambda name: f":{name}",
        hour="substr(finished, 1, 13) || ':00:00.000Z'",
        encode_id=codec.encode_id,
        encode_instant=codec.encode_instant,
        decode_id=codec.decode_id,
        decode_instant=codec.decode_instant,
        encode_us=format_us,
    )


def sweep_runs(table: str, sweepable: str) -> str:
    """The ``swept`` runs of the rows the sweep (WHERE ``sweepable``) is about to
    dead-letter, run before it in its transaction; binds ``now``, ``error``, ``host``
    and ``pid``."""
    return (
        f"INSERT INTO {table}_runs ({', '.join(RUN_COLUMNS)})"
        " SELECT schedule_id, scheduled_for, attempts, NULL, :now, 'swept',"
        " CAST(round((julianday(:now) - julianday(scheduled_for)) * 86400000.0) AS INTEGER),"
        f" NULL, :host, :pid, :error FROM {table} INDEXED BY idx_{table}_exhausted"
        f" WHERE {sweepable}"
    )
