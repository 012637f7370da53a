"""The scheduled-reminder example, run as a user runs it: a real process, a real clock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "06_scheduled_reminder.py"

pytest.importorskip("hexeract_lite.store.sqlite", reason="the SQLite store has not landed yet")


def run_example(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )


def pending_rows(db: Path) -> list[object]:
    from hexeract_lite import SqliteScheduleStore

    with SqliteScheduleStore.open(db, create=False, table="reminder_demo") as store:
        return list(store.list_pending())


def test_the_reminder_example_runs_to_success(tmp_path: Path) -> None:
    db = tmp_path / "reminders.db"
    result = run_example("--db", str(db))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for step in (
        f"database: {db}",
        "scheduled one-shot",
        "scheduled recurring",
        "<- reminders.once #1",
        "<- reminders.recurring #2",
        "inspect recurring: status pending",
        "cancelled recurring: status cancelled",
        "no firing after cancel",
        "one-shot: delivered",
        "done: 3 distinct reminders",
    ):
        assert step in out, f"missing {step!r} in:\n{out}"
    assert result.stderr == "", result.stderr
    assert pending_rows(db) == [], "the example leaves nothing pending behind"


def test_the_reminder_example_fails_loudly_and_cleans_up(tmp_path: Path) -> None:
    db = tmp_path / "reminders.db"
    result = run_example("--db", str(db), "--timeout", "0.3")
    assert result.returncode == 1
    assert "FAILED: timed out waiting for the one-shot and two recurring reminders" in result.stderr
    assert pending_rows(db) == []
