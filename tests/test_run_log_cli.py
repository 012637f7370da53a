"""``hexeract scheduler runs``, ``SchedulerControl.runs`` and the pruning of the run log."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    RunOutcome,
    RunRecord,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import T0, FrozenTime

S = timedelta(seconds=1)


def _file_with_runs(db: Path, frozen: FrozenTime) -> tuple[SchedulerControl, list[str]]:
    store = SqliteScheduleStore.open(db)
    control = SchedulerControl(store)
    control.ensure("app.nightly", cron="* * * * *", event_type="tick")
    other = control.schedule(ScheduledMessage.delay(Target.outbox(), T0, "once", {}))
    calls: list[str] = []

    def sink(message: ScheduledMessage) -> None:
        calls.append(message.event_type)
        if message.event_type == "once":
            raise RuntimeError("downstream <down>")

    frozen.shift(61 * S)
    config = SchedulerWorkerConfig(retry_base_delay=S, retry_max_delay=S, jitter=False)
    SchedulerWorker(store, sink, config).run_once()
    return control, [str(control.id_of("app.nightly")), str(other)]


def test_control_runs_by_name_outcome_and_since(tmp_path: Path, frozen: FrozenTime) -> None:
    control, (nightly, other) = _file_with_runs(tmp_path / "s.db", frozen)
    runs = control.runs()
    assert all(isinstance(r, RunRecord) for r in runs) and len(runs) == 2
    [mine] = control.runs("app.nightly")
    assert str(mine.schedule_id) == nightly and mine.outcome is RunOutcome.DELIVERED
    [failed] = control.runs(outcome=RunOutcome.FAILED)
    assert str(failed.schedule_id) == other and failed.error == "RuntimeError: downstream <down>"
    assert control.runs(since=timedelta(seconds=1)) == runs, "a duration back from now"
    assert control.runs(since=T0 + 2 * 61 * S) == []
    with pytest.raises(ScheduleNotFound):
        control.runs("app.missing")
    control.store.close()


def test_the_runs_command_text_and_json(
    tmp_path: Path, frozen: FrozenTime, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    control, (nightly, other) = _file_with_runs(db, frozen)
    control.store.close()
    before = db.read_bytes()
    assert main(["scheduler", "runs", "--conn", str(db)]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()
    assert header.split() == [
        "FINISHED", "SCHEDULE", "ATTEMPT", "OUTCOME", "LAG", "DURATION", "WORKER", "ERROR"
    ]  # fmt: skip
    assert len(rows) == 2 and "RuntimeError: downstream <down>" in out
    assert main(["scheduler", "runs", "app.nightly", "--conn", str(db), "--format", "json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["schedule_id"] == nightly and record["outcome"] == "delivered"
    assert record["attempt"] == 1 and record["error"] is None
    assert set(record) >= {"occurrence_id", "started", "finished", "lag_s", "duration_s", "host"}
    args = ["scheduler", "runs", "--conn", str(db), "--outcome", "failed", "--limit", "5"]
    assert main([*args, "--format", "json"]) == 0
    assert [r["schedule_id"] for r in json.loads(capsys.readouterr().out)] == [other]
    assert main(["scheduler", "runs", "--conn", str(db), "--limit", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert db.read_bytes() == before, "read-only"


def test_the_runs_command_refuses_an_unknown_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    SqliteScheduleStore.open(db).close()
    assert main(["scheduler", "runs", "--conn", str(db), "--outcome", "exploded"]) == 2
    assert "'exploded'" in capsys.readouterr().err
    assert main(["scheduler", "runs", "--conn", str(db)]) == 0
    assert capsys.readouterr().out == "No runs recorded.\n"


def test_prune_prunes_the_run_log_too(
    tmp_path: Path, frozen: FrozenTime, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    control, _ = _file_with_runs(db, frozen)
    control.store.close()
    frozen.shift(timedelta(days=3))
    base = ["scheduler", "prune", "--conn", str(db)]
    assert main([*base, "--older-than", "2d", "--runs-older-than", "4d"]) == 0
    assert capsys.readouterr().out == "Pruned 0 schedules.\n", "the runs are younger than 4d"
    assert main([*base, "--older-than", "2d", "--dry-run"]) == 0
    assert capsys.readouterr().out == "Would prune 0 schedules.\nWould prune 2 run records.\n"
    assert main([*base, "--runs-older-than", "2d", "--dry-run"]) == 0  # the run log alone
    assert capsys.readouterr().out == "Would prune 2 run records.\n"
    assert main([*base, "--runs-older-than", "4d"]) == 0
    assert capsys.readouterr().out == "Pruned 0 run records.\n"
    assert main(base) == 2
    assert "give --older-than, --runs-older-than or both" in capsys.readouterr().err
    assert main([*base, "--older-than", "2d"]) == 0
    assert capsys.readouterr().out == "Pruned 0 schedules.\nPruned 2 run records.\n"
    with SqliteScheduleStore.open(db) as store:
        assert store.runs() == []


def test_the_workers_retention_prunes_runs(tmp_path: Path, frozen: FrozenTime) -> None:
    control, _ = _file_with_runs(tmp_path / "s.db", frozen)
    store = control.store
    assert len(store.runs()) == 2
    frozen.shift(timedelta(days=2))
    SchedulerWorker(store, lambda m: None, retention=timedelta(days=1)).run_once()
    runs = store.runs()
    assert len(runs) == 2, "the two old runs pruned; this cycle's two recorded"
    assert all(r.finished > T0 + timedelta(days=2) for r in runs)
    store.close()
