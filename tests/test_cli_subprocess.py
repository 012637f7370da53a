"""The installed ``hexeract`` script, run as a real process on a ``tmp_path`` database.

The worker tests start ``hexeract scheduler worker`` with a sink from
:mod:`tests.cli_sinks`, wait for the delivery (or the dead letter) to be recorded,
stop it with SIGTERM or SIGINT and check that it exits 0 with everything settled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hexeract_lite import (
    ScheduleSnapshot,
    ScheduleStatus,
    SqliteScheduleStore,
    __version__,
)

from .cli_sinks import LOG_ENV

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the virtualenv's bin, where pip put the scripts
TIMEOUT = 20.0


def script(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: install the project (pip install -e .)"
    return str(path)


class Env:
    """A clean environment for the child processes, rooted in ``tmp_path``."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.db = tmp_path / "sched.db"
        self.sink_log = tmp_path / "sink.jsonl"
        self.vars = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "HEXERACT_SCHEDULER_TABLE", "PYTHONPATH")
        }
        self.vars.update(
            XDG_DATA_HOME=str(tmp_path / "xdg-data"),
            PYTHONUNBUFFERED="1",
            **{LOG_ENV: str(self.sink_log)},
        )

    def run(
        self, *argv: str, prog: str = "hexeract", stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script(prog), *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.vars,
            cwd=self.tmp,
            timeout=TIMEOUT,
        )

    def ok(self, *argv: str, stdin: str | None = None) -> str:
        proc = self.run(*argv, stdin=stdin)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        return proc.stdout

    def json(self, *argv: str) -> object:
        return json.loads(self.ok(*argv, "--format", "json"))

    def snapshot(self, schedule_id: uuid.UUID) -> ScheduleSnapshot:
        with SqliteScheduleStore.open(self.db, create=False) as store:
            snap = store.inspect(schedule_id)
        assert snap is not None
        return snap

    def sink_lines(self) -> list[dict[str, object]]:
        if not self.sink_log.exists():
            return []
        text = self.sink_log.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    @contextlib.contextmanager
    def worker(
        self, sink: str, *flags: str, name: str = "worker", conn: str | None = None
    ) -> Iterator[Worker]:
        log = self.tmp / f"{name}.log"
        with open(log, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(
                [
                    script("hexeract"),
                    "scheduler",
                    "worker",
                    "--conn",
                    conn or f"sqlite:///{self.db}",
                    "--sink",
                    sink,
                    "--app-dir",
                    str(REPO),
                    "--poll-interval",
                    "20ms",
                    "--log-level",
                    "debug",
                    *flags,
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=self.vars,
                cwd=self.tmp,
            )
            worker = Worker(proc, log)
            try:
                yield worker
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


class Worker:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=TIMEOUT)

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8")


def wait_until(condition: Callable[[], bool], what: str, worker: Worker | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if worker is not None and worker.proc.poll() is not None:
            pytest.fail(f"the worker exited ({worker.proc.returncode}):\n{worker.stderr()}")
        if time.monotonic() > deadline:
            detail = worker.stderr() if worker is not None else ""
            pytest.fail(f"timed out waiting for {what}\n{detail}")
        time.sleep(0.02)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


# -- entry points ------------------------------------------------------------------------


@pytest.mark.parametrize("prog", ["hexeract", "hexeract-lite"])
def test_scripts_report_their_version(env: Env, prog: str) -> None:
    proc = env.run("--version", prog=prog)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"{prog} {__version__}"


def test_python_dash_m(env: Env) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hexeract_lite", "scheduler", "schema"],
        capture_output=True,
        text=True,
        env=env.vars,
        cwd=env.tmp,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "CREATE TABLE IF NOT EXISTS scheduled_messages" in proc.stdout


def test_help_and_usage_errors(env: Env) -> None:
    help_ = env.run("scheduler", "dead-letter", "replay", "--help")
    assert help_.returncode == 0
    assert "example:" in help_.stdout
    bad = env.run("scheduler", "dead-letter", "replay", str(uuid.uuid4()), "--format", "json")
    assert bad.returncode == 2
    assert "unrecognized arguments: --format json" in bad.stderr
    bad_id = env.run("scheduler", "inspect", "nope")
    assert (bad_id.returncode, bad_id.stdout) == (2, "")
    assert "invalid schedule id 'nope'" in bad_id.stderr


# -- every command, as a process ---------------------------------------------------------------


@pytest.mark.slow
def test_commands_as_processes(env: Env) -> None:
    conn = ("--conn", str(env.db))
    missing = env.run("scheduler", "list", *conn)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"hexeract: error: no database at {env.db}"
    assert not env.db.exists()

    sid = uuid.UUID(
        env.ok(
            "scheduler",
            "add",
            *conn,
            "--in",
            "1h",
            "--event-type",
            "reminder.due",
            "--payload",
            "-",
            stdin='{"user": 42}',
        ).strip()
    )
    listed = env.ok("scheduler", "list", *conn)
    assert listed.splitlines()[0].startswith("SCHEDULE ID")
    assert str(sid) in listed
    snap = env.json("scheduler", "inspect", str(sid), *conn)
    assert isinstance(snap, dict)
    assert snap["payload"] == {"user": 42}
    assert env.ok("scheduler", "pause", str(sid), *conn) == f"Paused schedule {sid}.\n"
    assert env.ok("scheduler", "resume", str(sid), *conn).startswith(f"Resumed schedule {sid}")
    assert env.ok("scheduler", "cancel", str(sid), *conn) == f"Cancelled schedule {sid}.\n"
    assert env.ok("scheduler", "dead-letter", "list", *conn) == "no dead-lettered schedules\n"
    replay = env.run("scheduler", "dead-letter", "replay", str(sid), *conn)
    assert replay.returncode == 1
    assert replay.stderr.strip() == (
        f"hexeract: error: not replayable: schedule {sid} is cancelled"
    )
    unknown = uuid.uuid4()
    gone = env.run("scheduler", "inspect", str(unknown), *conn)
    assert (gone.returncode, gone.stderr.strip()) == (1, f"hexeract: error: no schedule {unknown}")


def test_env_vars_reach_the_process(env: Env) -> None:
    env.vars["DATABASE_URL"] = f"sqlite:///{env.db}"
    env.vars["HEXERACT_SCHEDULER_TABLE"] = "app_jobs"
    sid = env.ok("scheduler", "add", "--in", "5m", "--event-type", "x").strip()
    with SqliteScheduleStore.open(env.db, table="app_jobs", create=False) as store:
        assert store.inspect(uuid.UUID(sid)) is not None
    rows = env.json("scheduler", "list")
    assert isinstance(rows, list) and rows[0]["schedule_id"] == sid


def test_password_is_never_printed(env: Env) -> None:
    for argv in (
        ["scheduler", "list", "--conn", "postgresql://u:secret@127.0.0.1:1/db"],
        ["scheduler", "list", "--conn", "postgres://u:secret@127.0.0.1:1/db?connect_timeout=1"],
        ["scheduler", "list", "--conn", "mongodb://u:secret@127.0.0.1:1/db"],
    ):
        proc = env.run(*argv)
        assert proc.returncode in (1, 2)
        assert "secret" not in proc.stdout + proc.stderr
        assert "***" in proc.stderr


# -- the worker ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_add_list_worker_inspect_round_trip(env: Env) -> None:
    conn = ("--conn", str(env.db))
    sid = uuid.UUID(
        env.ok(
            "scheduler",
            "add",
            *conn,
            "--in",
            "0s",
            "--event-type",
            "reminder.due",
            "--payload",
            '{"user": 7}',
            "--target",
            "outbox",
        ).strip()
    )
    later = uuid.UUID(
        env.ok("scheduler", "add", *conn, "--in", "1h", "--event-type", "later").strip()
    )
    rows = env.json("scheduler", "list", *conn)
    assert isinstance(rows, list)
    assert [r["schedule_id"] for r in rows] == [str(sid), str(later)]

    with env.worker("tests.cli_sinks:record") as worker:
        wait_until(
            lambda: env.snapshot(sid).status is ScheduleStatus.DELIVERED,
            "the delivery to be acknowledged",
            worker,
        )
        assert worker.stop(signal.SIGTERM) == 0, worker.stderr()
    log = worker.stderr()
    assert "worker started" in log and "worker stopped" in log

    (line,) = env.sink_lines()
    assert line == {
        "schedule_id": str(sid),
        "occurrence_id": line["occurrence_id"],
        "event_type": "reminder.due",
        "payload": {"user": 7},
        "outcome": "delivered",
    }
    snap = env.json("scheduler", "inspect", str(sid), *conn)
    assert isinstance(snap, dict)
    assert snap["status"] == "delivered"
    assert snap["delivered_at"] is not None
    assert snap["leased_until"] is None
    assert snap["attempts"] == 1
    assert snap["occurrence_id"] == line["occurrence_id"]
    rows = env.json("scheduler", "list", *conn)
    assert isinstance(rows, list)
    assert [r["schedule_id"] for r in rows] == [str(later)]
    assert env.snapshot(later).status is ScheduleStatus.PENDING


@pytest.mark.slow
def test_dead_letter_after_a_failing_worker_then_replay_then_delivery(env: Env) -> None:
    conn = ("--conn", str(env.db))
    sid = uuid.UUID(
        env.ok(
            "scheduler",
            "add",
            *conn,
            "--in",
            "0s",
            "--event-type",
            "invoice.send",
            "--max-attempts",
            "2",
        ).strip()
    )
    with env.worker(
        "tests.cli_sinks:refuse",
        "--retry-base-delay",
        "10ms",
        "--retry-max-delay",
        "20ms",
        "--no-jitter",
        name="failing",
    ) as worker:
        wait_until(
            lambda: env.snapshot(sid).status is ScheduleStatus.DEAD_LETTERED,
            "the schedule to be dead-lettered",
            worker,
        )
        assert worker.stop(signal.SIGTERM) == 0, worker.stderr()
    assert [line["outcome"] for line in env.sink_lines()] == ["refused", "refused"]

    text = env.ok("scheduler", "dead-letter", "list", *conn)
    header, row = text.splitlines()
    assert header.startswith("SCHEDULE ID") and "LAST ERROR" in header
    assert row.startswith(str(sid))
    assert "2/2" in row and "sink refused invoice.send" in row
    rows = env.json("scheduler", "dead-letter", "list", *conn)
    assert isinstance(rows, list) and len(rows) == 1
    assert rows[0]["status"] == "dead-lettered"
    assert "sink refused invoice.send: downstream is down" in str(rows[0]["last_error"])

    assert env.ok("scheduler", "dead-letter", "replay", str(sid), *conn) == (
        f"Replayed schedule {sid}.\n"
    )
    snap = env.snapshot(sid)
    assert (snap.status, snap.attempts, snap.last_error) == (ScheduleStatus.PENDING, 0, None)

    with env.worker("tests.cli_sinks:recording_sink", name="recovered") as worker:
        wait_until(
            lambda: env.snapshot(sid).status is ScheduleStatus.DELIVERED,
            "the replayed schedule to be delivered",
            worker,
        )
        assert worker.stop(signal.SIGINT) == 0, worker.stderr()
    assert [line["outcome"] for line in env.sink_lines()] == ["refused", "refused", "delivered"]
    assert env.ok("scheduler", "dead-letter", "list", *conn) == "no dead-lettered schedules\n"
    snap = env.snapshot(sid)
    assert snap.delivered_at is not None and snap.last_error is None


@pytest.mark.slow
def test_worker_stops_on_sigterm_while_idle_and_creates_the_database(env: Env) -> None:
    assert not env.db.exists()
    with env.worker("tests.cli_sinks:record") as worker:
        wait_until(lambda: "worker started" in worker.stderr(), "the worker to start", worker)
        assert env.db.exists()
        started = time.monotonic()
        assert worker.stop(signal.SIGTERM) == 0, worker.stderr()
        assert time.monotonic() - started < 5


@pytest.mark.slow
def test_sigterm_mid_dispatch_settles_the_occurrence_in_hand(env: Env) -> None:
    sid = uuid.UUID(
        env.ok("scheduler", "add", "--conn", str(env.db), "--in", "0s", "--event-type", "x").strip()
    )
    with env.worker("tests.cli_sinks:slow") as worker:
        wait_until(
            lambda: [line["outcome"] for line in env.sink_lines()] == ["started"],
            "the dispatch to start",
            worker,
        )
        assert worker.stop(signal.SIGTERM) == 0, worker.stderr()
    assert [line["outcome"] for line in env.sink_lines()] == ["started", "delivered"]
    snap = env.snapshot(sid)
    assert snap.status is ScheduleStatus.DELIVERED
    assert snap.leased_until is None


@pytest.mark.slow
@pytest.mark.postgres
def test_worker_on_postgres(env: Env) -> None:
    from hexeract_lite.store.postgres import PostgresScheduleStore
    from tests.pg import drop_table, require_server, unique_table

    url = require_server()
    table = unique_table("cliworker")
    env.vars["HEXERACT_SCHEDULER_TABLE"] = table
    try:
        sid = uuid.UUID(
            env.ok("scheduler", "add", "--conn", url, "--in", "0s", "--event-type", "pg").strip()
        )
        with PostgresScheduleStore.open(url, table=table, create=False) as store:

            def delivered() -> bool:
                snap = store.inspect(sid)
                return snap is not None and snap.status is ScheduleStatus.DELIVERED

            with env.worker("tests.cli_sinks:record", conn=url) as worker:
                wait_until(delivered, "the delivery on PostgreSQL", worker)
                assert worker.stop(signal.SIGTERM) == 0, worker.stderr()
        log = worker.stderr()
        assert "worker started" in log and "postgresql://" in log
        assert (urlsplit(url).password or "\0") not in log
        assert [line["schedule_id"] for line in env.sink_lines()] == [str(sid)]
    finally:
        drop_table(url, table)
