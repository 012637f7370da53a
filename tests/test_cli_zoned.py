"""``scheduler add --tz / --every`` and how ``inspect`` and ``list`` show zones and
intervals."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite.cli import main
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import FrozenTime


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("HEXERACT_SCHEDULER_TABLE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.chdir(tmp_path)
    yield


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def add(capsys: pytest.CaptureFixture[str], db: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "scheduler", "add", "--conn", str(db), "--event-type", "e", *extra)


def rows(db: Path) -> int:
    if not db.exists():
        return 0
    with SqliteScheduleStore.open(db) as store:
        return len(store.list_pending(1000))


def test_add_a_zoned_cron_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    code, out, err = add(
        capsys, db, "--cron", "0 9 * * *", "--tz", "Europe/Paris", "--first", "2030-03-31T07:00Z"
    )
    assert code == 0, err
    sid = uuid.UUID(out.strip())
    code, out, _ = run(capsys, "scheduler", "inspect", str(sid), "--conn", str(db))
    assert "cron:CRON_TZ=Europe/Paris 0 9 * * *" in out
    assert [
        line.split(None, 2)[2] for line in out.splitlines() if line.startswith("time zone")
    ] == ["Europe/Paris"]
    code, out, _ = run(capsys, "scheduler", "list", "--conn", str(db))
    header, row = out.splitlines()
    assert "cron:CRON_TZ=Europe/Paris 0 9 * * *" in row
    assert header.endswith("NAME  LOCAL TIME")  # the next firing on its own wall clock too
    assert row.split("  ")[2:3] == ["2030-03-31T07:00:00.000Z"]
    assert row.endswith("  2030-03-31 09:00:00 CEST")
    code, out, _ = run(capsys, "scheduler", "list", "--conn", str(db), "--format", "json")
    [item] = json.loads(out)
    assert item["tz"] == "Europe/Paris" and item["trigger"] == "cron:CRON_TZ=Europe/Paris 0 9 * * *"
    assert item["scheduled_for_local"] == "2030-03-31T09:00:00.000+02:00"


def test_a_listing_of_utc_schedules_has_no_local_time_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    assert add(capsys, db, "--cron", "0 9 * * *", "--first", "2030-03-31T09:00Z")[0] == 0
    assert add(capsys, db, "--in", "1h")[0] == 0
    code, out, _ = run(capsys, "scheduler", "list", "--conn", str(db))
    assert code == 0 and out.splitlines()[0].endswith("EVENT TYPE  NAME")
    assert "LOCAL" not in out
    code, out, _ = run(capsys, "scheduler", "list", "--conn", str(db), "--format", "json")
    assert all("scheduled_for_local" not in item for item in json.loads(out))


def test_add_a_zoned_rule_without_first_starts_at_its_next_wall_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    code, out, err = add(capsys, db, "--cron", "0 9 * * *", "--tz", "Asia/Tokyo")
    assert code == 0, err
    code, out, _ = run(
        capsys, "scheduler", "inspect", out.strip(), "--conn", str(db), "--format", "json"
    )
    first = datetime.fromisoformat(json.loads(out)["scheduled_for"])
    assert first > datetime.now(UTC) and (first.hour, first.minute) == (0, 0)  # 09:00 +09


def test_add_every(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    before = datetime.now(UTC)
    code, out, err = add(capsys, db, "--every", "90m")
    assert code == 0, err
    code, out, _ = run(
        capsys, "scheduler", "inspect", out.strip(), "--conn", str(db), "--format", "json"
    )
    snap = json.loads(out)
    first = datetime.fromisoformat(snap["scheduled_for"])
    assert before + timedelta(minutes=90) - timedelta(seconds=1) <= first
    assert first <= datetime.now(UTC) + timedelta(minutes=90)
    assert snap["every"] == "1h30m" and snap["anchor"] == snap["scheduled_for"]
    assert snap["trigger"] == f"interval:@every 1h30m from {snap['anchor']}"
    code, out, err = add(capsys, db, "--every", "1h", "--first", "2030-01-01T00:00:00Z")
    assert code == 0, err
    code, out, _ = run(capsys, "scheduler", "inspect", out.strip(), "--conn", str(db))
    assert "interval:@every 1h from 2030-01-01T00:00:00.000Z" in out
    assert any(line.split() == ["every", "1h"] for line in out.splitlines())


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--cron", "0 9 * * *", "--tz", "Europe/Pariss"), "'Europe/Pariss'"),
        (("--cron", "CRON_TZ=Mars/Base 0 9 * * *"), "'Mars/Base'"),
        (("--cron", "CRON_TZ=Asia/Tokyo 0 9 * * *", "--tz", "Europe/Paris"), "once"),
        (
            ("--cron", "TZ=Europe/Paris 0 9 * * *"),
            "the zone prefix is CRON_TZ=; write 'CRON_TZ=Europe/Paris 0 9 * * *', or give",
        ),
        (("--in", "1h", "--tz", "Europe/Paris"), "--tz 'Europe/Paris'"),
        (("--at", "2030-01-01T00:00Z", "--tz", "UTC"), "--tz 'UTC'"),
        (("--every", "90m", "--tz", "Europe/Paris"), "goes with --cron only"),
        (("--every", "0s"), "--every: invalid duration '0s': must be more than 0"),
        (("--every", "0.0005s"), "--every: invalid duration '0.0005s': a schedule stores whole"),
        (("--every", "1.0005s"), "--every: invalid duration '1.0005s': a schedule stores whole"),
        (("--every", "soon"), "'soon'"),
        (("--every", "1h", "--cron", "0 * * * *"), "not allowed"),
    ],
)
def test_bad_rules_are_refused_and_nothing_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: tuple[str, ...], needle: str
) -> None:
    db = tmp_path / "s.db"
    code, _, err = add(capsys, db, *extra)
    assert code != 0 and needle in err, err
    assert rows(db) == 0


def test_cli_update_cron_without_tz_keeps_the_zone(
    tmp_path: Path, frozen: FrozenTime, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = ["--conn", str(tmp_path / "s.db")]
    name = ["--name", "myapp.backup.daily"]
    rule = ["--cron", "0 3 * * *", "--tz", "Europe/Paris", "--event-type", "backup.run"]
    assert main(["scheduler", "ensure", *name, *rule, *conn]) == 0
    assert main(["scheduler", "update", *name, "--cron", "30 3 * * *", *conn]) == 0
    capsys.readouterr()
    assert main(["scheduler", "inspect", *name, "--format", "json", *conn]) == 0
    shown = capsys.readouterr().out
    assert '"trigger": "cron:CRON_TZ=Europe/Paris 30 3 * * *"' in shown
    assert '"scheduled_for": "2026-03-02T02:30:00.000Z"' in shown
