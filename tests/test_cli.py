"""The ``hexeract`` command, called in-process through ``main([...])``.

Every test runs on a real SQLite file under ``tmp_path``; the default database
location is redirected there too (``XDG_DATA_HOME``), so nothing touches the user's.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import attrs
import pytest

from hexeract_lite import (
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleSnapshot,
    ScheduleStatus,
    Target,
    __version__,
)
from hexeract_lite.cli import (
    build_parser,
    format_dead_letter,
    format_pending,
    format_table,
    main,
    one_line,
    parse_duration,
    snapshot_json,
)
from hexeract_lite.connect import (
    UnsupportedConnection,
    parse_conn,
    redact_conn,
    scrub,
)
from hexeract_lite.snapshot import MalformedSchedule
from hexeract_lite.store.sqlite import SqliteScheduleStore, default_database_path

from .conftest import TIGHT
from .test_migrate import _source_of_three

ANY_ID = "0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b"


@attrs.frozen
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("HEXERACT_SCHEDULER_TABLE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the worker's --app-dir edits it
    yield


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> Result:
        self.capsys.readouterr()
        code = main(list(argv))
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sched.db"


def add(cli: Cli, db: Path, *extra: str) -> uuid.UUID:
    args = ["scheduler", "add", "--conn", str(db), "--event-type", "reminder.due", *extra]
    if not any(a in extra for a in ("--at", "--in", "--cron")):
        args += ["--in", "1h"]
    result = cli(*args)
    assert result.code == 0, result.err
    return uuid.UUID(result.out.strip())


def dead_letter(db: Path, *, error: str = "boom: downstream is down") -> uuid.UUID:
    """A dead-lettered schedule, made through the store's worker-side API."""
    with SqliteScheduleStore.open(db) as store:
        msg = ScheduledMessage.delay(
            Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "invoice.send", {"n": 1}
        )
        store.insert(msg, max_attempts=1)
        (leased,) = store.claim_due(datetime.now(UTC), 1, timedelta(seconds=30))
        assert store.mark_dead_lettered(msg.schedule_id, error, leased.leased_until)
        return msg.schedule_id


# -- help, version, usage ---------------------------------------------------------------


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"{' '.join((*path, name))} has no help line"
                yield from _walk(sub, (*path, name))


ALL_COMMANDS = [path for path, _ in _walk(build_parser())]


def test_every_command_and_option_has_help_and_an_example() -> None:
    seen = set()
    for path, parser in _walk(build_parser()):
        name = " ".join(("hexeract", *path))
        seen.add(name)
        assert parser.description, f"{name} has no description"
        assert parser.epilog and "example:" in parser.epilog, f"{name} has no example"
        assert "hexeract" in parser.epilog, f"{name}'s example does not run hexeract"
        for action in parser._actions:
            assert action.help and action.help != argparse.SUPPRESS, (
                f"{name}: {action.option_strings or action.dest} has no help text"
            )
    assert {
        "hexeract scheduler list",
        "hexeract scheduler inspect",
        "hexeract scheduler add",
        "hexeract scheduler pause",
        "hexeract scheduler resume",
        "hexeract scheduler cancel",
        "hexeract scheduler schema",
        "hexeract scheduler worker",
        "hexeract scheduler dead-letter list",
        "hexeract scheduler dead-letter replay",
    } <= seen


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "hexeract")
def test_help_at_every_level(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli(*path, "--help")
    assert result.code == 0
    assert result.out.startswith("usage: hexeract")
    assert "example:" in result.out


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"hexeract {__version__}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required"),
        (["scheduler"], "required"),
        (["scheduler", "list", "--bogus"], "unrecognized arguments: --bogus"),
        (["scheduler", "inspect", "not-a-uuid"], "invalid schedule id 'not-a-uuid'"),
        (["scheduler", "dead-letter", "replay", "1234"], "invalid schedule id"),
        (["scheduler", "dead-letter", "replay", ANY_ID, "--format", "json"], "--format"),
        (["scheduler", "list", "--format", "yaml"], "invalid choice"),
        (["scheduler", "list", "--limit", "0"], "expected an integer >= 1"),
        (["scheduler", "list", "--table", "drop table;"], "invalid table name"),
        (["scheduler", "add", "--in", "5 parsecs", "--event-type", "x"], "invalid duration"),
        (["scheduler", "add", "--in", "5m"], "--event-type"),
        (["scheduler", "add", "--event-type", "x"], "one of the arguments --at --in --cron"),
        (
            ["scheduler", "add", "--in", "5m", "--at", "2026-03-01T12:00:00Z", "--event-type", "x"],
            "not allowed with",
        ),
        (
            ["scheduler", "add", "--at", "2026-03-01T12:00:00", "--event-type", "x"],
            "has no timezone",
        ),
        (
            ["scheduler", "add", "--in", "5m", "--event-type", "x", "--payload", "{nope"],
            "argument --payload: invalid JSON payload '{nope': Expecting property name",
        ),
        (
            ["scheduler", "add", "--in", "5m", "--event-type", "x", "--payload", "hello"],
            "invalid JSON payload 'hello': Expecting value",
        ),
        (
            ["scheduler", "add", "--in", "5m", "--event-type", "x", "--payload", "x" * 500],
            f"invalid JSON payload '{'x' * 59}: Expecting value",
        ),
        (
            ["scheduler", "add", "--in", "5m", "--event-type", "x", "--target", "queue"],
            "invalid target 'queue'",
        ),
        (
            ["scheduler", "add", "--in", "5m", "--event-type", "x", "--max-attempts", "0"],
            "expected an integer >= 1",
        ),
        (["scheduler", "worker", "--sink", "no-colon"], "expected MODULE:ATTR"),
        (["scheduler", "schema", "--dialect", "oracle"], "invalid choice"),
        # a duration out of range names the flag and the text as typed
        (["scheduler", "prune", "--older-than", "0s"], "--older-than: invalid duration '0s'"),
        (["scheduler", "add", "--every", "0s", "--event-type", "x"], "--every: invalid duration"),
        (
            ["scheduler", "add", "--every", "1.5ms", "--event-type", "x"],
            "--every: invalid duration '1.5ms': a schedule stores whole milliseconds",
        ),
        (
            ["scheduler", "add", "--in", "1m", "--misfire-grace", "0.5ms", "--event-type", "x"],
            "--misfire-grace: invalid duration '0.5ms'",
        ),
        (
            ["scheduler", "update", ANY_ID, "--misfire-grace", "0.5ms"],
            "--misfire-grace: invalid duration '0.5ms'",
        ),
        (
            ["scheduler", "add", "--in", "99999999d", "--event-type", "x"],
            "--in '99999999d' reaches past the year 9999",
        ),
        (
            ["scheduler", "add", "--every", "99999999d", "--event-type", "x"],
            "--every '99999999d' reaches past the year 9999",
        ),
    ],
)
def test_usage_errors_exit_2_with_an_argparse_message(
    cli: Cli, db: Path, argv: list[str], message: str
) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.out == ""
    assert "usage: hexeract" in result.err
    assert message in result.err
    assert not db.exists()


def test_domain_rejections_are_usage_errors(cli: Cli, db: Path) -> None:
    bad_cron = cli(
        "scheduler", "add", "--conn", str(db), "--cron", "61 * * * *", "--event-type", "x"
    )
    assert bad_cron.code == 2
    assert "usage: hexeract scheduler add" in bad_cron.err
    assert "invalid cron expression '61 * * * *'" in bad_cron.err
    long_type = cli("scheduler", "add", "--conn", str(db), "--in", "1m", "--event-type", "x" * 65)
    assert long_type.code == 2
    assert "event_type must be a string of 1 to 64 characters" in long_type.err
    first_alone = cli(
        "scheduler",
        "add",
        "--conn",
        str(db),
        "--in",
        "1m",
        "--event-type",
        "x",
        "--first",
        "2026-03-01T12:00:00Z",
    )
    assert first_alone.code == 2
    assert "--first goes with --cron or --every only" in first_alone.err
    for policy, says in (
        (["--jitter", "5s"], "--jitter goes"),
        (["--jitter", "5s", "--max-firings", "3"], "--max-firings and --jitter go"),
        (["--catch-up", "all", "--jitter", "5s", "--max-firings", "3"], "--max-firings, --jitter"),
    ):
        once = cli("scheduler", "add", "--conn", str(db), "--in", "1m", "--event-type=e", *policy)
        assert once.code == 2 and f"error: {says}" in once.err, once.err
        assert "(es)" not in once.err and "with --cron or --every only" in once.err
    assert not db.exists()


def test_unsupported_scheme_is_a_usage_error_naming_it(cli: Cli) -> None:
    result = cli("scheduler", "list", "--conn", "oracle://root:hunter2@db/app")
    assert result.code == 2
    assert "unsupported connection scheme 'oracle'" in result.err
    assert "hunter2" not in result.err + result.out


# -- the database is never created by a reader ---------------------------------------------


READERS = [
    ["scheduler", "list"],
    ["scheduler", "list", "--format", "json"],
    ["scheduler", "runs"],
    ["scheduler", "inspect", ANY_ID],
    ["scheduler", "pause", ANY_ID],
    ["scheduler", "resume", ANY_ID],
    ["scheduler", "cancel", ANY_ID],
    ["scheduler", "dead-letter", "list"],
    ["scheduler", "dead-letter", "replay", ANY_ID],
]


@pytest.mark.parametrize("argv", READERS, ids=" ".join)
def test_readers_never_create_a_database(cli: Cli, tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "typo" / "sched.db"
    for conn in (str(missing), f"sqlite:///{missing}", "sqlite://typo/sched.db"):
        result = cli(*argv, "--conn", conn)
        assert result.code == 1, result.err
        assert result.out == ""
        assert "no database at" in result.err
        assert "sched.db" in result.err
        assert not missing.parent.exists()
    # Same for a missing file in an existing folder, and for the default database.
    plain = tmp_path / "absent.db"
    result = cli(*argv, "--conn", str(plain))
    assert (result.code, plain.exists()) == (1, False)
    result = cli(*argv)
    assert result.code == 1
    assert f"no database at {default_database_path()}" in result.err
    assert not default_database_path().exists()
    assert not default_database_path().parent.exists()


def test_reader_on_a_file_without_the_table(cli: Cli, db: Path) -> None:
    add(cli, db)
    result = cli("scheduler", "list", "--conn", str(db), "--table", "other_table")
    assert result.code == 1
    assert "no database at" in result.err
    assert "other_table" in result.err


# -- add, list, inspect ---------------------------------------------------------------------


def test_add_then_list_text(cli: Cli, db: Path) -> None:
    soon = add(cli, db, "--in", "90s")
    later = add(cli, db, "--cron", "0 9 * * 1-5", "--event-type", "report.daily")
    result = cli("scheduler", "list", "--conn", str(db))
    assert result.code == 0
    lines = result.out.splitlines()
    header = lines[0]
    assert re.match(
        r"SCHEDULE ID +STATUS +SCHEDULED FOR +ATTEMPTS +TRIGGER +EVENT TYPE +NAME$", header
    )
    assert len(lines) == 3
    # soonest first, aligned under the header
    assert lines[1].startswith(str(soon))
    assert lines[2].startswith(str(later))
    col = header.index("STATUS")
    assert lines[1][col:].startswith("pending")
    assert lines[2][header.index("TRIGGER") :].startswith("cron:0 9 * * 1-5")
    assert lines[1][header.index("ATTEMPTS") :].startswith("0/5 ")
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", lines[1])


def test_list_json_and_limit(cli: Cli, db: Path) -> None:
    ids = [add(cli, db, "--in", f"{n}m") for n in (3, 1, 2)]
    result = cli("scheduler", "list", "--conn", f"sqlite:///{db}", "--format", "json")
    assert result.code == 0
    rows = result.json()
    assert isinstance(rows, list)
    assert [r["schedule_id"] for r in rows] == [str(ids[1]), str(ids[2]), str(ids[0])]
    for key in (
        "schedule_id",
        "status",
        "scheduled_for",
        "attempts",
        "max_attempts",
        "trigger",
        "last_error",
        "event_type",
        "target",
        "created_at",
        "delivered_at",
        "cancelled_at",
        "dead_lettered_at",
    ):
        assert key in rows[0]
    assert rows[0]["status"] == "pending"
    assert rows[0]["trigger"] == "delay"
    assert rows[0]["target"] == "mediator"
    assert rows[0]["attempts"] == 0 and rows[0]["max_attempts"] == 5
    assert rows[0]["last_error"] is None and rows[0]["delivered_at"] is None
    limited = cli("scheduler", "list", "--conn", str(db), "--format", "json", "--limit", "2")
    assert len(limited.json()) == 2  # type: ignore[arg-type]
    text = cli("scheduler", "list", "--conn", str(db), "--limit", "1")
    assert len(text.out.splitlines()) == 2


def test_empty_listings_say_so_in_one_line(cli: Cli, db: Path) -> None:
    sid = add(cli, db)
    assert cli("scheduler", "cancel", sid.hex, "--conn", str(db)).code == 0
    assert cli("scheduler", "list", "--conn", str(db)).out == "no pending schedules\n"
    assert cli("scheduler", "dead-letter", "list", "--conn", str(db)).out == (
        "no dead-lettered schedules\n"
    )
    assert cli("scheduler", "list", "--conn", str(db), "--format", "json").json() == []
    assert (
        cli("scheduler", "dead-letter", "list", "--conn", str(db), "--format", "json").json() == []
    )


def test_add_every_way(cli: Cli, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = add(
        cli,
        db,
        "--at",
        "2030-01-02T03:04:05.678+01:00",
        "--target",
        "outbox",
        "--payload",
        '{"user": 42}',
        "--max-attempts",
        "3",
    )
    snap = cli("scheduler", "inspect", str(at), "--conn", str(db), "--format", "json").json()
    assert isinstance(snap, dict)
    assert snap["scheduled_for"] == "2030-01-02T02:04:05.678Z"
    assert snap["target"] == "outbox"
    assert snap["payload"] == {"user": 42}
    assert snap["max_attempts"] == 3

    payload_file = tmp_path / "p.json"
    payload_file.write_text('["from", "a", "file"]', encoding="utf-8")
    cron = add(
        cli,
        db,
        "--cron",
        "*/2 * * * * *",
        "--first",
        "2030-01-01T00:00:00Z",
        "--payload",
        f"@{payload_file}",
        "--target",
        "bus:reports.daily",
    )
    snap = cli("scheduler", "inspect", str(cron), "--conn", str(db), "--format", "json").json()
    assert isinstance(snap, dict)
    assert snap["trigger"] == "cron:*/2 * * * * *"
    assert snap["scheduled_for"] == "2030-01-01T00:00:00.000Z"
    assert snap["target"] == "bus:reports.daily"
    assert snap["payload"] == ["from", "a", "file"]

    monkeypatch.setattr("sys.stdin", io.StringIO('{"from": "stdin"}'))
    daily = add(cli, db, "--cron", "@daily", "--payload", "-")
    snap = cli("scheduler", "inspect", str(daily), "--conn", str(db), "--format", "json").json()
    assert isinstance(snap, dict)
    assert snap["payload"] == {"from": "stdin"}
    first = datetime.fromisoformat(str(snap["scheduled_for"]))
    assert first > datetime.now(UTC) and (first.hour, first.minute) == (0, 0)

    default_payload = add(cli, db, "--in", "0s")
    snap = cli(
        "scheduler", "inspect", str(default_payload), "--conn", str(db), "--format", "json"
    ).json()
    assert isinstance(snap, dict)
    assert snap["payload"] == {}


def test_add_format_json_prints_the_snapshot(cli: Cli, db: Path) -> None:
    chosen = uuid.uuid4()
    result = cli(
        "scheduler",
        "add",
        "--conn",
        str(db),
        "--in",
        "2h",
        "--event-type",
        "x",
        "--schedule-id",
        str(chosen),
        "--format",
        "json",
    )
    assert result.code == 0
    snap = result.json()
    assert isinstance(snap, dict)
    assert snap["schedule_id"] == str(chosen)
    assert snap["status"] == "pending"
    assert snap["created_at"] is not None
    again = cli(
        "scheduler",
        "add",
        "--conn",
        str(db),
        "--in",
        "2h",
        "--event-type",
        "x",
        "--schedule-id",
        str(chosen),
    )
    assert again.code == 1
    assert f"schedule {chosen} already exists" in again.err


def test_add_creates_the_database(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    add(cli, db)
    assert db.exists()


def test_add_into_a_missing_folder_is_a_runtime_error(cli: Cli, tmp_path: Path) -> None:
    result = cli(
        "scheduler",
        "add",
        "--conn",
        str(tmp_path / "no" / "such" / "x.db"),
        "--in",
        "1m",
        "--event-type",
        "x",
    )
    assert result.code == 1
    assert "does not exist" in result.err
    assert not (tmp_path / "no").exists()


def test_inspect_text(cli: Cli, db: Path) -> None:
    sid = add(cli, db, "--payload", '{"a": [1, 2]}', "--target", "bus:k")
    result = cli("scheduler", "inspect", str(sid), "--conn", str(db))
    assert result.code == 0
    fields = dict(re.split(r"  +", line, maxsplit=1) for line in result.out.splitlines())
    assert fields["schedule id"] == str(sid)
    assert fields["status"] == "pending"
    assert fields["target"] == "bus:k"
    assert fields["attempts"] == "0/5"
    assert fields["payload"] == '{"a":[1,2]}'
    assert fields["delivered at"] == "-"
    assert re.fullmatch(r"[0-9a-f-]{36}", fields["occurrence id"])


def test_inspect_shows_an_error_kept_on_a_delivered_schedule_as_before_delivery(
    cli: Cli, db: Path
) -> None:
    sid = add(cli, db, "--at", "2020-01-01T00:00:00Z")
    with SqliteScheduleStore.open(db) as store:
        now = datetime.now(UTC)
        [occ] = store.claim_due(now, 1, timedelta(minutes=1))
        assert store.mark_failed(
            sid, timedelta(0), "ValueError: the first try failed", occ.leased_until
        )
        [occ] = store.claim_due(now + timedelta(seconds=1), 1, timedelta(minutes=1))
        assert store.mark_delivered(sid, occ.leased_until)
    result = cli("scheduler", "inspect", str(sid), "--conn", str(db))
    fields = dict(re.split(r"  +", line, maxsplit=1) for line in result.out.splitlines())
    assert fields["status"] == "delivered"
    assert fields["error before delivery"] == "ValueError: the first try failed"
    assert "last error" not in fields
    shown = json.loads(
        cli("scheduler", "inspect", str(sid), "--conn", str(db), "--format", "json").out
    )
    assert shown["last_error"] == "ValueError: the first try failed"  # JSON keeps the column


def test_not_found_is_exit_1(cli: Cli, db: Path) -> None:
    add(cli, db)
    for argv in READERS:
        if ANY_ID not in argv:
            continue
        result = cli(*argv, "--conn", str(db))
        assert result.code == 1, argv
        assert result.err.strip() == f"hexeract: error: no schedule {ANY_ID}"
        assert result.out == ""


# -- abort ---------------------------------------------------------------------------------


def test_abort_stores_the_request_for_the_dispatch_in_flight(cli: Cli, db: Path) -> None:
    """``abort ID|NAME [--cancel]``: with nothing in flight it says so and writes nothing;
    with a claim holding the row it stores the request, which ``inspect`` shows."""
    result = cli("scheduler", "add", "--conn", str(db), "--event-type", "render",
                 "--name", "ops.render", "--in", "0s")  # fmt: skip
    assert result.code == 0, result.err
    sid = uuid.UUID(result.out.strip())
    idle = cli("scheduler", "abort", "ops.render", "--conn", str(db))
    assert (idle.code, idle.out) == (
        0,
        f"Schedule {sid} has no dispatch in flight; nothing to abort.\n",
    )
    with SqliteScheduleStore.open(db) as store:
        assert store.abort_requests([sid]) == {}
        [_claimed] = store.claim_due(
            datetime.now(UTC) + timedelta(seconds=1), 1, timedelta(minutes=5)
        )
    asked = cli("scheduler", "abort", str(sid), "--cancel", "--conn", str(db), "--format", "json")
    assert asked.code == 0, asked.err
    shown = asked.json()
    assert isinstance(shown, dict) and shown["result"] == "requested"
    assert isinstance(shown["schedule"], dict) and shown["schedule"]["abort_requested"] == "cancel"
    text = cli("scheduler", "inspect", str(sid), "--conn", str(db)).out
    assert re.search(r"^abort requested\s+cancel$", text, re.MULTILINE)
    unknown = cli("scheduler", "abort", "ops.nothing", "--conn", str(db))
    assert unknown.code != 0 and "ops.nothing" in unknown.err


# -- pause, resume, cancel ------------------------------------------------------------------


def test_pause_resume_cancel(cli: Cli, db: Path) -> None:
    sid = add(cli, db)
    conn = ("--conn", str(db))

    def status() -> object:
        snap = cli("scheduler", "inspect", str(sid), *conn, "--format", "json").json()
        assert isinstance(snap, dict)
        return snap["status"]

    assert cli("scheduler", "pause", str(sid), *conn).out == f"Paused schedule {sid}.\n"
    assert status() == "paused"
    listed = cli("scheduler", "list", *conn, "--format", "json").json()
    assert isinstance(listed, list) and listed[0]["status"] == "paused"
    again = cli("scheduler", "pause", str(sid), *conn)
    assert (again.code, again.out) == (0, f"Schedule {sid} is already paused.\n")

    resumed = cli("scheduler", "resume", str(sid), *conn)
    assert resumed.code == 0
    assert resumed.out.startswith(f"Resumed schedule {sid}; next firing 20")
    assert status() == "pending"
    again = cli("scheduler", "resume", str(sid), *conn)
    assert (again.code, again.out) == (
        0,
        f"Schedule {sid} is pending, not paused; nothing to resume.\n",
    )

    assert cli("scheduler", "cancel", str(sid), *conn).out == f"Cancelled schedule {sid}.\n"
    assert status() == "cancelled"
    again = cli("scheduler", "cancel", str(sid), *conn)
    assert (again.code, again.out) == (0, f"Schedule {sid} is cancelled; nothing to cancel.\n")
    assert cli("scheduler", "pause", str(sid), *conn).out == (
        f"Schedule {sid} is cancelled; nothing to pause.\n"
    )


# -- dead letters ------------------------------------------------------------------------------


def test_dead_letter_list_and_replay(cli: Cli, db: Path) -> None:
    add(cli, db)  # a pending one, not listed
    long_error = "RuntimeError: downstream refused " + "x" * 200 + "\nTraceback (most recent"
    sid = dead_letter(db, error=long_error)
    conn = ("--conn", str(db))

    text = cli("scheduler", "dead-letter", "list", *conn)
    assert text.code == 0
    header, row = text.out.splitlines()
    assert "DEAD-LETTERED AT" in header and header.endswith("LAST ERROR")
    assert row.startswith(str(sid))
    assert "dead-lettered" in row
    assert "1/1" in row
    assert row.endswith("...")
    error_cell = row[header.index("LAST ERROR") :]
    assert error_cell.startswith("RuntimeError: downstream refused xxx")
    assert len(error_cell) == 60

    rows = cli("scheduler", "dead-letter", "list", *conn, "--format", "json").json()
    assert isinstance(rows, list) and len(rows) == 1
    assert rows[0]["schedule_id"] == str(sid)
    assert rows[0]["status"] == "dead-lettered"
    assert rows[0]["last_error"] == long_error
    assert rows[0]["dead_lettered_at"] is not None

    replay = cli("scheduler", "dead-letter", "replay", str(sid), *conn)
    assert (replay.code, replay.out, replay.err) == (0, f"Replayed schedule {sid}.\n", "")
    snap = cli("scheduler", "inspect", str(sid), *conn, "--format", "json").json()
    assert isinstance(snap, dict)
    assert (snap["status"], snap["attempts"], snap["last_error"]) == ("pending", 0, None)
    assert snap["dead_lettered_at"] is None
    assert cli("scheduler", "dead-letter", "list", *conn).out == "no dead-lettered schedules\n"

    again = cli("scheduler", "dead-letter", "replay", str(sid), *conn)
    assert again.code == 1
    assert again.err.strip() == f"hexeract: error: not replayable: schedule {sid} is pending"


# -- environment ---------------------------------------------------------------------------


def test_database_url_env(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "from-env.db"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    result = cli("scheduler", "add", "--in", "1m", "--event-type", "x")
    assert result.code == 0
    assert db.exists()
    listed = cli("scheduler", "list", "--format", "json").json()
    assert isinstance(listed, list) and listed[0]["schedule_id"] == result.out.strip()
    # --conn wins over the environment
    other = tmp_path / "other.db"
    assert cli("scheduler", "list", "--conn", str(other)).code == 1
    monkeypatch.setenv("DATABASE_URL", "sqlite://relative.db")
    assert cli("scheduler", "list").code == 1
    add(cli, tmp_path / "relative.db")
    assert cli("scheduler", "list").code == 0
    monkeypatch.setenv("DATABASE_URL", "redis://localhost/0")
    bad = cli("scheduler", "list")
    assert bad.code == 2
    assert "unsupported connection scheme 'redis' (from $DATABASE_URL)" in bad.err


def test_default_database(cli: Cli) -> None:
    path = default_database_path()
    assert not path.parent.exists()
    result = cli("scheduler", "add", "--in", "1m", "--event-type", "x")
    assert result.code == 0, result.err
    assert path.exists()
    listed = cli("scheduler", "list", "--format", "json").json()
    assert isinstance(listed, list) and len(listed) == 1


def test_table_env(cli: Cli, db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXERACT_SCHEDULER_TABLE", "app_schedules")
    sid = add(cli, db)
    with SqliteScheduleStore.open(db, table="app_schedules", create=False) as store:
        assert store.inspect(sid) is not None
    assert cli("scheduler", "inspect", str(sid), "--conn", str(db)).code == 0
    # --table wins over the environment
    other = cli("scheduler", "list", "--conn", str(db), "--table", "scheduled_messages")
    assert other.code == 1
    schema = cli("scheduler", "schema")
    assert "CREATE TABLE IF NOT EXISTS app_schedules" in schema.out
    monkeypatch.setenv("HEXERACT_SCHEDULER_TABLE", "bad-name")
    bad = cli("scheduler", "list", "--conn", str(db))
    assert bad.code == 2
    assert "HEXERACT_SCHEDULER_TABLE" in bad.err and "invalid table name 'bad-name'" in bad.err


# -- schema --------------------------------------------------------------------------------


def test_schema(cli: Cli, tmp_path: Path) -> None:
    sqlite = cli("scheduler", "schema")
    assert sqlite.code == 0
    assert "CREATE TABLE IF NOT EXISTS scheduled_messages" in sqlite.out
    assert "idx_scheduled_messages_pending" in sqlite.out
    custom = cli("scheduler", "schema", "--table", "jobs")
    assert "CREATE TABLE IF NOT EXISTS jobs" in custom.out
    pg = cli("scheduler", "schema", "--dialect", "postgres", "--table", "jobs")
    assert pg.code == 0
    assert "JSONB" in pg.out and "TIMESTAMPTZ" in pg.out and "jobs" in pg.out
    assert list(tmp_path.iterdir()) == []  # offline: no database anywhere
    # The printed DDL is what the store creates: running it gives a table the store adopts.
    import apsw

    db = tmp_path / "ddl.db"
    conn = apsw.Connection(str(db))
    conn.execute(sqlite.out)
    conn.close()
    assert cli("scheduler", "list", "--conn", str(db)).out == "no pending schedules\n"


# -- secrets -------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["scheduler", "list"], ["scheduler", "inspect", ANY_ID]])
def test_password_never_printed(cli: Cli, argv: list[str]) -> None:
    conn = "postgresql://scheduler:s3cr3t-pw@127.0.0.1:1/app?connect_timeout=1"
    result = cli(*argv, "--conn", conn)
    assert result.code == 1
    assert "s3cr3t-pw" not in result.out + result.err
    assert result.err.startswith("hexeract: error: ")


def test_redact_and_scrub() -> None:
    assert redact_conn("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_conn("postgres://u:p@ss@h/db") == "postgres://u:***@h/db"
    assert redact_conn("postgresql://h/db?user=u&password=secret") == (
        "postgresql://h/db?user=u&password=***"
    )
    assert redact_conn("host=h password=secret dbname=d") == "host=h password=*** dbname=d"
    assert redact_conn("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_conn("/var/lib/x.db") == "/var/lib/x.db"
    conn = "postgresql://u:s%40cret@h/db"
    assert scrub("auth failed for s@cret and s%40cret", conn) == "auth failed for *** and ***"


# -- connection strings --------------------------------------------------------------------


def test_parse_conn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert parse_conn("sqlite:///var/lib/x.db").path == Path("/var/lib/x.db")
    assert parse_conn("sqlite:////var/lib/x.db").path == Path("/var/lib/x.db")
    assert parse_conn("sqlite://rel/x.db").path == Path("rel/x.db")
    assert parse_conn("plain.db").path == Path("plain.db")
    assert parse_conn("~/x.db").path == Path.home() / "x.db"
    pg = parse_conn("postgres://u:pw@h/db")
    assert (pg.kind, pg.url, pg.display()) == (
        "postgres",
        "postgres://u:pw@h/db",
        "postgres://u:***@h/db",
    )
    assert parse_conn("postgresql://h/db").kind == "postgres"
    default = parse_conn(None)
    assert (default.path, default.source) == (default_database_path(), "default")
    monkeypatch.setenv("DATABASE_URL", "sqlite:///env.db")
    assert (parse_conn(None).path, parse_conn(None).source) == (Path("/env.db"), "DATABASE_URL")
    monkeypatch.setenv("DATABASE_URL", "")
    assert parse_conn(None).source == "default"
    for bad in ("oracle://h/db", "sqlite://", "sqlite:///", "postgresql+psycopg://h/db"):
        with pytest.raises(UnsupportedConnection):
            parse_conn(bad)


@pytest.mark.parametrize(
    "conn",
    [
        "host=db.internal dbname=app user=app password=hunter2",
        "dbname=app",
        "  PORT = 5433 host=x",
        "service=scheduler",
    ],
)
def test_a_libpq_keyword_value_string_is_a_postgresql_connection(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conn: str
) -> None:
    target = parse_conn(conn)
    assert (target.kind, target.url, target.path) == ("postgres", conn, None)
    assert "hunter2" not in target.display()
    # from $DATABASE_URL, through a command: it never becomes a file in the working directory
    monkeypatch.setenv("DATABASE_URL", conn + " connect_timeout=1 port=1 host=127.0.0.1")
    result = cli("scheduler", "add", "--event-type", "e", "--in", "1m")
    assert result.code == 1 and "hunter2" not in result.err
    assert list(tmp_path.iterdir()) == []
    # a file whose name merely contains '=' is still a path
    assert parse_conn("backup=1.db").kind == "sqlite"


# -- the worker's arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sink", "message"),
    [
        ("tests.no_such_module:sink", "cannot import sink module 'tests.no_such_module'"),
        ("tests.cli_sinks:missing", "has no attribute 'missing'"),
        ("tests.cli_sinks:not_a_sink", "expected a ScheduleSink or a callable"),
        ("tests.cli_sinks:RecordingSink", "is a class: expose an instance"),
    ],
)
def test_worker_bad_sink_is_a_usage_error(cli: Cli, db: Path, sink: str, message: str) -> None:
    repo = Path(__file__).resolve().parent.parent
    result = cli("scheduler", "worker", "--conn", str(db), "--sink", sink, "--app-dir", str(repo))
    assert result.code == 2
    assert message in result.err
    assert not db.exists()


def test_worker_bad_settings_are_a_usage_error(cli: Cli, db: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    result = cli(
        "scheduler",
        "worker",
        "--conn",
        str(db),
        "--sink",
        "tests.cli_sinks:record",
        "--app-dir",
        str(repo),
        "--lease",
        "1s",
        "--dispatch-timeout",
        "30s",
    )
    assert result.code == 2
    assert "usage: hexeract scheduler worker" in result.err
    assert "lease" in result.err
    assert not db.exists()
    assert cli("scheduler", "worker", "--sink", "a:b", "--poll-interval", "soon").code == 2
    beat = cli("scheduler", "worker", "--conn", str(db), "--sink", SINK, "--app-dir", str(repo),
               "--lease", "1s", "--heartbeat", "2s")  # fmt: skip
    assert beat.code == 2 and "--heartbeat must be shorter" in beat.err
    snoozes = cli("scheduler", "worker", "--conn", str(db), "--sink", SINK, "--max-snoozes", "-1")
    assert snoozes.code == 2 and "--max-snoozes" in snoozes.err
    assert not db.exists()


# -- formatting ------------------------------------------------------------------------------


def test_parse_duration() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("5m") == timedelta(minutes=5)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("1d") == timedelta(days=1)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("0.5s") == timedelta(milliseconds=500)
    assert parse_duration("7") == timedelta(seconds=7)
    for bad in ("", "s", "5x", "-5s", "5 m", "m5", "1h 30m", "1e3s"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)


def test_one_line_and_table() -> None:
    assert one_line(None) == "-"
    assert one_line("a\n\tb\x1b[31m  c") == "a b [31m c"
    assert one_line("x" * 10, 8) == "xxxxx..."
    assert one_line("short", 8) == "short"
    assert format_table(("A", "BB"), [("xyz", "1"), ("q", "22")]) == "A    BB\nxyz  1\nq    22"
    assert format_pending([]) == "no pending schedules"
    assert format_dead_letter([]) == "no dead-lettered schedules"


def _snapshot(status: ScheduleStatus) -> ScheduleSnapshot:
    message = ScheduledMessage.delay(
        Target.outbox(), datetime(2026, 3, 1, 12, tzinfo=UTC), "report.daily", {}
    )
    return ScheduleSnapshot(
        schedule_id=message.schedule_id,
        status=status,
        scheduled_for=message.scheduled_for,
        attempts=1,
        max_attempts=5,
        trigger=message.trigger,
        last_error="boom" if status is ScheduleStatus.DEAD_LETTERED else None,
        event_type=message.event_type,
        target=message.target,
        payload_json=message.payload_json,
        leased_until=None,
        created_at=message.scheduled_for,
        delivered_at=None,
        cancelled_at=None,
        dead_lettered_at=(
            message.scheduled_for if status is ScheduleStatus.DEAD_LETTERED else None
        ),
    )


MALFORMED_ROW = MalformedSchedule(
    schedule_id=uuid.UUID(ANY_ID),
    raw_id=ANY_ID,
    reason="scheduled_for is not a timestamp: '2099-02-30T00:00:00.000Z'",
    status=ScheduleStatus.PAUSED,
)


@pytest.mark.parametrize(
    ("formatter", "status"),
    [(format_pending, ScheduleStatus.PENDING), (format_dead_letter, ScheduleStatus.DEAD_LETTERED)],
)
def test_listings_show_a_malformed_row_with_its_id_status_and_reason(
    formatter: Callable[[Sequence[object]], str], status: ScheduleStatus
) -> None:
    healthy = _snapshot(status)
    lines = formatter([healthy, MALFORMED_ROW]).splitlines()
    assert len(lines) == 3
    assert lines[1].startswith(str(healthy.schedule_id))
    assert "report.daily" in lines[1]
    assert lines[2].split()[:2] == [ANY_ID, "malformed"]
    assert lines[2].endswith("scheduled_for is not a timestamp: '2099-02-30T00:00:00.000Z'")
    # the healthy row's columns stay aligned under the header
    assert lines[0].index("STATUS") == lines[1].index(status.value) == lines[2].index("malformed")


def test_listings_json_show_a_malformed_row() -> None:
    healthy = _snapshot(ScheduleStatus.PENDING)
    items = [snapshot_json(item) for item in (healthy, MALFORMED_ROW)]
    assert items[0]["schedule_id"] == str(healthy.schedule_id)
    assert items[1] == {
        "schedule_id": ANY_ID,
        "status": "malformed",
        "row_status": "paused",
        "malformed": "scheduled_for is not a timestamp: '2099-02-30T00:00:00.000Z'",
    }
    json.dumps(items)


# -- PostgreSQL ------------------------------------------------------------------------------


@pytest.mark.postgres
def test_every_admin_command_on_postgres(cli: Cli) -> None:
    from urllib.parse import urlsplit

    from tests.pg import drop_table, require_server, unique_table

    url = require_server()
    password = urlsplit(url).password or "\0no password\0"
    table = unique_table("cli")
    conn = ("--conn", url, "--table", table)
    outputs: list[str] = []

    def run(*argv: str) -> Result:
        result = cli(*argv, *conn)
        outputs.append(result.out + result.err)
        return result

    try:
        missing = run("scheduler", "list")
        assert missing.code == 1
        assert f"no table '{table}'" in missing.err
        sid = uuid.UUID(
            run(
                "scheduler", "add", "--in", "1h", "--event-type", "pg.x", "--payload", "[1]"
            ).out.strip()
        )
        rows = run("scheduler", "list", "--format", "json").json()
        assert isinstance(rows, list) and rows[0]["schedule_id"] == str(sid)
        snap = run("scheduler", "inspect", str(sid), "--format", "json").json()
        assert isinstance(snap, dict) and snap["payload"] == [1]
        assert run("scheduler", "pause", str(sid)).out == f"Paused schedule {sid}.\n"
        assert run("scheduler", "resume", str(sid)).code == 0
        replay = run("scheduler", "dead-letter", "replay", str(sid))
        assert replay.code == 1 and "is pending" in replay.err
        assert run("scheduler", "cancel", str(sid)).out == f"Cancelled schedule {sid}.\n"
        assert run("scheduler", "dead-letter", "list").out == "no dead-lettered schedules\n"
        assert run("scheduler", "list").out == "no pending schedules\n"
    finally:
        drop_table(url, table)
    assert not any(password in text for text in outputs)


def test_worker_sink_module_that_fails_to_import_is_a_runtime_error(
    cli: Cli, db: Path, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "broken_sink.py").write_text("raise RuntimeError('config missing')\n")
    (app / "needs_dep_sink.py").write_text("import no_such_dependency_xyz\n")
    for module, message in (
        ("broken_sink", "RuntimeError('config missing')"),
        ("needs_dep_sink", "No module named 'no_such_dependency_xyz'"),
    ):
        result = cli(
            "scheduler",
            "worker",
            "--conn",
            str(db),
            "--sink",
            f"{module}:sink",
            "--app-dir",
            str(app),
        )
        assert result.code == 1
        assert f"importing sink module '{module}' failed" in result.err
        assert message in result.err
    assert not db.exists()


# -- read-only commands never write ------------------------------------------------------


def _file_state(db: Path) -> tuple[bytes, list[str]]:
    """The database file's bytes and the names of every file beside it."""
    return db.read_bytes(), sorted(p.name for p in db.parent.iterdir())


# needs readonly open from wt-sqlite: until SqliteScheduleStore.open(readonly=True) is
# there, opening a table the reference created adopts it (indexes, bookkeeping, WAL).
def test_read_only_commands_leave_a_reference_created_file_byte_for_byte_unchanged(
    cli: Cli, tmp_path: Path
) -> None:
    from tests.test_reference_compat import DEAD, DUE, REFERENCE_DDL, _insert

    folder = tmp_path / "ref"
    folder.mkdir()
    db = folder / "hexeract.db"
    conn = apsw.Connection(str(db))
    conn.execute(REFERENCE_DDL)
    _insert(conn, DUE)
    _insert(conn, DEAD, attempts=3, last_error="boom", dead_lettered_at="2026-03-01T10:00:00.000Z")
    conn.close()
    before = _file_state(db)
    for argv in (
        ["scheduler", "list"],
        ["scheduler", "list", "--format", "json"],
        ["scheduler", "runs"],
        ["scheduler", "inspect", str(DUE)],
        ["scheduler", "dead-letter", "list"],
    ):
        result = cli(*argv, "--conn", str(db))
        assert result.code == 0, (argv, result.err)
        if argv[1] == "runs":  # the reference's table has no run log
            assert result.out == "No runs recorded.\n"
        else:
            assert str(DUE) in result.out or str(DEAD) in result.out, (argv, result.out)
        assert _file_state(db) == before, argv


def test_read_only_commands_leave_no_wal_or_shm_beside_a_wal_file(cli: Cli, tmp_path: Path) -> None:
    """A SQLITE_OPEN_READONLY reader creates `-wal`/`-shm` and may not delete them."""
    folder = tmp_path / "wal"
    folder.mkdir()
    db = folder / "hexeract.db"
    assert cli("scheduler", "add", "--conn", str(db), "--in", "1h", "--event-type", "x").code == 0
    listed = cli("scheduler", "list", "--format", "json", "--conn", str(db))
    schedule_id = json.loads(listed.out)[0]["schedule_id"]
    before = _file_state(db)
    assert before[1] == ["hexeract.db"] and before[0][18:20] == b"\x02\x02"  # WAL mode
    for argv in (
        ["scheduler", "list"],
        ["scheduler", "stats"],
        ["scheduler", "inspect", schedule_id],
        ["scheduler", "dead-letter", "list"],
        ["scheduler", "prune", "--dry-run", "--older-than", "1d"],
    ):
        result = cli(*argv, "--conn", str(db))
        assert result.code == 0, (argv, result.err)
        assert _file_state(db) == before, argv


def test_open_store_readonly_goes_with_create_false_only(db: Path) -> None:
    from hexeract_lite import InvalidConfiguration
    from hexeract_lite.connect import open_store

    with pytest.raises(InvalidConfiguration, match="readonly"):
        open_store(str(db), table="t", create=True, readonly=True)
    assert not db.exists()


def test_worker_help_states_the_configs_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """Each duration flag's help shows the config's own default, in words parse_duration reads
    back, and --batch-size its default count."""
    from hexeract_lite.cli.args import parse_duration

    assert main(["scheduler", "worker", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    defaults = SchedulerWorkerConfig()
    for flag, field in (
        ("--poll-interval", "poll_interval"),
        ("--lease", "lease"),
        ("--dispatch-timeout", "dispatch_timeout"),
        ("--retry-base-delay", "retry_base_delay"),
        ("--retry-max-delay", "retry_max_delay"),
        ("--min-cycle-delay", "min_cycle_delay"),
    ):
        shown = text.rsplit(f"{flag} DURATION", 1)[1].split("(default: ", 1)[1].split(")", 1)[0]
        assert parse_duration(shown) == getattr(defaults, field), flag
    shown = text.rsplit("--batch-size N", 1)[1].split("(default: ", 1)[1].split(")", 1)[0]
    assert int(shown) == defaults.batch_size


SINK = "tests.cli_sinks:record"


@pytest.mark.parametrize(
    "flag",
    [
        "--lease",
        "--poll-interval",
        "--retry-base-delay",
        "--retry-max-delay",
        "--min-cycle-delay",
    ],
)
def test_worker_duration_past_the_year_9999_is_a_usage_error_naming_it(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A worker setting so long that now plus it is past the year 9999 is a usage error naming
    the flag, before the file is opened or created."""
    db = tmp_path / "w.db"
    argv = ["scheduler", "worker", "--sink", SINK, "--conn", str(db), flag, "9999999d"]
    if flag == "--retry-base-delay":
        argv += ["--retry-max-delay", "9999999d"]
    assert main(argv) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert flag in last and "9999999 days" in last
    assert not db.exists(), "nothing written"


def test_worker_dispatch_timeout_too_long_for_any_lease_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    argv = ["scheduler", "worker", "--sink", SINK, "--conn", str(db)]
    assert main([*argv, "--dispatch-timeout", "9999999d", "--lease", "99999999d"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--lease must be at most" in last and "99999999 days" in last
    assert not db.exists()


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["prune", "--older-than", "-5d"], "-5d"),
        (["prune", "--older-than=-5d"], "-5d"),
        (["prune", "--older-than", "-1h30m"], "-1h30m"),
        (["add", "--in", "-5m", "--event-type", "t.x"], "-5m"),
        (["add", "--every", "-5m", "--event-type", "t.x"], "-5m"),
        (["ensure", "--name", "a.b", "--every", "-5m", "--event-type", "t.x"], "-5m"),
        (["reschedule", "--name", "a.b", "--in", "-5m"], "-5m"),
    ],
)
def test_a_negative_duration_is_a_usage_error_naming_it(
    tmp_path: Path, argv: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A negative duration is a usage error that names the value (where argparse alone would
    take ``-5d`` for an option), before the file is created."""
    db = tmp_path / "s.db"
    assert main(["scheduler", *argv, "--conn", str(db)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"invalid duration {value!r}: a duration cannot be negative" in last, last
    assert not db.exists()


@pytest.mark.parametrize("text", ["5M", "1h30M", "1.5M"])
def test_an_upper_case_m_duration_is_refused_not_read_as_minutes(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``M`` is ambiguous (systemd, whose spans the parser follows, reads months): refused,
    never read as minutes; ``MS`` stays milliseconds."""
    db = tmp_path / "s.db"
    assert main(["scheduler", "add", "--in", text, "--event-type", "t.x", "--conn", str(db)]) == 2
    assert f"invalid duration {text!r}: M is ambiguous" in capsys.readouterr().err
    assert not db.exists()
    from hexeract_lite.cli.args import parse_duration

    assert parse_duration("5MS") == timedelta(milliseconds=5), "MS stays milliseconds"
    assert parse_duration("5m") == timedelta(minutes=5)


def test_a_command_on_a_row_only_the_store_can_read_is_decided_by_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-memory rehearsal of a change skips a row it cannot copy: the store's own
    answer (here: the malformed row is cancelled, and said to be malformed) is what the
    command says."""
    db = tmp_path / "m.db"
    _source_of_three(db, last_malformed=True)
    assert main(["scheduler", "cancel", str(uuid.UUID(int=3)), "--conn", str(db)]) == 0
    assert "(its row is malformed: scheduled_for is not a timestamp" in capsys.readouterr().out
    assert main(["scheduler", "cancel", str(uuid.UUID(int=2)), "--conn", str(db)]) == 0


def test_dead_letter_replay_takes_a_name_as_the_readme_says(cli: Cli, tmp_path: Path) -> None:
    """``dead-letter replay --name N`` replays the named schedule (the README lists it among
    the commands taking --name); --name with --all, or neither, is a usage error; an unknown
    name exits 1, naming it."""
    db = tmp_path / "n.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        SchedulerControl(store).ensure("myapp.mail.once", event_type="e", at=due, max_attempts=1)
        SchedulerWorker(store, lambda _: 1 / 0, TIGHT).run_once()
        assert store.stats().dead_lettered == 1
    done = cli("scheduler", "dead-letter", "replay", "--name", "myapp.mail.once", "--conn", str(db))
    assert (done.code, done.err) == (0, "")
    assert done.out.startswith("Replayed schedule ")
    with SqliteScheduleStore.open(db) as store:
        assert store.stats().pending == 1
    for argv in (["--all", "--name", "myapp.mail.once"], []):
        refused = cli("scheduler", "dead-letter", "replay", *argv, "--conn", str(db))
        assert refused.code == 2 and "Traceback" not in refused.err, refused.err
    replay = ["scheduler", "dead-letter", "replay"]
    missing = cli(*replay, "--name", "myapp.nothing", "--conn", str(db))
    assert missing.code == 1 and "myapp.nothing" in missing.err


def test_an_empty_conn_is_a_usage_error_and_writes_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--conn ""`` (a script's unset variable) is a usage error, never read as $DATABASE_URL
    or the default database: nothing is opened, changed or created."""
    other = tmp_path / "other.db"
    with SqliteScheduleStore.open(other) as store:
        store.insert(
            ScheduledMessage.delay(
                Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "e", {}
            ),
            1,
        )
        SchedulerWorker(store, lambda _: 1 / 0, TIGHT).run_once()
        assert store.stats().dead_lettered == 1
    monkeypatch.setenv("DATABASE_URL", str(other))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for argv in (["dead-letter", "replay", "--all"], ["stats"], ["list"]):
        done = cli("scheduler", *argv, "--conn", "")
        assert done.code == 2, (argv, done.out, done.err)
        assert "--conn" in done.err and "empty" in done.err
    with SqliteScheduleStore.open(other) as store:
        assert store.stats().dead_lettered == 1
    assert not (tmp_path / "xdg").exists()


def _not_utf8(db: Path, sid: uuid.UUID, column: str = "event_type") -> None:
    conn = apsw.Connection(str(db))
    conn.execute(
        f"UPDATE scheduled_messages SET {column} = CAST(x'6576ff' AS TEXT) WHERE schedule_id = ?",
        (sid.bytes,),
    )
    conn.close()


def test_a_row_whose_text_is_not_utf8_is_operable_from_the_cli(cli: Cli, db: Path) -> None:
    """Listed and inspected as malformed, paused and cancelled; never a traceback."""
    sid, other = add(cli, db), add(cli, db)
    _not_utf8(db, sid)
    reason = "event_type is not UTF-8 text: b'ev\\xff'"
    listed = cli("scheduler", "list", "--conn", str(db))
    assert listed.code == 0 and f"{sid}  malformed  {reason}" in listed.out
    assert str(other) in listed.out
    as_json = cli("scheduler", "list", "--conn", str(db), "--format", "json")
    assert as_json.code == 0
    items = as_json.json()
    assert isinstance(items, list)
    [odd] = [item for item in items if item["schedule_id"] == str(sid)]
    assert odd["malformed"] == reason
    inspected = cli("scheduler", "inspect", str(sid), "--conn", str(db))
    assert inspected.code == 1 and "malformed" in inspected.err and reason in inspected.err
    assert "Traceback" not in inspected.err and "Unexpected" not in inspected.err
    paused = cli("scheduler", "pause", str(sid), "--conn", str(db))
    assert paused.code == 0, paused.err
    assert paused.out.startswith(f"Paused schedule {sid} (its row is malformed: {reason})")
    cancelled = cli("scheduler", "cancel", str(sid), "--conn", str(db))
    assert cancelled.code == 0, cancelled.err
    assert cancelled.out.startswith(f"Cancelled schedule {sid} (its row is malformed")
    again = cli("scheduler", "cancel", str(sid), "--conn", str(db))
    assert again.code == 0 and "nothing to cancel" in again.out
    listed = cli("scheduler", "list", "--conn", str(db))
    assert str(sid) not in listed.out and str(other) in listed.out


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("cron_expr", "bogus cron", "cron_expr: invalid cron expression 'bogus cron'"),
        ("target_kind", "weird", "target_kind must be 'mediator', 'outbox' or 'bus', got 'weird'"),
    ],
)
def test_a_row_with_a_bad_rule_or_target_is_the_stores_to_judge_not_the_users(
    cli: Cli, db: Path, column: str, value: str, reason: str
) -> None:
    """The in-memory rehearsal cannot decode such a row: its refusal is no usage error.
    ``update``, ``reschedule``, ``run-now`` and ``backfill`` exit 1 saying the stored row is
    malformed, and write nothing; ``pause`` and ``cancel`` apply, saying it is malformed."""
    sid = add(cli, db, "--cron", "0 9 * * *")
    conn = apsw.Connection(str(db))
    conn.execute(f"UPDATE scheduled_messages SET {column} = ?", (value,))
    before = conn.execute("SELECT * FROM scheduled_messages").fetchall()
    window = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"]
    for argv in (
        ["update", "--payload", "{}"],
        ["reschedule", "--in", "5m"],
        ["run-now"],
        ["backfill", *window],
    ):
        refused = cli("scheduler", *argv, str(sid), "--conn", str(db))
        assert refused.code == 1, refused.err
        assert f"{sid} in the table scheduled_messages" in refused.err, refused.err
        assert f"is malformed: {reason}" in refused.err and "usage:" not in refused.err
    assert conn.execute("SELECT * FROM scheduled_messages").fetchall() == before
    conn.close()
    for command, done in (("pause", "Paused"), ("cancel", "Cancelled")):
        applied = cli("scheduler", command, str(sid), "--conn", str(db))
        assert applied.code == 0, applied.err
        assert applied.out.startswith(f"{done} schedule {sid} (its row is malformed: {reason}")


def test_replaying_a_dead_letter_whose_text_is_not_utf8_names_the_column(
    cli: Cli, db: Path
) -> None:
    sid = dead_letter(db)
    _not_utf8(db, sid, "payload")
    dead = cli("scheduler", "dead-letter", "list", "--conn", str(db))
    assert dead.code == 0 and f"{sid}  malformed  payload is not UTF-8 text" in dead.out
    replayed = cli("scheduler", "dead-letter", "replay", str(sid), "--conn", str(db))
    assert replayed.code == 1 and "payload is not UTF-8 text" in replayed.err
    assert "Traceback" not in replayed.err


@pytest.mark.parametrize("payload", ['{"a":NaN}', '{"a":1e999}'])
def test_json_output_is_strict_json_whatever_the_stored_payload(
    cli: Cli, db: Path, payload: str
) -> None:
    sid = add(cli, db)
    conn = apsw.Connection(str(db))
    conn.execute(
        "UPDATE scheduled_messages SET payload = ? WHERE schedule_id = ?", (payload, sid.bytes)
    )
    conn.close()
    result = cli("scheduler", "list", "--conn", str(db), "--format", "json")
    assert result.code == 0, result.err
    [item] = json.loads(result.out, parse_constant=lambda name: pytest.fail(name))
    assert item["status"] == "malformed", "as the worker finds it: never a number"
    assert item["malformed"].startswith("payload is not JSON"), item
    shown = cli("scheduler", "inspect", str(sid), "--conn", str(db), "--format", "json")
    assert shown.code == 1 and "payload is not JSON" in shown.err, shown
