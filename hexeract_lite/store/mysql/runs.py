"""The MySQL store's run log: ``<table>_runs`` (schema version 2)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from ..sql.runs import RUN_COLUMNS, RunStatements
from . import codec

RUNS_VERSION = 2
"""The first schema version with the runs table."""


def runs_table_name(table: str) -> str:
    """``<table>_runs``, or a name of the table's hash when that passes MySQL's 64."""
    name = f"{table}_runs"
    if len(name) <= 64:
        return name
    return "hx_runs_" + hashlib.sha256(table.encode()).hexdigest()[:40]


def runs_ddl(table: str) -> str:
    """The runs table beside ``table`` (already validated); the reference never reads it."""
    t = runs_table_name(table)
    return (
        f"CREATE TABLE IF NOT EXISTS `{t}` (\n"
        "    run_id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n"
        "    schedule_id BINARY(16) NOT NULL,\n"
        "    scheduled_for DATETIME(6) NOT NULL,\n"
        "    attempt INT NOT NULL,\n"
        "    started DATETIME(6) NULL,\n"
        "    finished DATETIME(6) NOT NULL,\n"
        "    outcome VARCHAR(16) NOT NULL,\n"
        "    lag_ms BIGINT NOT NULL,\n"
        "    duration_ms DOUBLE NULL,\n"
        "    host VARCHAR(255) NOT NULL,\n"
        "    pid INT NOT NULL,\n"
        "    error TEXT NULL,\n"
        "    INDEX idx_runs_finished (finished),\n"
        "    INDEX idx_runs_schedule (schedule_id, finished)\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;\n"
    )


def _decode_instant(value: Any) -> datetime:
    decoded = codec._instant(value)
    assert decoded is not None
    return decoded


def run_statements(table: str) -> RunStatements:
    """The run-log statements of ``table`` (already validated). MariaDB takes no LIMIT in
    an IN subquery: its prune deletes with DELETE's own LIMIT."""
    runs = f"`{runs_table_name(table)}`"
    statements = RunStatements(
        runs,
        hour="CAST(TIMESTAMPADD(HOUR, TIMESTAMPDIFF(HOUR, TIMESTAMP('1970-01-01'), finished),"
        " TIMESTAMP('1970-01-01')) AS DATETIME(6))",
        encode_id=codec.encode_id,
        encode_instant=codec.encode_instant,
        decode_id=codec._id,
        decode_instant=_decode_instant,
    )
    statements.prune_delete = (
        f"DELETE FROM {runs} WHERE finished < %(cut)s ORDER BY finished LIMIT %(n)s"
    )
    return statements


def sweep_runs(table: str) -> str:
    """The ``swept`` runs of the rows the sweep is about to dead-letter, run before it in
    its transaction; binds ``now``, ``error``, ``host`` and ``pid``."""
    return (
        f"INSERT INTO `{runs_table_name(table)}` ({', '.join(RUN_COLUMNS)})"
        " SELECT schedule_id, scheduled_for, attempts, NULL, %(now)s, 'swept',"
        " TIMESTAMPDIFF(MICROSECOND, scheduled_for, %(now)s) DIV 1000,"
        f" NULL, %(host)s, %(pid)s, %(error)s FROM `{table}` WHERE hxl_exhausted <= %(now)s"
    )
