"""Review round 4b: the README's promises on hooks, upkeep, the CLI and migrate, probed
from the outside. Each test failed before the fix it names."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ScheduledMessage,
    SchedulerControl,
    ScheduleStatus,
    SqliteScheduleStore,
    Target,
    upkeep,
)
from hexeract_lite.errors import InvalidMessage, MigrationError, StoreError
from hexeract_lite.hooks import Delivered, LeaseLost, MalformedDeadLettered, WorkerEvent
from hexeract_lite.migrate import migrate
from hexeract_lite.settle import error_text
from hexeract_lite.snapshot import ScheduleSnapshot
from hexeract_lite.upkeep import replay_all
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

# -- a slow hook never costs a claimed occurrence its lease ----------------------------------

PAUSE_S = 1.5
# A lease that covers the batch (2 x 0.25 s) with room to spare, but not a 1.5 s pause.
TIGHT = SchedulerWorkerConfig(
    batch_size=2,
    lease=timedelta(seconds=1),
    dispatch_timeout=timedelta(milliseconds=250),
    poll_interval=timedelta(milliseconds=20),
    jitter=False,
)


class SlowOnce:
    """A hook that pauses 1.5 s at the first Delivered event, and counts them."""

    def __init__(self) -> None:
        self.delivered = 0
        self.lock = threading.Lock()

    def __call__(self, event: WorkerEvent) -> None:
        if isinstance(event, Delivered):
            with self.lock:
                self.delivered += 1
                first = self.delivered == 1
            if first:
                time.sleep(PAUSE_S)


def _four_due(store: SqliteScheduleStore) -> list[ScheduledMessage]:
    due = datetime.now(UTC) - timedelta(seconds=1)
    msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(4)]
    for msg in msgs:
        store.insert(msg, 1)
    return msgs


def _all_delivered(store: SqliteScheduleStore, msgs: list[ScheduledMessage]) -> None:
    for msg in msgs:
        snap = store.inspect(msg.schedule_id)
        assert snap is not None
        assert snap.status is ScheduleStatus.DELIVERED, (snap.status, snap.last_error)


def test_a_slow_hook_in_the_loop_never_lets_a_claimed_lease_run_out(tmp_path: Path) -> None:
    """Before: the loop wrote a full batch's settlement with the next claim, then called the
    hooks while that claimed batch's leases ran; a hook slower than the lease got the batch
    skipped and, on its last attempt, dead-lettered by the sweep without any dispatch."""
    with SqliteScheduleStore.open(tmp_path / "h.db") as store:
        msgs = _four_due(store)
        hook, seen = SlowOnce(), []
        worker = SchedulerWorker(store, lambda m: seen.append(m), TIGHT, hooks=[hook])
        with worker.start():
            deadline = time.monotonic() + 10
            while hook.delivered < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
        _all_delivered(store, msgs)
        assert len(seen) == 4


def test_a_slow_hook_under_run_async_never_lets_a_claimed_lease_run_out(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "a.db") as store:
        msgs = _four_due(store)
        hook = SlowOnce()

        async def sink(message: ScheduledMessage) -> None:
            return None

        async def main() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(
                SchedulerWorker(store, sink, TIGHT, hooks=[hook]).run_async(stop)
            )
            deadline = time.monotonic() + 10
            while hook.delivered < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            stop.set()
            await task

        asyncio.run(asyncio.wait_for(main(), 20))
        _all_delivered(store, msgs)


def test_a_slow_hook_on_a_malformed_row_never_lets_its_batch_mates_lease_run_out(
    tmp_path: Path,
) -> None:
    """Before: the MalformedDeadLettered event was told right after the claim, while the
    rest of the batch was leased and waiting; a slow hook got it skipped."""
    db = tmp_path / "m.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        bad = ScheduledMessage.delay(Target.outbox(), due - timedelta(seconds=1), "bad", {})
        good = ScheduledMessage.delay(Target.outbox(), due, "good", {})
        store.insert(bad, 1)
        store.insert(good, 1)
        conn = apsw.Connection(str(db))
        conn.execute(
            "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
            (bad.schedule_id.bytes,),
        )
        conn.close()
        events: list[WorkerEvent] = []

        def slow_on_malformed(event: WorkerEvent) -> None:
            events.append(event)
            if isinstance(event, MalformedDeadLettered):
                time.sleep(PAUSE_S)

        report = SchedulerWorker(store, lambda _: None, TIGHT, hooks=[slow_on_malformed]).run_once()
        assert report.delivered == 1, report
        _all_delivered(store, [good])
        assert [type(e) for e in events] == [MalformedDeadLettered, Delivered], "order kept"


# -- failures keep their story, whatever the exception ---------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("this exception cannot be shown")


def test_an_exception_that_cannot_be_shown_is_still_a_failed_dispatch() -> None:
    """Before: error_text called str() on the sink's exception, so one whose __str__ raised
    broke the cycle (a bare ValueError out of run_once) and left the whole batch leased,
    its delivered batch-mates unsettled and delivered again after the lease."""
    store = InMemoryScheduleStore()
    due = datetime.now(UTC) - timedelta(seconds=1)
    ok = ScheduledMessage.delay(Target.outbox(), due, "ok", {})
    bad = ScheduledMessage.delay(Target.outbox(), due, "bad", {})
    store.insert_many([ok, bad], 3)

    def sink(message: ScheduledMessage) -> None:
        if message.event_type == "bad":
            raise Unprintable

    report = SchedulerWorker(store, sink, TIGHT).run_once()
    assert (report.delivered, report.retried) == (1, 1)
    snap = store.inspect(bad.schedule_id)
    assert snap is not None and snap.leased_until is not None  # waiting out its retry
    assert snap.last_error is not None
    assert snap.last_error.startswith("Unprintable: <exception str() failed>\n")
    assert error_text(Unprintable()) == "Unprintable: <exception str() failed>"


# -- the command line, as a real process -----------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def hexeract(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hexeract_lite scheduler ARGV`` of this checkout, as a real process."""
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}
    base.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "hexeract_lite", "scheduler", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env=base,
        cwd=REPO,
        check=False,
    )


def test_dead_letter_replay_takes_a_name_as_the_readme_says(tmp_path: Path) -> None:
    """Before: `dead-letter replay --name N` was refused (exit 2, 'N' read as a bad UUID),
    though the README lists dead-letter replay among the commands taking --name."""
    db = tmp_path / "n.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        SchedulerControl(store).ensure("myapp.mail.once", event_type="e", at=due, max_attempts=1)
        SchedulerWorker(store, lambda _: 1 / 0, TIGHT).run_once()
        assert store.stats().dead_lettered == 1
    done = hexeract("dead-letter", "replay", "--name", "myapp.mail.once", "--conn", str(db))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("Replayed schedule ")
    with SqliteScheduleStore.open(db) as store:
        assert store.stats().pending == 1
    for argv in (["--all", "--name", "myapp.mail.once"], []):
        refused = hexeract("dead-letter", "replay", *argv, "--conn", str(db))
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    missing = hexeract("dead-letter", "replay", "--name", "myapp.nothing", "--conn", str(db))
    assert missing.returncode == 1 and "myapp.nothing" in missing.stderr


# -- bulk replay ------------------------------------------------------------------------------


def test_replay_all_goes_on_past_a_page_of_malformed_dead_letters(tmp_path: Path) -> None:
    """Before: a page holding only malformed dead letters (the lowest ids, batch_size 2)
    ended the replay, so the good dead letters after it were never replayed (0 of 3)."""
    db = tmp_path / "r.db"
    with SqliteScheduleStore.open(db) as store:
        due = datetime.now(UTC) - timedelta(seconds=1)
        msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(5)]
        store.insert_many(msgs, 1)
        SchedulerWorker(store, lambda _: 1 / 0).run_once()
        assert store.stats().dead_lettered == 5
        lowest = sorted(msgs, key=lambda m: m.schedule_id.bytes)
        conn = apsw.Connection(str(db))
        for msg in lowest[:2]:
            conn.execute(
                "UPDATE scheduled_messages SET target_kind = 'email' WHERE schedule_id = ?",
                (msg.schedule_id.bytes,),
            )
        conn.close()
        assert replay_all(store, batch_size=2) == 3
        stats = store.stats()
        assert (stats.pending, stats.dead_lettered) == (3, 2), "the malformed ones left alone"


# -- listing a file the reference (or an older version) made, read-only ----------------------


def test_list_schedules_reads_a_reference_file_read_only(tmp_path: Path) -> None:
    """Before: list_schedules (and `list --status all`, `--event-type`, `--after`, and the
    replay --all listing) selected the `name` column an older table lacks: 'SQLError: no
    such column: name', exit 1; the plain listings read NULL for it."""
    from tests.test_reference_compat import DEAD, DUE, REFERENCE_DDL, _insert

    db = tmp_path / "hexeract.db"
    conn = apsw.Connection(str(db))
    conn.execute(REFERENCE_DDL)
    _insert(conn, DUE)
    _insert(conn, DEAD, attempts=3, last_error="boom", dead_lettered_at="2026-03-01T10:00:00.000Z")
    conn.close()
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, create=False, readonly=True) as store:
        rows = store.list_schedules()
        assert [s.schedule_id for s in rows] == [DUE, DEAD]
        assert all(isinstance(s, ScheduleSnapshot) and s.name is None for s in rows)
        assert store.list_schedules(status="dead-lettered", event_type="rem*") == [rows[1]]
        assert store.list_schedules(name="*") == []
        assert store.list_schedules(after=DUE) == [rows[1]]
    for argv in (["--status", "all"], ["--event-type", "rem*"], ["--name", "x*"]):
        done = hexeract("list", *argv, "--conn", str(db))
        assert done.returncode == 0, (argv, done.stderr)
    assert db.read_bytes() == before


# -- guarantee coverage (passes before and after: the README named no test for it) ---------


def test_propagate_errors_on_a_start_thread_settles_then_ends_the_thread_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """README 'Guarantees': propagate_errors re-raises after settling on a start() thread
    (tests/test_hooks.py runs run() on a thread of its own, never start())."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    store = InMemoryScheduleStore()
    msg = ScheduledMessage.delay(
        Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "e", {"amount": -5}
    )
    store.insert(msg, 3)

    def charge(message: ScheduledMessage) -> None:
        assert message.payload["amount"] > 0, "amounts are positive"

    handle = SchedulerWorker(store, charge, TIGHT, propagate_errors=True).start()
    deadline = time.monotonic() + 5
    while handle.is_alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not handle.is_alive
    [error] = raised
    assert isinstance(error, AssertionError) and "amounts are positive" in str(error)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING and snap.attempts == 1
    assert snap.last_error is not None and snap.last_error.startswith("AssertionError")


# -- retention never runs while a dispatched batch waits for its settlement ------------------


class SlowPruneStore(SqliteScheduleStore):
    """A SQLite store whose second prune takes 1.5 s (a big backlog of history, say): the
    first runs at the worker's first cycle, the second with a full batch dispatched."""

    prunes = 0

    def prune(self, older_than: timedelta, **kwargs: Any) -> int:
        self.prunes += 1
        if self.prunes == 2:
            time.sleep(PAUSE_S)
        return super().prune(older_than, **kwargs)


def test_retention_never_runs_while_a_dispatched_batch_waits_for_its_settlement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the loop held a full batch's settlement for the next claim and ran the
    retention prune first; a prune longer than the lease fenced that settlement out (lease
    lost), and the delivered occurrences, on their last attempt, were dead-lettered by the
    sweep as if their worker had crashed."""
    monkeypatch.setattr(upkeep, "RETENTION_EVERY", timedelta(0))  # prune at every cycle
    with SlowPruneStore.open(tmp_path / "r.db") as store:
        msgs = _four_due(store)
        seen: list[ScheduledMessage] = []
        worker = SchedulerWorker(store, seen.append, TIGHT, retention=timedelta(days=1))
        with worker.start():
            deadline = time.monotonic() + 10
            while store.stats().pending and time.monotonic() < deadline:
                time.sleep(0.05)
        _all_delivered(store, msgs)
        assert len(seen) == 4


# -- under run_async, every hook runs off the event loop -------------------------------------


class FailingOnceStore(InMemoryScheduleStore):
    """An in-memory store whose first claim raises a StoreError (a locked file, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def claim_due(self, now: datetime, batch_size: int, lease: timedelta) -> Any:
        if self.failures > 0:
            self.failures -= 1
            raise StoreError("database is locked")
        return super().claim_due(now, batch_size, lease)


def test_a_store_error_hook_under_run_async_runs_off_the_event_loop() -> None:
    """Before: StoreErrorBackedOff was told on the event loop's thread, so a slow hook
    blocked every other task of the application; the README says hooks run on an
    asyncio.to_thread worker thread under run_async."""
    store = FailingOnceStore()
    threads: dict[str, threading.Thread] = {}

    def hook(event: WorkerEvent) -> None:
        threads.setdefault(type(event).__name__, threading.current_thread())

    async def sink(message: ScheduledMessage) -> None:
        return None

    async def main() -> threading.Thread:
        stop = asyncio.Event()
        store.insert(
            ScheduledMessage.delay(
                Target.outbox(), datetime.now(UTC) - timedelta(seconds=1), "e", {}
            ),
            3,
        )
        task = asyncio.create_task(
            SchedulerWorker(store, sink, TIGHT, hooks=[hook]).run_async(stop)
        )
        deadline = time.monotonic() + 5
        while "Delivered" not in threads and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await task
        return threading.current_thread()

    loop_thread = asyncio.run(asyncio.wait_for(main(), 10))
    assert set(threads) == {"StoreErrorBackedOff", "Delivered"}
    assert threads["Delivered"] is not loop_thread
    assert threads["StoreErrorBackedOff"] is not loop_thread


# -- an empty --conn is refused, never read as "the default database" ------------------------


def test_an_empty_conn_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    """Before: `--conn ""` (a script's unset variable) fell back to $DATABASE_URL or the
    default database and acted on it: here `dead-letter replay --all` replayed another
    database's dead letter, exit 0. migrate's --from/--to already refused it."""
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
    env = {"DATABASE_URL": str(other), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    for argv in (["dead-letter", "replay", "--all"], ["stats"], ["list"]):
        done = hexeract(*argv, "--conn", "", env=env)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "--conn" in done.stderr and "empty" in done.stderr
    with SqliteScheduleStore.open(other) as store:
        assert store.stats().dead_lettered == 1
    assert not (tmp_path / "xdg").exists()


# -- migrate names the row PostgreSQL refuses --------------------------------------------------


def test_migrate_to_postgres_names_a_source_row_whose_payload_is_not_json(tmp_path: Path) -> None:
    """Before: a row another tool wrote with a payload that is not JSON stopped the copy
    with the server's 'invalid input syntax for type json' and no schedule id, so the
    operator could not tell which of the page's rows to fix (and every re-run stopped there)."""
    from tests.pg import open_scratch_store, server

    if server()[0] is None:
        pytest.skip("no PostgreSQL server (HEXERACT_TEST_POSTGRES_URL)")
    db = tmp_path / "bad.db"
    later = datetime.now(UTC) + timedelta(hours=1)
    msgs = [ScheduledMessage.delay(Target.outbox(), later, "e", {"n": n}) for n in range(5)]
    bad = sorted(msgs, key=lambda m: m.schedule_id.bytes)[3]
    with SqliteScheduleStore.open(db) as source:
        source.insert_many(msgs, 3)
    conn = apsw.Connection(str(db))
    conn.execute(
        "UPDATE scheduled_messages SET payload = '{not json' WHERE schedule_id = ?",
        (bad.schedule_id.bytes,),
    )
    conn.close()
    dest = open_scratch_store()
    try:
        with (
            SqliteScheduleStore.open(db, create=False) as source,
            pytest.raises(MigrationError) as failed,
        ):
            migrate(source, dest, batch_size=2)
        assert str(bad.schedule_id) in str(failed.value)
        assert "JSON" in str(failed.value)
        assert isinstance(failed.value.__cause__, InvalidMessage)
        assert dest.stats().total == 2, "the first page stays; nothing of the failing one"
    finally:
        dest.close()


def test_a_fenced_settlement_reaches_the_hooks_as_lease_lost() -> None:
    """The fused-path test of LeaseLost now watches the log (a hooked worker does not fuse):
    the hook event itself, on the loop a hooked worker runs."""
    store = InMemoryScheduleStore()
    due = datetime.now(UTC) - timedelta(seconds=1)
    msgs = [ScheduledMessage.delay(Target.outbox(), due, "e", {"n": n}) for n in range(4)]
    store.insert_many(msgs, 3)
    events: list[WorkerEvent] = []

    def sink(message: ScheduledMessage) -> None:
        if message.schedule_id == msgs[1].schedule_id:
            store.cancel(message.schedule_id)  # as another process could, mid-dispatch

    with SchedulerWorker(store, sink, TIGHT, hooks=[events.append]).start():
        deadline = time.monotonic() + 5
        while len(events) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    lost = [e for e in events if isinstance(e, LeaseLost)]
    assert [e.message.schedule_id for e in lost] == [msgs[1].schedule_id]
    assert len([e for e in events if isinstance(e, Delivered)]) == 3
