"""Cross-process wake-ups on SQLite: another process's commit signals a claiming store
at once (inotify on the WAL file), so an idle worker does not wait for its poll."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hexeract_lite import (
    ScheduledMessage,
    SchedulerWorker,
    SchedulerWorkerConfig,
    Target,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify: Linux only (elsewhere the poll)"
)

ROOT = Path(__file__).resolve().parents[1]

# Another process: open the file and insert one message due now.
INSERT = (
    "import sys\n"
    f"sys.path.insert(0, {str(ROOT)!r})\n"
    "from datetime import UTC, datetime\n"
    "from hexeract_lite import ScheduledMessage, Target\n"
    "from hexeract_lite.store.sqlite import SqliteScheduleStore\n"
    "with SqliteScheduleStore.open(sys.argv[1]) as store:\n"
    "    store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), 'ev', {}), 3)\n"
)


def _insert_from_another_process(db: Path) -> None:
    subprocess.run([sys.executable, "-c", INSERT, str(db)], check=True, timeout=60)


def test_another_process_s_insert_signals_a_claiming_store(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with SqliteScheduleStore.open(db) as store:
        assert store.claim_due(datetime.now(UTC), 10, timedelta(seconds=30)) == []
        version = store.changes.version()
        _insert_from_another_process(db)
        assert store.changes.wait(version, 10), "no signal for another process's commit"


def test_an_idle_worker_dispatches_another_process_s_insert_before_its_next_poll(
    tmp_path: Path,
) -> None:
    """With a 60 s poll interval an idle run_async() loop compares data_version every
    30 s and runs a full cycle every 5 s; the insert is dispatched well before."""
    db = tmp_path / "w.db"

    async def main(store: SqliteScheduleStore) -> bool:
        got = asyncio.Event()
        config = SchedulerWorkerConfig(poll_interval=timedelta(seconds=60))
        worker = SchedulerWorker(store, lambda message: got.set(), config)
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run_async(stop))
        await asyncio.sleep(0.3)  # idle: the first cycle claimed nothing
        await asyncio.to_thread(_insert_from_another_process, db)
        try:
            await asyncio.wait_for(got.wait(), 2)
            return True
        except TimeoutError:
            return False
        finally:
            stop.set()
            await task

    with SqliteScheduleStore.open(db) as store:
        assert asyncio.run(main(store)), "not dispatched before the poll"


def test_stores_that_do_not_claim_run_no_thread_and_close_stops_it(tmp_path: Path) -> None:
    db = tmp_path / "w.db"

    def watchers() -> int:
        return sum(t.name == "hexeract-sqlite-watch" for t in threading.enumerate())

    before = watchers()
    with SqliteScheduleStore.open(db) as store:
        store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "ev", {}), 3)
        store.list_pending()
        assert watchers() == before
        store.claim_due(datetime.now(UTC), 10, timedelta(seconds=30))
        assert watchers() == before + 1
    deadline = time.monotonic() + 5
    while watchers() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watchers() == before


def test_a_commit_noticed_while_nobody_waits_is_looked_for_by_the_next_wait(
    tmp_path: Path,
) -> None:
    """The watcher does not take the store's lock while no worker waits (a busy one's own
    commits wake it all the time); it marks the signal stale, and the next wait looks
    for another process's commit before it sleeps, so none is missed."""
    db = tmp_path / "w.db"
    with SqliteScheduleStore.open(db) as store:
        assert store.claim_due(datetime.now(UTC), 10, timedelta(seconds=30)) == []
        looks: list[int] = []
        look = store.changes.look
        assert look is not None

        def counting() -> object:
            looks.append(1)
            return look()

        store.changes.look = counting
        version = store.changes.version()
        _insert_from_another_process(db)  # nobody waits meanwhile
        time.sleep(0.05)  # the watcher's rechecks are over
        assert store.changes.version() == version  # it did not look: nobody waited
        started = time.monotonic()
        assert store.changes.wait(version, 5), "the stale signal was not looked at"
        assert time.monotonic() - started < 1 and looks == [1]
        assert not store.changes.wait(store.changes.version(), 0.05)  # looked once only
        assert looks == [1]


def due(seconds_ago: float) -> ScheduledMessage:
    at = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    return ScheduledMessage.delay(Target.outbox(), at, "e", {"ago": seconds_ago})


def test_a_commit_shown_while_the_waiter_looks_is_not_missed(tmp_path: Path) -> None:
    """The next wait after a stale mark looks first, then counts itself as waiting: a commit
    that shows after that look, with its WAL rechecks over before the waiter counts itself,
    still wakes it well before its timeout."""
    db = tmp_path / "w.db"
    with SqliteScheduleStore.open(db) as store, SqliteScheduleStore.open(db) as other:
        assert store.claim_due(datetime.now(UTC), 10, timedelta(seconds=30)) == []
        look = store.changes.look
        assert look is not None
        commits: list[int] = []

        def look_then_another_commits() -> object:
            found = look()
            if not commits:
                commits.append(1)
                other.insert(due(0), 3)  # another connection commits right after the look
                time.sleep(0.1)  # its WAL write's rechecks (15 ms) are over
            return found

        store.changes.look = look_then_another_commits
        store.changes.mark_stale()
        version = store.changes.version()
        started = time.monotonic()
        assert store.changes.wait(version, 1.5), "the commit was not signalled"
        assert time.monotonic() - started < 1 and commits == [1]
