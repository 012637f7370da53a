"""The MySQL store under faults, on a real server: worker processes killed at random
(nothing lost, no live lease handed out twice) and the server restarted while a
worker drains (the worker rides it out and finishes)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    StoreError,
    Target,
)

from . import mysql

pytest.importorskip("pymysql", reason="the mysql extra is not installed")

from hexeract_lite.store.mysql import MysqlScheduleStore

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
_RESTARTED: list[subprocess.Popen[bytes]] = []
"""The servers the restart test started again (kept: the suite goes on using them)."""


@pytest.fixture
def url() -> str:
    return mysql.require_server()


@pytest.fixture
def table(url: str) -> Iterator[str]:
    name = mysql.unique_table("rel")
    yield name
    mysql.drop_table(url, name)


def _spawn(url: str, table: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.pg_worker_proc", url, table, str(out), *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.DEVNULL,
    )


def _claims(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def test_three_workers_killed_at_random_lose_nothing(url: str, table: str, tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("HEXERACT_CRASH_SEED", random.randrange(1 << 30))))
    now = datetime.now(UTC)
    msgs = [
        ScheduledMessage.delay(Target.outbox(), now - timedelta(seconds=1), "ev", {"i": i})
        for i in range(600)
    ]
    with MysqlScheduleStore.open(url, table=table) as s:
        s.insert_many(msgs, 50)
    args = ("--batch", "5", "--lease", "1", "--deadline", "60")
    outs = [tmp_path / f"w{i}.txt" for i in range(3)]
    workers = [_spawn(url, table, out, *args) for out in outs]
    kills = 0
    try:
        for _ in range(8):
            time.sleep(rng.uniform(0.1, 0.4))
            victim = rng.randrange(3)
            if workers[victim].poll() is None:
                workers[victim].send_signal(signal.SIGKILL)
                workers[victim].wait()
                kills += 1
            workers[victim] = _spawn(url, table, outs[victim], *args)
        codes = [w.wait(timeout=120) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert codes == [0, 0, 0]
    handed = Counter(sid for out in outs for sid in _claims(out))
    assert set(handed) == {str(m.schedule_id) for m in msgs}, "an occurrence was lost"
    with MysqlScheduleStore.open(url, table=table, create=False) as s:
        assert s.list_pending() == [] and s.next_wakeup() is None
        assert s.stats().delivered == len(msgs)
    assert kills >= 1


def _server_command(url: str) -> tuple[list[str], Path]:
    """The running test server's command line and pid file (scripts/mysql-test-server's)."""
    port = urllib.parse.urlsplit(url).port
    base = Path(os.environ.get("HEXERACT_MYSQL_DIR", f"/tmp/hexeract-mysql-{port}"))
    pidfile = base / "mysqld.pid"
    if not pidfile.exists():
        pytest.skip(f"not a scripts/mysql-test-server server (no {pidfile}): cannot restart it")
    pid = int(pidfile.read_text())
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return [part.decode() for part in command if part], pidfile


def test_a_server_restart_mid_drain_is_ridden_out(url: str, table: str) -> None:
    command, pidfile = _server_command(url)
    now = datetime.now(UTC)
    msgs = [
        ScheduledMessage.delay(Target.outbox(), now - timedelta(seconds=1), "ev", {"i": i})
        for i in range(300)
    ]
    seen: list[str] = []
    config = SchedulerWorkerConfig(
        batch_size=5,
        lease=timedelta(seconds=5),
        dispatch_timeout=timedelta(seconds=1),
        poll_interval=timedelta(milliseconds=50),
    )
    with MysqlScheduleStore.open(url, table=table, connect_timeout=timedelta(seconds=2)) as s:
        s.insert_many(msgs, 50)

        def sink(message: ScheduledMessage) -> None:
            time.sleep(0.002)
            seen.append(str(message.schedule_id))

        worker = SchedulerWorker(s, sink, config)
        stop = threading.Event()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while len(seen) < 50:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)  # a clean shutdown, then the same server again
            while Path(f"/proc/{pid}").exists():
                time.sleep(0.05)
            _RESTARTED.append(  # outlives the test: the rest of the suite uses it
                subprocess.Popen(
                    command,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            deadline = time.monotonic() + 60
            while True:
                try:
                    if s.next_wakeup() is None:
                        break
                except StoreError:
                    pass  # the server is still starting
                assert time.monotonic() < deadline, "the worker did not finish after the restart"
                time.sleep(0.1)
        finally:
            stop.set()
            thread.join(10)
        assert set(seen) == {str(m.schedule_id) for m in msgs}
        assert s.stats().delivered == len(msgs)
