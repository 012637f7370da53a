"""Stop signals: a worker told to stop twice never spends the budget of what it did not
dispatch, and a SIGKILL on the last attempt is still swept as a crash.

A real ``python -m hexeract_lite scheduler worker`` process on a ``tmp_path`` SQLite
file holds a batch of 10 due occurrences (``max_attempts=1``) while its sink hangs in
the first dispatch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    CycleReport,
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    ScheduleStatus,
    Target,
)
from hexeract_lite.store.base import SWEEP_ERROR
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import ROOT
from .stop_sinks import LOG_ENV

N = 10
LEASE = timedelta(seconds=600)
TIMEOUT_S = 20.0


class Worker:
    """``hexeract scheduler worker`` as a child process, with the hanging sink."""

    def __init__(self, tmp_path: Path, db: Path) -> None:
        self.sink_log = tmp_path / "sink.log"
        self.err_path = tmp_path / "worker.err"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
            **{LOG_ENV: str(self.sink_log)},
        )
        env.pop("DATABASE_URL", None)
        env.pop("HEXERACT_SCHEDULER_TABLE", None)
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "hexeract_lite", "scheduler", "worker"),
                    *("--conn", f"sqlite:///{db}"),
                    *("--sink", "tests.reliability.stop_sinks:hang", "--app-dir", str(ROOT)),
                    *("--batch-size", str(N), "--dispatch-timeout", "60s", "--lease", "600s"),
                    *("--poll-interval", "20ms", "--log-level", "info"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=tmp_path,
                env=env,
            )

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def sink_events(self) -> list[tuple[str, uuid.UUID]]:
        if not self.sink_log.exists():
            return []
        lines = self.sink_log.read_text().splitlines()
        return [(event, uuid.UUID(sid)) for event, sid in (line.split() for line in lines)]

    def wait_for(self, condition: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            if condition == "dispatching" and self.sink_events():
                return
            if condition != "dispatching" and condition in self.stderr():
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"waiting for {condition!r}; worker said:\n{self.stderr()}")
            time.sleep(0.01)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def due_batch(db: Path) -> list[ScheduledMessage]:
    now = datetime.now(UTC)
    msgs = [
        ScheduledMessage.delay(Target.outbox(), now - timedelta(seconds=N - i), "stop", {"i": i})
        for i in range(N)
    ]
    with SqliteScheduleStore.open(db) as store:
        store.insert_many(msgs, 1)
    return msgs


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sched.db"


def test_two_sigterms_release_what_was_never_dispatched(tmp_path: Path, db: Path) -> None:
    msgs = due_batch(db)
    worker = Worker(tmp_path, db)
    try:
        worker.wait_for("dispatching")
        worker.proc.send_signal(signal.SIGTERM)
        worker.wait_for("stopping after the occurrences in hand")
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.proc.wait(TIMEOUT_S) == 128 + signal.SIGTERM, worker.stderr()
    finally:
        worker.close()
    [(event, in_flight)] = worker.sink_events()
    assert (event, in_flight) == ("started", msgs[0].schedule_id)
    with SqliteScheduleStore.open(db, create=False) as store:
        first = store.inspect(in_flight)
        assert first is not None and first.status is ScheduleStatus.DEAD_LETTERED
        assert first.last_error is not None and "the dispatch was abandoned" in first.last_error
        for msg in msgs[1:]:
            snap = store.inspect(msg.schedule_id)
            assert snap is not None
            assert (snap.status, snap.attempts, snap.leased_until, snap.last_error) == (
                ScheduleStatus.PENDING,
                0,
                None,
                None,
            ), "never dispatched: released with its attempt given back"
        # the next worker delivers all nine; the sweep finds nothing to dead-letter
        delivered: list[ScheduledMessage] = []
        worker2 = SchedulerWorker(store, delivered.append, SchedulerWorkerConfig(batch_size=N))
        assert worker2.run_once() == CycleReport(claimed=N - 1, delivered=N - 1)
    assert [m.schedule_id for m in delivered] == [m.schedule_id for m in msgs[1:]]


def test_a_sigkill_on_the_last_attempt_is_still_swept_as_a_crash(tmp_path: Path, db: Path) -> None:
    msgs = due_batch(db)
    worker = Worker(tmp_path, db)
    try:
        worker.wait_for("dispatching")
        worker.proc.kill()
        worker.proc.wait(TIMEOUT_S)
    finally:
        worker.close()
    with SqliteScheduleStore.open(db, create=False) as store:
        for msg in msgs:
            snap = store.inspect(msg.schedule_id)
            assert snap is not None and snap.leased_until is not None and snap.attempts == 1
    after_lease = ManualClock(datetime.now(UTC) + LEASE + timedelta(seconds=1))
    with SqliteScheduleStore.open(db, create=False, clock=after_lease) as store:
        assert store.dead_letter_exhausted() == N
        for msg in msgs:
            snap = store.inspect(msg.schedule_id)
            assert snap is not None and snap.status is ScheduleStatus.DEAD_LETTERED
            assert snap.last_error == SWEEP_ERROR
