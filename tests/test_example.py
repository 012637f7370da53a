"""The scheduled-reminder example, run as a user runs it: a real process, a real clock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hexeract_lite import (
    ScheduledMessage,
    Target,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests import background

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "06_scheduled_reminder.py"

pytest.importorskip("hexeract_lite.store.sqlite", reason="the SQLite store has not landed yet")


def run_example(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        background.command([sys.executable, "-W", "error", str(EXAMPLE), *args]),
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


def _reminder_run(*args: str) -> Callable[[Path], tuple[subprocess.CompletedProcess[str], Path]]:
    def run(folder: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
        db = folder / "reminders.db"
        return run_example("--db", str(db), *args), db

    return run


RUNS = {
    "test_the_reminder_example_runs_to_success": _reminder_run(),
    "test_the_reminder_example_fails_loudly_and_cleans_up": _reminder_run("--timeout", "0.3"),
}
"""The example's runs, by the test that checks each (they start with the session:
:mod:`tests.background`)."""


def background_runs(items: list[pytest.Item]) -> dict[str, Callable[[Path], object]]:
    names = {item.originalname for item in items if isinstance(item, pytest.Function)}
    return {f"example:{name}": RUNS[name] for name in names & RUNS.keys()}


def test_the_reminder_example_runs_to_success(tmp_path: Path) -> None:
    name = "test_the_reminder_example_runs_to_success"
    result, db = background.result(f"example:{name}", RUNS[name], tmp_path)
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
    name = "test_the_reminder_example_fails_loudly_and_cleans_up"
    result, db = background.result(f"example:{name}", RUNS[name], tmp_path)
    assert result.returncode == 1
    assert "FAILED: timed out waiting for the one-shot and two recurring reminders" in result.stderr
    assert pending_rows(db) == []


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


def test_the_reminder_demo_leaves_the_applications_schedules_alone(tmp_path: Path) -> None:
    """scripts/demo runs the example on the default database, where the README's quick start
    keeps its schedules: the demo keeps to a table of its own and leaves them unclaimed,
    their attempts unspent."""
    root = Path(__file__).resolve().parent.parent
    db = tmp_path / "scheduler.db"
    app = _message()
    with SqliteScheduleStore.open(db) as store:
        store.insert(app, 5)
    example = str(root / "examples" / "06_scheduled_reminder.py")
    result = subprocess.run(
        [sys.executable, example, "--db", str(db), "--timeout", "0.5"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        check=False,
    )
    assert "BusSink only publishes bus targets" not in result.stderr
    with SqliteScheduleStore.open(db, readonly=True) as store:
        snap = store.inspect(app.schedule_id)
    assert snap is not None
    assert (snap.attempts, snap.last_error, snap.status.value) == (0, None, "pending")
