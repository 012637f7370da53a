"""The MySQL store under faults, on a real server: worker processes killed at random
(nothing lost, no live lease handed out twice) and the server restarted while a
worker drains (the worker rides it out and finishes). The restart is done to a private
server of its own, so that no other test (in this process or another) loses its
server meanwhile."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
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
from .pg import in_ci

pytest.importorskip("pymysql", reason="the mysql extra is not installed")

from hexeract_lite.store.mysql import MysqlScheduleStore

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SERVER_SCRIPT = ROOT / "scripts" / "mysql-test-server"


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


@pytest.fixture
def private_server() -> Iterator[tuple[str, Path, list[subprocess.Popen[bytes]]]]:
    """A MariaDB server of this test's own (scripts/mysql-test-server on a free port):
    its URL, its pid file, and a list for the processes the test starts it again with;
    stopped and deleted afterwards."""
    if shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists():
        if in_ci():
            pytest.fail("CI=true but MariaDB is not installed: cannot restart a server")
        pytest.skip("MariaDB is not installed: no private server to restart")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "HEXERACT_MYSQL_DIR"}
    env["HEXERACT_MYSQL_PORT"] = str(port)  # in /tmp/hexeract-mysql-<port>, which mysqld can reach
    started = subprocess.run(
        ["bash", str(SERVER_SCRIPT), "start"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().partition("=")[2]
    again: list[subprocess.Popen[bytes]] = []
    try:
        yield url, Path(f"/tmp/hexeract-mysql-{port}/mysqld.pid"), again
    finally:
        subprocess.run(
            ["bash", str(SERVER_SCRIPT), "stop"], env=env, capture_output=True, timeout=60
        )
        for process in again:
            process.wait(60)


def test_a_server_restart_mid_drain_is_ridden_out(
    private_server: tuple[str, Path, list[subprocess.Popen[bytes]]],
) -> None:
    url, pidfile, again = private_server
    table = mysql.unique_table("rel")
    pid = int(pidfile.read_text())
    command = [p.decode() for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if p]
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
            again.append(  # the same server again, stopped by the fixture
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
