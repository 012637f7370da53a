"""Review round 5: the defects the round-4 closing note listed as noticed and left alone
(worker settings past the year 9999, negative durations on the command line, refused
commands that upgraded a file, ``error=None``, JSONB numbers, ensure's cron text, the
progress line), each checked from outside: real files, real processes, every store."""

from __future__ import annotations

import hashlib
import os
import select
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import (
    EnsureResult,
    InMemoryScheduleStore,
    RetryPolicy,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    ScheduleStore,
    Target,
    name_id,
)
from hexeract_lite.cli import main
from hexeract_lite.errors import InvalidArgument
from hexeract_lite.settlement import Settlement
from hexeract_lite.sinks import CallableSink
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import FrozenTime

LEASE = timedelta(seconds=30)
SINK = "tests.cli_sinks:record"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- 1. worker settings so long that now + them is past the year 9999 --------------------


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
    """``--lease 9999999d`` was accepted: the worker then logged a traceback at every
    backoff (claim_due refused the lease) and never exited."""
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
    "field",
    ["poll_interval", "lease", "retry_base_delay", "retry_max_delay", "min_cycle_delay"],
)
def test_config_refuses_a_duration_past_the_year_9999_naming_it(field: str) -> None:
    huge = timedelta(days=9999999)
    fields = {field: huge}
    if field == "retry_base_delay":
        fields["retry_max_delay"] = huge
    with pytest.raises(InvalidArgument, match=rf"{field} .*9999999 days"):
        SchedulerWorkerConfig(**fields)  # type: ignore[arg-type]


def test_config_takes_the_longest_setting_exactly() -> None:
    longest = timedelta(days=36500)
    config = SchedulerWorkerConfig(lease=longest, retry_max_delay=longest, poll_interval=longest)
    assert config.lease == longest
    with pytest.raises(InvalidArgument, match="lease"):
        SchedulerWorkerConfig(lease=longest + timedelta(milliseconds=1))


def test_retry_policy_and_retention_refuse_a_duration_past_the_year_9999() -> None:
    huge = timedelta(days=9999999)
    with pytest.raises(InvalidArgument, match=r"max_delay.*9999999 days"):
        RetryPolicy(max_delay=huge)
    with pytest.raises(InvalidArgument, match=r"retention.*9999999 days"):
        SchedulerWorker(InMemoryScheduleStore(), CallableSink(lambda m: None), retention=huge)


# --- 4. mark_failed / mark_dead_lettered with error=None --------------------------------


@pytest.mark.parametrize("kind", ["failed", "dead_lettered"])
def test_error_none_is_refused_like_settle_and_writes_nothing(
    store: ScheduleStore, frozen: FrozenTime, kind: str
) -> None:
    """``mark_failed(..., error=None)`` stored the text "None" as last_error, while
    ``settle([Settlement.failed(..., None, ...)])`` refused it: the single method now
    does what its settlement does, on every store."""
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", {})
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    sid, lease = msg.schedule_id, occ.leased_until
    with pytest.raises(InvalidArgument, match="error=None"):
        if kind == "failed":
            store.mark_failed(sid, timedelta(seconds=1), None, lease)  # type: ignore[arg-type]
        else:
            store.mark_dead_lettered(sid, None, lease)  # type: ignore[arg-type]
    item = (
        Settlement.failed(sid, timedelta(seconds=1), None, lease)  # type: ignore[arg-type]
        if kind == "failed"
        else Settlement.dead_lettered(sid, None, lease)  # type: ignore[arg-type]
    )
    with pytest.raises(InvalidArgument, match="error=None"):
        store.settle([item])
    snap = store.inspect(sid)
    assert snap is not None and snap.last_error is None and snap.leased_until == lease
    assert snap.status is ScheduleStatus.PENDING
    # a non-str error is still recorded as its text
    assert store.mark_dead_lettered(sid, ValueError("boom"), lease)  # type: ignore[arg-type]
    snap = store.inspect(sid)
    assert snap is not None and snap.last_error == "boom"


# --- 2. a negative duration on the command line ----------------------------------------


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
    """``prune --older-than -5d`` said only "expected one argument" (argparse took -5d
    for an option), without the value."""
    db = tmp_path / "s.db"
    assert main(["scheduler", *argv, "--conn", str(db)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"invalid duration {value!r}: a duration cannot be negative" in last, last
    assert not db.exists()


# --- 7. the progress line on a terminal -------------------------------------------------


def _on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``hexeract`` in a process whose stderr is a terminal (a pty); the exit code
    and everything written there."""
    master, slave = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hexeract_lite", *argv],
            stderr=slave,
            stdout=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    finally:
        os.close(slave)
    shown = b""
    while select.select([master], [], [], 1)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end is closed: all was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.returncode, shown.decode()


def _source_of_three(path: Path, *, last_malformed: bool) -> None:
    with SqliteScheduleStore.open(path) as store:
        for n in (1, 2, 3):
            at = datetime(2030, 1, 1, tzinfo=UTC)
            sid = uuid.UUID(int=n)
            store.insert(
                ScheduledMessage.delay(Target.mediator(), at, "t.x", {}, schedule_id=sid), 5
            )
    if last_malformed:
        conn = apsw.Connection(str(path))
        conn.execute(
            "UPDATE scheduled_messages SET scheduled_for = 'garbage' WHERE schedule_id = ?",
            (uuid.UUID(int=3).bytes,),
        )
        conn.close()


def test_progress_line_ends_with_the_final_count(tmp_path: Path) -> None:
    """The line was rewritten at most every 0.2 s, and the last count given within
    that time was never shown: ``read: 1`` after reading 3."""
    _source_of_three(tmp_path / "src.db", last_malformed=False)
    code, shown = _on_a_terminal(
        [
            "scheduler",
            "migrate",
            "--from",
            str(tmp_path / "src.db"),
            "--to",
            str(tmp_path / "dst.db"),
            "--batch-size",
            "1",
        ]
    )
    assert code == 0, shown
    last = shown.replace("\r\n", "\n").split("\n")[0].split("\r")[-1]
    assert last.startswith("read: 3"), repr(shown)


def test_an_error_after_progress_starts_on_a_fresh_line(tmp_path: Path) -> None:
    """The error was printed on the progress line: ``read: 1hexeract: error: ...``."""
    _source_of_three(tmp_path / "src.db", last_malformed=True)
    code, shown = _on_a_terminal(
        [
            "scheduler",
            "migrate",
            "--from",
            str(tmp_path / "src.db"),
            "--to",
            str(tmp_path / "dst.db"),
            "--batch-size",
            "1",
        ]
    )
    assert code == 1
    lines = shown.replace("\r\n", "\n").split("\n")
    error = next(line for line in lines if "error:" in line)
    assert error.startswith("hexeract: error: the copy stopped after 2 rows read"), repr(shown)
    assert lines[0].split("\r")[-1].startswith("read: 2"), repr(shown)


# --- 6. ensure compares a cron rule's meaning, not its text ------------------------------


@pytest.mark.parametrize(
    ("stored", "declared"),
    [
        ("@daily", "0 0 * * *"),
        ("0 0 * * *", "@midnight"),
        ("0 0 * * 0", "0 0 * * 7"),
        ("0 0 * * *", "0 0 0 * * *"),
        ("CRON_TZ=Europe/Paris 0 3 * * *", "CRON_TZ=Europe/Paris  0  3 * * *"),
    ],
)
def test_ensure_of_the_same_cron_rule_in_other_words_is_unchanged(
    store: ScheduleStore, frozen: FrozenTime, stored: str, declared: str
) -> None:
    """``@daily`` stored, ``0 0 * * *`` declared was UPDATED: the row rewritten and its
    next firing placed again (attempts and last error reset) at every start."""
    control = SchedulerControl(store)
    assert control.ensure("app.daily", cron=stored, event_type="t.x") is EnsureResult.CREATED
    before = control.inspect(name_id("app.daily"))
    assert control.ensure("app.daily", cron=declared, event_type="t.x") is EnsureResult.UNCHANGED
    assert control.inspect(name_id("app.daily")) == before, "nothing written"


@pytest.mark.parametrize(
    ("stored", "declared"),
    [
        ("@daily", "0 0 * * 1"),
        ("0 * * * *", "0 0-23 * * *"),  # the same hours, another daylight saving rule
        ("@daily", "CRON_TZ=Europe/Paris @daily"),
        ("0 0 1 * *", "0 0 1 * 1"),  # day of month OR day of week
    ],
)
def test_ensure_of_another_cron_meaning_is_updated(
    store: ScheduleStore, frozen: FrozenTime, stored: str, declared: str
) -> None:
    control = SchedulerControl(store)
    control.ensure("app.rule", cron=stored, event_type="t.x")
    assert control.ensure("app.rule", cron=declared, event_type="t.x") is EnsureResult.UPDATED


def test_ensure_keeps_a_cron_schedules_first_firing_once_it_exists(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """``first=`` of a cron rule is its first firing when the schedule is created; a
    later ensure with another ``first=`` (one computed from now at each start, say) is
    UNCHANGED and moves nothing (``reschedule`` moves the next firing)."""
    control = SchedulerControl(store)
    first = frozen.now() + timedelta(days=2)
    control.ensure("app.first", cron="0 * * * *", first=first, event_type="t.x")
    again = control.ensure(
        "app.first", cron="0 * * * *", first=first + timedelta(hours=5), event_type="t.x"
    )
    assert again is EnsureResult.UNCHANGED
    assert control.inspect(name_id("app.first")).scheduled_for == first


# --- 5. PostgreSQL's JSONB and floats written with an exponent ----------------------------

BIG_FLOATS = {
    "a": 1e20,
    "b": 1.23456789012345e25,
    "c": [1.7976931348623157e308, -2e16],
    "d": 1e-7,
    "e": {"n": 10**20, "text": "1e+20"},
}


def test_a_payloads_floats_come_back_as_written_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """On PostgreSQL, ``1e20`` came back the int ``10**20`` and ``1.23456789012345e25``
    as ``12345678901234500000000000`` (another number): JSONB's numeric drops a
    fraction written as an exponent. The README promises JSON payloads delivered as
    given; the memory store (the reference) and SQLite keep them."""
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", BIG_FLOATS)
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.message.payload == BIG_FLOATS
    assert repr(occ.message.payload) == repr(BIG_FLOATS), "floats stay floats, ints ints"
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.payload_json == msg.payload_json


def test_ensure_of_a_payload_with_big_floats_is_unchanged_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """On PostgreSQL every ensure of such a payload was UPDATED (the stored value read
    back differed), a write at every start."""
    control = SchedulerControl(store)
    args = {"cron": "@daily", "event_type": "t.x", "payload": BIG_FLOATS}
    assert control.ensure("app.big", **args) is EnsureResult.CREATED  # type: ignore[arg-type]
    assert control.ensure("app.big", **args) is EnsureResult.UNCHANGED  # type: ignore[arg-type]
    control.update("app.big", payload={"x": 3e30})
    [occ] = store.claim_due(frozen.shift(timedelta(days=1)), 10, LEASE)
    assert repr(occ.message.payload) == repr({"x": 3e30})


def test_a_migrated_payloads_floats_stay_floats(store: ScheduleStore, frozen: FrozenTime) -> None:
    source = InMemoryScheduleStore()
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", BIG_FLOATS)
    source.insert(msg, 5)
    store.import_records(source.export_records(None, 10))
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert repr(occ.message.payload) == repr(BIG_FLOATS)


# --- 3. a refused command leaves an older file as it was -------------------------------

UNKNOWN = "01a22fd1-6d1d-7acb-a025-718301d4b44b"
PENDING = str(uuid.UUID(int=1))
REFUSED = [
    (["pause", UNKNOWN], 1),
    (["resume", UNKNOWN], 1),
    (["cancel", UNKNOWN], 1),
    (["pause", "--name", "nope.x"], 1),
    (["reschedule", UNKNOWN, "--in", "5m"], 1),
    (["update", UNKNOWN, "--payload", "{}"], 1),
    (["update", PENDING, "--cron", "@daily"], 1),  # a delay schedule has no rule
    (["update", PENDING, "--cron", "bad"], 2),
    (["run-now", "--name", "nope.x"], 1),
    (["dead-letter", "replay", PENDING], 1),  # pending: not replayable
    (["add", "--in", "1m", "--event-type", "t.x", "--schedule-id", PENDING], 1),
    (["ensure", "--name", "a.b", "--at", "2030-01-01T00:00:00Z", "--event-type", "t.x"], None),
]


def _older_file(path: Path, version: str) -> None:
    from tests.test_sqlite_schema import _old_v1_file, _v5_file

    if version == "5":
        _v5_file(path)
    else:
        _old_v1_file(path, "version 3" if version == "3" else "spaced", version=int(version))


@pytest.mark.parametrize("version", ["1", "3", "5"])
@pytest.mark.parametrize(("argv", "code"), REFUSED)
def test_a_refused_command_leaves_an_older_file_byte_identical(
    tmp_path: Path,
    version: str,
    argv: list[str],
    code: int | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Refused with exit 1 (no such schedule, not changeable, not replayable, a
    duplicate) or 2 (a bad rule found after opening), these commands had opened the
    file for writing first, which upgraded its table to this version's schema."""
    db = tmp_path / "old.db"
    _older_file(db, version)
    if code is None:  # ensure at= of a name stored as a cron schedule: not changeable
        code = 1
        from tests.test_reference_compat import _insert

        conn = apsw.Connection(str(db))
        columns = {"trigger_kind": "cron", "cron_expr": "@daily"}
        if version != "1":  # the name column came with version 3
            columns["name"] = "a.b"
        _insert(conn, name_id("a.b"), created_at="2026-03-01T10:00:00.000Z", **columns)
        conn.close()
    before = {p.name: _sha(p) for p in tmp_path.iterdir()}
    assert main(["scheduler", *argv, "--conn", str(db)]) == code, capsys.readouterr().err
    assert {p.name: _sha(p) for p in tmp_path.iterdir()} == before


# --- probing the README's command line: an upper-case M ----------------------------------


@pytest.mark.parametrize("text", ["5M", "1h30M", "1.5M"])
def test_an_upper_case_m_duration_is_refused_not_read_as_minutes(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--in 5M`` was read as five minutes (the text is lower-cased), where systemd,
    whose spans the parser mimics (a bare number is seconds), reads five months."""
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
