"""The SQLite store's run log: ``<table>_runs`` (schema version 7; its instants integer
milliseconds since the Unix epoch from version 9, text before)."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..._time import EPOCH
from ..schema import sqlite_epoch_ms
from ..sql.runs import RUN_COLUMNS, RunStatements
from . import codec

__all__ = ["INTEGER_RUNS_VERSION", "RUNS_VERSION", "encode_ms", "run_statements", "sweep_runs"]

RUNS_VERSION = 7
"""The first schema version with the runs table."""
INTEGER_RUNS_VERSION = 9
"""The first schema version whose runs table keeps instants as integer milliseconds."""

_MS = timedelta(milliseconds=1)
_TEXT_HOUR = "substr(finished, 1, 13) || ':00:00.000Z'"


def encode_ms(instant: datetime) -> int:
    """``instant`` in integer milliseconds since the Unix epoch (as the run log keeps it)."""
    return (instant - EPOCH) // _MS


def _decode_ms(value: object) -> datetime:
    if type(value) is not int:
        raise ValueError(f"not an instant in milliseconds: {value!r:.60}")
    return EPOCH + value * _MS


def run_statements(table: str, version: int) -> RunStatements:
    """The run-log statements of ``table`` at schema ``version`` (text instants before
    :data:`INTEGER_RUNS_VERSION`, only ever read)."""
    text = version < INTEGER_RUNS_VERSION
    return RunStatements(
        f"{table}_runs",
        ph="?",
        param=lambda name: f":{name}",
        hour=_TEXT_HOUR if text else "finished - finished % 3600000",
        encode_id=codec.encode_id,
        encode_instant=codec.encode_instant if text else encode_ms,
        decode_id=codec.decode_id,
        decode_instant=codec.decode_instant if text else _decode_ms,
        ms_instants=not text,  # a text run log is only ever read
        decode_row_instant=codec.decode_instant,
    )


def sweep_runs(table: str, sweepable: str) -> str:
    """The ``swept`` runs of the rows the sweep is about to dead-letter (run before it)."""
    due_ms = sqlite_epoch_ms("scheduled_for")
    return (
        f"INSERT INTO {table}_runs ({', '.join(RUN_COLUMNS)})"
        f" SELECT schedule_id, {due_ms}, attempts, NULL, :now_ms, 'swept', :now_ms - {due_ms},"
        f" NULL, :host, :pid, :error FROM {table} INDEXED BY idx_{table}_exhausted"
        f" WHERE {sweepable}"
    )
