"""Named schedules across processes: an app that registers its recurring schedules at every
start, run as ten processes (six at once), leaves exactly three rows; its second version
(one rule changed, one added, one removed) reconciles to exactly the new set, and
schedules added from the shell (unnamed, or named in another group) are left alone. On
SQLite and on PostgreSQL, with real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite import ScheduleStatus
from hexeract_lite.connect import open_store
from hexeract_lite.names import name_id
from hexeract_lite.snapshot import MalformedSchedule, ScheduleSnapshot

from . import pg

ROOT = Path(__file__).resolve().parents[1]
TABLE = "scheduled_messages"
TIMEOUT = 120

APP = """
import json, sys
from hexeract_lite import SchedulerControl
from hexeract_lite.connect import open_store

conn, table, version = sys.argv[1], sys.argv[2], sys.argv[3]
rules = {
    "1": {"app.backup": "0 3 * * *", "app.sync": "*/15 * * * *", "app.digest": "0 9 * * 1"},
    "2": {"app.backup": "0 4 * * *", "app.sync": "*/15 * * * *", "app.cleanup": "0 2 * * *"},
}[version]
with open_store(conn, table=table, create=True) as store:
    control = SchedulerControl(store)
    declared = [
        control.declare(name, cron=rule, event_type=name, payload={"v": 1})
        for name, rule in rules.items()
    ]
    report = control.reconcile("app", declared)
print(json.dumps(report.to_json_dict()))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's code, not an installed one
    return env


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield str(tmp_path / "app.db"), TABLE
        return
    url = pg.require_server()
    table = pg.unique_table("named")
    try:
        yield url, table
    finally:
        pg.drop_table(url, table)


def _start(conn: str, table: str, version: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APP, conn, table, version],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def _finish_all(procs: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Each process's report; every one is waited for (its pipes closed) before a failed
    one is reported."""
    done = [proc.communicate(timeout=TIMEOUT) for proc in procs]
    for proc, (_, err) in zip(procs, done, strict=True):
        assert proc.returncode == 0, err
    return [json.loads(out) for out, _ in done]


def _snapshots(listed: Sequence[ScheduleSnapshot | MalformedSchedule]) -> list[ScheduleSnapshot]:
    assert all(isinstance(s, ScheduleSnapshot) for s in listed), listed
    return [s for s in listed if isinstance(s, ScheduleSnapshot)]


def _cli(conn: str, table: str, *argv: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "hexeract_lite", "scheduler", *argv, "--conn", conn],
        capture_output=True,
        text=True,
        env={**_env(), "HEXERACT_SCHEDULER_TABLE": table},
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_ten_starts_three_rows_then_version_two_reconciles(where: tuple[str, str]) -> None:
    conn, table = where
    if conn.endswith(".db"):
        _finish(_start(conn, table, "1"))  # the file exists before the crowd arrives
        starts = 9
    else:
        starts = 10
    reports = _finish_all([_start(conn, table, "1") for _ in range(6)])
    reports += [_finish(_start(conn, table, "1")) for _ in range(starts - 6)]
    assert all(r["cancelled"] == [] for r in reports)
    with open_store(conn, table=table, create=False) as store:
        pending = _snapshots(store.list_pending(100))
    names = sorted(s.name for s in pending if s.name)
    assert names == ["app.backup", "app.digest", "app.sync"] and len(pending) == 3

    shell_unnamed = _cli(conn, table, "add", "--in", "1h", "--event-type", "shell.job").strip()
    _cli(conn, table, "add", "--name", "ops.report", "--cron", "0 8 * * *", "--event-type", "r")

    reports = _finish_all([_start(conn, table, "2") for _ in range(3)])
    assert sum(r["cancelled"] == ["app.digest"] for r in reports) == 1, reports
    ensured = [r["ensured"] for r in reports]
    assert all(e.keys() == {"app.backup", "app.sync", "app.cleanup"} for e in ensured)
    with open_store(conn, table=table, create=False) as store:
        pending = _snapshots(store.list_pending(100))
        by_name = {s.name: s for s in pending}
        assert set(by_name) == {"app.backup", "app.sync", "app.cleanup", "ops.report", None}
        assert len(pending) == 5
        assert str(by_name[None].schedule_id) == shell_unnamed, "the shell's schedule stays"
        backup = by_name["app.backup"]
        assert backup.trigger.expression == "0 4 * * *" and backup.scheduled_for.hour == 4
        gone = store.inspect(name_id("app.digest"))
        assert gone is not None and gone.status is ScheduleStatus.CANCELLED
