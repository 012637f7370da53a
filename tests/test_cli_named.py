"""The CLI for named schedules, end to end on a real SQLite file: ``add --name``,
``ensure``, ``reschedule``, ``update``, ``run-now``, ``--name`` wherever an id is, and
``--format json``; exit codes 0 (done), 1 (runtime: unknown name, terminal schedule),
2 (usage: bad name, naive instant, nothing to change)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite.names import name_id
from hexeract_lite.snapshot import ScheduleSnapshot
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .test_cli import Cli


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sched.db"


NAME = "myapp.backup.daily"


def ensure(cli: Cli, db: Path, *extra: str) -> tuple[int, str, str]:
    result = cli(
        "scheduler", "ensure", "--conn", str(db), "--name", NAME, "--event-type", "backup", *extra
    )
    return result.code, result.out, result.err


def test_ensure_is_idempotent_and_says_what_it_did(cli: Cli, db: Path) -> None:
    code, out, _ = ensure(cli, db, "--cron", "0 3 * * *")
    assert code == 0 and out.startswith(f"created: {NAME} ({name_id(NAME)}); next firing ")
    assert "T03:00:00.000Z" in out
    code, out, _ = ensure(cli, db, "--cron", "0 3 * * *")
    assert code == 0 and out.startswith("unchanged: ")
    code, out, _ = ensure(cli, db, "--cron", "0 4 * * *", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["result"] == "updated"
    assert data["schedule"]["name"] == NAME and data["schedule"]["trigger"] == "cron:0 4 * * *"
    listed = cli("scheduler", "list", "--conn", str(db))
    assert listed.code == 0 and NAME in listed.out
    shown = cli("scheduler", "inspect", "--conn", str(db), "--name", NAME)
    assert shown.code == 0 and f"name              {NAME}" in shown.out


def test_a_first_firing_off_the_rule_is_kept_and_noted(cli: Cli, db: Path) -> None:
    code, out, err = ensure(cli, db, "--cron", "0 3 * * *", "--first", "2030-01-01T12:00:00Z")
    assert code == 0 and "2030-01-01T12:00:00.000Z" in out
    assert "not an instant of the rule" in err


def test_add_with_a_name_then_every_command_by_name(cli: Cli, db: Path) -> None:
    added = cli(
        "scheduler", "add", "--conn", str(db), "--name", "ops.job", "--cron", "*/5 * * * *",
        "--event-type", "job",
    )  # fmt: skip
    assert added.code == 0 and added.out.strip() == str(name_id("ops.job"))
    again = cli(
        "scheduler", "add", "--conn", str(db), "--name", "ops.job", "--in", "1h",
        "--event-type", "job",
    )  # fmt: skip
    assert again.code == 1, again.err
    assert f"a schedule named 'ops.job' already exists (id {name_id('ops.job')})" in again.err

    at = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    moved = cli(
        "scheduler", "reschedule", "--conn", str(db), "--name", "ops.job",
        "--at", at.isoformat(), "--format", "json",
    )  # fmt: skip
    assert moved.code == 0, moved.err
    assert json.loads(moved.out)["schedule"]["scheduled_for"].startswith(at.strftime("%Y-%m-%dT%H"))

    updated = cli(
        "scheduler", "update", "--conn", str(db), "--name", "ops.job", "--payload", '{"a": 1}',
        "--max-attempts", "7",
    )  # fmt: skip
    assert updated.code == 0 and updated.out.startswith("Updated schedule")
    same = cli("scheduler", "update", "--conn", str(db), "--name", "ops.job", "--max-attempts", "7")
    assert same.code == 0 and "already has these values" in same.out

    now = cli("scheduler", "run-now", "--conn", str(db), "--name", "ops.job", "--format", "json")
    assert now.code == 0 and json.loads(now.out)["result"] == "due"
    with SqliteScheduleStore.open(db) as store:
        snap = store.inspect(name_id("ops.job"))
        assert snap is not None and snap.max_attempts == 7 and snap.payload_json == '{"a":1}'
        assert snap.scheduled_for <= datetime.now(UTC)

    for command in ("pause", "resume", "cancel"):
        assert cli("scheduler", command, "--conn", str(db), "--name", "ops.job").code == 0
    refused = cli("scheduler", "run-now", "--conn", str(db), "--name", "ops.job")
    assert refused.code == 1 and "is cancelled" in refused.err
    refused = cli(
        "scheduler", "update", "--conn", str(db), "--name", "ops.job", "--cron", "* * * * *"
    )
    assert refused.code == 1 and "is cancelled" in refused.err


def test_usage_and_runtime_errors(cli: Cli, db: Path) -> None:
    assert ensure(cli, db, "--cron", "0 3 * * *")[0] == 0
    unknown = cli("scheduler", "run-now", "--conn", str(db), "--name", "myapp.nope")
    assert unknown.code == 1 and "no schedule named 'myapp.nope'" in unknown.err
    bad = cli("scheduler", "inspect", "--conn", str(db), "--name", " padded")
    assert bad.code == 2 and "padded" in bad.err
    both = cli("scheduler", "inspect", "--conn", str(db), str(name_id(NAME)), "--name", NAME)
    assert both.code == 2 and "exactly one of SCHEDULE_ID or --name" in both.err
    naive = cli(
        "scheduler", "reschedule", "--conn", str(db), "--name", NAME, "--at", "2030-01-01T00:00"
    )
    assert naive.code == 2 and "no timezone" in naive.err
    nothing = cli("scheduler", "update", "--conn", str(db), "--name", NAME)
    assert nothing.code == 2 and "at least one of" in nothing.err
    kind = ensure(cli, db, "--at", "2030-01-01T00:00:00Z")
    assert kind[0] == 1 and "cron schedule, declared as delay" in kind[2]
    with SqliteScheduleStore.open(db) as store:
        [snap] = store.list_pending()
        assert isinstance(snap, ScheduleSnapshot)
        assert snap.trigger.expression == "0 3 * * *", "nothing written by the refusals"


def test_ensure_takes_a_zone_an_interval_and_a_misfire_grace(cli: Cli, db: Path) -> None:
    """ensure passes --tz, --every and --misfire-grace through and compares them."""
    code, out, _ = ensure(cli, db, "--cron", "0 9 * * *", "--tz", "Europe/Paris")
    assert code == 0 and out.startswith("created: ")
    code, out, _ = ensure(cli, db, "--cron", "0 9 * * *", "--tz", "Europe/Paris")
    assert code == 0 and out.startswith("unchanged: ")
    code, out, _ = ensure(cli, db, "--cron", "0 9 * * *", "--tz", "America/New_York")
    assert code == 0 and out.startswith("updated: ")
    code, out, _ = ensure(
        cli, db, "--cron", "0 9 * * *", "--tz", "America/New_York", "--misfire-grace", "10m"
    )
    assert code == 0 and out.startswith("updated: ")
    shown = cli("scheduler", "inspect", "--conn", str(db), "--name", NAME, "--format", "json")
    data = json.loads(shown.out)
    assert data["tz"] == "America/New_York" and data["misfire_grace"] == "10m"
    other = ("scheduler", "ensure", "--conn", str(db), "--name", "myapp.tick", "--event-type", "t")
    first = cli(*other, "--every", "90m")
    assert first.code == 0 and first.out.startswith("created: ")
    again = cli(*other, "--every", "90m")  # another start, later: the same grid
    assert again.code == 0 and again.out.startswith("unchanged: "), again.out
    changed = cli(*other, "--every", "1h")
    assert changed.code == 0 and changed.out.startswith("updated: ")
    update = cli("scheduler", "update", "--conn", str(db), "--name", NAME, "--misfire-grace", "5m")
    assert update.code == 0, update.err
    with SqliteScheduleStore.open(db, readonly=True) as store:
        snap = store.inspect(name_id(NAME))
        assert isinstance(snap, ScheduleSnapshot) and snap.misfire_grace == timedelta(minutes=5)


def test_backfill_then_inspect_shows_the_window(cli: Cli, db: Path) -> None:
    ensure(cli, db, "--cron", "0 * * * *")
    args = ["scheduler", "backfill", NAME, "--conn", str(db)]
    start, end = "2026-01-01T00:00:00Z", "2026-01-01T05:00:00Z"
    result = cli(*args, "--start", start, "--end", end)
    assert result.code == 0, result.err
    assert result.out == (
        f"Schedule {name_id(NAME)}: backfilling 6 instants from 2026-01-01T00:00:00.000Z"
        " to 2026-01-01T05:00:00.000Z; then on its rule.\n"
    )
    shown = cli("scheduler", "inspect", "--conn", str(db), "--name", NAME)
    assert re.search(r"\nscheduled for +2026-01-01T00:00:00.000Z\n", shown.out)
    assert re.search(r"\nbackfilling until +2026-01-01T05:00:00.000Z\n", shown.out)
    data = json.loads(
        cli("scheduler", "inspect", "--conn", str(db), "--name", NAME, "--format", "json").out
    )
    assert data["backfill_until"] == "2026-01-01T05:00:00.000Z"
    nxt = cli("scheduler", "next", NAME, "--conn", str(db), "--count", "2", "--format", "json")
    assert [f["at"] for f in json.loads(nxt.out)["firings"]] == [
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T01:00:00.000Z",
    ]
    # refusals: exit 2 naming the values, nothing written
    over = cli(*args, "--start", start, "--end", end, "--limit", "5")
    assert over.code == 2 and "covers 6 instants" in over.err and "limit of 5" in over.err
    back = cli(*args, "--start", end, "--end", start)
    assert (
        back.code == 2 and "backfill end 2026-01-01T00:00:00.000Z is before its start" in back.err
    )
    naive = cli(*args, "--start", "2026-01-01T00:00:00", "--end", end)
    assert naive.code == 2 and "2026-01-01T00:00:00" in naive.err
    again = json.loads(
        cli("scheduler", "inspect", "--conn", str(db), "--name", NAME, "--format", "json").out
    )
    assert again == data


def test_pause_and_resume_a_group_with_a_note(cli: Cli, db: Path) -> None:
    for name in ("myapp.a", "myapp.b", "other.c"):
        cli(
            "scheduler",
            "ensure",
            "--conn",
            str(db),
            "--name",
            name,
            "--event-type",
            "e",
            "--cron",
            "0 * * * *",
        )
    paused = cli("scheduler", "pause", "--conn", str(db), "--group", "myapp", "--note", "db move")
    assert paused.code == 0 and paused.out == "Paused 2 schedules of group 'myapp'.\n"
    shown = cli("scheduler", "inspect", "--conn", str(db), "--name", "myapp.a")
    assert re.search(r"\nstatus +paused\n", shown.out)
    assert re.search(r"\npause note +db move\n", shown.out)
    data = json.loads(
        cli("scheduler", "inspect", "--conn", str(db), "--name", "myapp.b", "--format", "json").out
    )
    assert data["status"] == "paused" and data["pause_note"] == "db move"
    other = json.loads(
        cli("scheduler", "inspect", "--conn", str(db), "--name", "other.c", "--format", "json").out
    )
    assert other["status"] == "pending" and "pause_note" not in other
    resumed = cli("scheduler", "resume", "--conn", str(db), "--group", "myapp")
    assert resumed.code == 0 and resumed.out == "Resumed 2 schedules of group 'myapp'.\n"
    shown = cli("scheduler", "inspect", "--conn", str(db), "--name", "myapp.a")
    assert re.search(r"\nstatus +pending\n", shown.out) and "pause note" not in shown.out
    one = cli("scheduler", "pause", "--conn", str(db), "--name", "other.c", "--note", "flaky")
    assert (
        one.code == 0
        and "pause note        flaky"
        in cli("scheduler", "inspect", "--conn", str(db), "--name", "other.c").out
    )
    unknown = cli("scheduler", "pause", "--conn", str(db), "--group", "nosuch")
    assert unknown.code == 1 and "no live schedule is named in group 'nosuch'" in unknown.err
    assert "usage:" not in unknown.err, "exit 1, as an unknown name: no usage error"
    unknown = cli("scheduler", "resume", "--conn", str(db), "--group", "nosuch")
    assert unknown.code == 1 and "no live schedule is named in group 'nosuch'" in unknown.err
    blank = cli("scheduler", "pause", "--conn", str(db), "--group", "nosuch", "--note", " ")
    assert blank.code == 2 and "a pause note must not be blank" in blank.err
    both = cli("scheduler", "pause", "--conn", str(db), "--group", "myapp", "--name", "myapp.a")
    assert both.code == 2 and "not both" in both.err


def test_update_payload_null_is_a_change_applied(cli: Cli, db: Path) -> None:
    # null is a valid JSON payload (SchedulerControl.update stores it as "null"): the
    # CLI applies it instead of taking it for "no change given".
    assert ensure(cli, db, "--cron", "0 3 * * *", "--payload", '{"a": 1}')[0] == 0
    updated = cli("scheduler", "update", "--conn", str(db), "--name", NAME, "--payload", "null")
    assert updated.code == 0, updated.err
    assert updated.out.startswith("Updated schedule")
    with SqliteScheduleStore.open(db) as store:
        snap = store.inspect(name_id(NAME))
        assert snap is not None and snap.payload_json == "null"
    same = cli("scheduler", "update", "--conn", str(db), "--name", NAME, "--payload", "null")
    assert same.code == 0 and "already has these values" in same.out
