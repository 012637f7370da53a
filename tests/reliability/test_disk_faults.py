"""Disk faults: I/O errors and a full disk, injected by a real SQLite VFS.

The store runs on :class:`~tests.reliability.faultvfs.FaultVFS` (the default VFS with
writes and syncs that fail on command: ``SQLITE_IOERR`` or ``SQLITE_FULL``). What is
checked:

- the failing call raises :class:`StoreError` (the driver error chained, the file named);
- a failed call applied nothing: the rows are exactly as before, in this connection,
  in a fresh one, and after a reopen; the same call succeeds once the disk is healthy;
- committed schedules are never lost or corrupted, through a storm of faults on the
  WAL and on the database file (checkpoints), compared step by step with the in-memory
  reference store, and ``PRAGMA integrity_check`` is ``ok`` at the end;
- an insert that failed is reported as failed, never silently dropped. *Definition*:
  while the process lives, a failed insert is absent (SQLite overwrites the frames of a
  commit whose sync failed). If the process dies right after a failed *sync*, the frames
  may have reached the file and recovery may keep them: the insert is then present, and
  whole (all rows of an ``insert_many`` or none). The application was told "failed"; its
  retry with the same schedule ids is safe: it inserts, or raises
  :class:`DuplicateSchedule` because the first attempt landed. Never a partial batch,
  never a duplicate row;
- the worker logs the error, backs off, and delivers everything once the fault clears.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    DuplicateSchedule,
    InMemoryScheduleStore,
    ManualClock,
    ScheduledMessage,
    ScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

from .conftest import Processes, dump_database, integrity_check
from .faultvfs import FaultVFS

ERRORS = {"ioerr": apsw.IOError, "full": apsw.FullError}

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture
def vfs() -> Iterator[FaultVFS]:
    """The fault-injecting VFS, registered as ``faulty`` for the test."""
    fault_vfs = FaultVFS("faulty")
    try:
        yield fault_vfs
    finally:
        fault_vfs.switch.clear()
        fault_vfs.unregister()


def _open_faulty(path: Path, **kwargs: Any) -> SqliteScheduleStore:
    return SqliteScheduleStore.open(path, vfs="faulty", **kwargs)


def _msg(at: datetime = T0, payload: object = None) -> ScheduledMessage:
    return ScheduledMessage.delay(
        Target.outbox(), at, "ev", {"n": 1} if payload is None else payload
    )


# -- one failing call --------------------------------------------------------------------


def _setup(store: ScheduleStore) -> dict[str, object]:
    """Rows for each operation to work on: due ones, a leased one, a dead-lettered one."""
    due = [_msg(T0 - timedelta(minutes=i)) for i in range(6)]
    store.insert_many(due, 2)
    dead = _msg(T0 - timedelta(hours=1))
    store.insert(dead, 1)
    (claimed,) = store.claim_due(T0 - timedelta(minutes=30), 1, LEASE)
    assert claimed.message.schedule_id == dead.schedule_id
    store.mark_dead_lettered(dead.schedule_id, "boom", claimed.leased_until)
    (leased,) = store.claim_due(T0 - timedelta(minutes=5), 1, LEASE)
    return {"due": due, "dead": dead, "leased": leased}


OPERATIONS: dict[str, Callable[[ScheduleStore, dict[str, object]], object]] = {
    "insert": lambda s, ctx: s.insert(ctx["new"], 3),  # type: ignore[arg-type]
    "insert_many": lambda s, ctx: s.insert_many(ctx["batch"], 3),  # type: ignore[arg-type]
    "claim_due": lambda s, ctx: s.claim_due(T0, 10, LEASE),
    "mark_delivered": lambda s, ctx: s.mark_delivered(
        ctx["leased"].message.schedule_id,  # type: ignore[attr-defined]
        ctx["leased"].leased_until,  # type: ignore[attr-defined]
    ),
    "mark_failed": lambda s, ctx: s.mark_failed(
        ctx["leased"].message.schedule_id,  # type: ignore[attr-defined]
        timedelta(seconds=5),
        "dispatch failed",
        ctx["leased"].leased_until,  # type: ignore[attr-defined]
    ),
    "cancel": lambda s, ctx: s.cancel(ctx["due"][0].schedule_id),  # type: ignore[index]
    "replay": lambda s, ctx: s.replay(ctx["dead"].schedule_id),  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("op", ["write", "sync"])
@pytest.mark.parametrize("error", sorted(ERRORS))
@pytest.mark.parametrize("call", sorted(OPERATIONS))
def test_a_failing_call_raises_store_error_and_applies_nothing(
    vfs: FaultVFS, tmp_path: Path, call: str, error: str, op: str
) -> None:
    db = tmp_path / "s.db"
    store = _open_faulty(db)
    try:
        ctx = _setup(store)
        ctx["new"] = _msg()
        ctx["batch"] = [_msg(payload={"i": i, "pad": "x" * 3000}) for i in range(20)]
        before = dump_database(db)

        vfs.switch.arm(ERRORS[error], ops=[op], files=["wal"])
        with pytest.raises(StoreError) as info:
            OPERATIONS[call](store, ctx)
        vfs.switch.clear()

        assert isinstance(info.value.__cause__, ERRORS[error]), info.value.__cause__
        assert str(db) in str(info.value)
        assert vfs.switch.total_injected() >= 1
        assert dump_database(db) == before, "the failed call applied something"
        if call == "insert":
            assert store.inspect(ctx["new"].schedule_id) is None  # type: ignore[attr-defined]
        # The disk is healthy again: the same call now works, on the same store.
        OPERATIONS[call](store, ctx)
        assert dump_database(db) != before
        after = dump_database(db)
    finally:
        vfs.switch.clear()
        store.close()
    assert integrity_check(db) == ["ok"]
    with SqliteScheduleStore.open(db) as reopened:  # the default VFS: what is on disk
        assert dump_database(db) == after
        assert reopened.inspect(ctx["due"][1].schedule_id) is not None  # type: ignore[index]


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_a_batch_that_fails_part_way_is_all_or_nothing(
    vfs: FaultVFS, tmp_path: Path, error: str
) -> None:
    """The fault strikes after some pages of a large insert_many reached the WAL."""
    db = tmp_path / "s.db"
    with _open_faulty(db) as store:
        store.insert_many([_msg() for _ in range(10)], 3)
        before = dump_database(db)
        for after in (1, 5, 20, 60):
            batch = [_msg(payload={"pad": "y" * 4000, "i": i}) for i in range(100)]
            vfs.switch.arm(ERRORS[error], ops=["write"], files=["wal"], after=after)
            with pytest.raises(StoreError):
                store.insert_many(batch, 3)
            vfs.switch.clear()
            assert dump_database(db) == before
            assert all(store.inspect(m.schedule_id) is None for m in batch)
    assert integrity_check(db) == ["ok"]


def test_a_checkpoint_that_fails_loses_nothing(vfs: FaultVFS, tmp_path: Path) -> None:
    """Every write and sync of the database file itself fails, for a long time: the
    automatic checkpoints (which copy the WAL into the file) fail, the commits do not
    need them, and closing leaves the WAL in place, from which every row is read back.

    An artefact of Python VFSes: apsw re-raises an exception from VFS code even when
    SQLite treats the error as harmless (a failed auto-checkpoint after a commit), so the
    call whose commit triggered the checkpoint raises StoreError although its
    transaction committed. The check is the contract for any failed call: the batch is
    whole or absent, never partial, and nothing that was reported as inserted is lost.
    """
    db = tmp_path / "s.db"
    reported_ok: list[uuid.UUID] = []
    reported_failed: list[list[uuid.UUID]] = []
    store = _open_faulty(db)
    try:
        vfs.switch.arm(apsw.IOError, ops=["write", "sync"], files=["db"])
        for _ in range(60):  # ~1400 WAL pages: past the 1000-page auto-checkpoint
            batch = [_msg(payload={"pad": "z" * 3000}) for _ in range(20)]
            try:
                store.insert_many(batch, 3)
            except StoreError:
                reported_failed.append([m.schedule_id for m in batch])
            else:
                reported_ok += [m.schedule_id for m in batch]
        assert vfs.switch.injected, "no checkpoint was attempted"
        with pytest.raises(StoreError):
            store.close()  # the final checkpoint fails: the WAL stays
    finally:
        vfs.switch.clear()
        store.close()
    assert integrity_check(db) == ["ok"]
    with SqliteScheduleStore.open(db) as reopened:
        assert all(reopened.inspect(sid) is not None for sid in reported_ok)
        present = 0
        for batch_ids in reported_failed:
            found = [reopened.inspect(sid) is not None for sid in batch_ids]
            assert all(found) or not any(found), found
            present += all(found)
        total = len(reopened.list_pending(10_000))
        assert total == len(reported_ok) + 20 * present
    print(
        f"\ncheckpoint faults: {len(reported_ok) // 20} batches committed and reported,"
        f" {len(reported_failed)} reported failed ({present} of them committed whole)"
    )


# -- a storm of faults, compared with the reference store ---------------------------------


def _snapshots(store: ScheduleStore, ids: list[uuid.UUID]) -> dict[uuid.UUID, object]:
    return {sid: store.inspect(sid) for sid in ids}


def _storm_call(
    store: ScheduleStore,
    *,
    kind: str,
    new: list[ScheduledMessage],
    now: datetime,
    batch_size: int,
    target: uuid.UUID | None,
    lease: datetime | None,
) -> object:
    """One step of the storm, on either store; a claim returns (id, lease) pairs."""
    if kind == "insert":
        return store.insert(new[0], 3)
    if kind == "insert_many":
        return store.insert_many(new, 3)
    if kind == "claim":
        return [
            (o.message.schedule_id, o.leased_until) for o in store.claim_due(now, batch_size, LEASE)
        ]
    assert target is not None
    if kind == "ack":
        assert lease is not None
        return store.mark_delivered(target, lease)
    return store.cancel(target)


def test_committed_schedules_survive_a_storm_of_faults(vfs: FaultVFS, tmp_path: Path) -> None:
    """400 random operations; before a third of them a one-shot fault is armed (I/O error
    or disk full; write or sync; WAL or database file; after 0-3 clean calls). Each call
    that returns is applied to the in-memory reference store too. Each call that raises
    StoreError applied nothing, or (a fault in the checkpoint after its commit) applied
    everything: never part. Every 25 steps, and after a reopen on the default VFS, every
    schedule's snapshot equals the reference's."""
    rng = random.Random(6)
    db = tmp_path / "s.db"
    clock = ManualClock(T0)
    model = InMemoryScheduleStore(clock=clock)
    ids: list[uuid.UUID] = []
    leases: dict[uuid.UUID, datetime] = {}
    failures = successes = landed = 0
    store = _open_faulty(db, clock=clock)
    try:
        for step in range(400):
            clock.advance(timedelta(seconds=rng.randint(0, 20)))
            now = clock.now()
            kind = rng.choice(["insert", "insert", "insert_many", "claim", "ack", "ack", "cancel"])
            pad = "p" * rng.choice([10, 3000, 12000])
            new = [_msg(now - timedelta(seconds=rng.randint(0, 60)), {"pad": pad})]
            if kind == "insert_many":
                new += [_msg(now, {"pad": pad, "i": i}) for i in range(rng.randint(1, 8))]
            batch_size = rng.randint(1, 5)
            pool = list(leases) if kind == "ack" else ids
            target = rng.choice(pool) if pool else None
            if kind in ("ack", "cancel") and target is None:
                continue

            act = functools.partial(
                _storm_call,
                kind=kind,
                new=new,
                now=now,
                batch_size=batch_size,
                target=target,
                lease=leases.get(target) if target is not None else None,
            )

            if rng.random() < 0.35:
                vfs.switch.arm(
                    rng.choice(list(ERRORS.values())),
                    ops=[rng.choice(["write", "sync"])],
                    files=[rng.choice(["wal", "wal", "db"])],
                    after=rng.randint(0, 3),
                    times=1,
                )
            before = _snapshots(model, ids + [m.schedule_id for m in new])
            try:
                result = act(store)
            except StoreError:
                failures += 1
                vfs.switch.clear()
                after = _snapshots(store, list(before))
                if after == before:
                    continue  # applied nothing
                # It landed whole: only possible when the fault hit the checkpoint that
                # followed the commit (see test_a_checkpoint_that_fails_loses_nothing).
                act(model)
                assert after == _snapshots(model, list(before)), (step, kind, "partial")
                landed += 1
                if kind.startswith("insert"):
                    ids += [m.schedule_id for m in new]
                continue
            finally:
                vfs.switch.clear()
            successes += 1
            assert result == act(model), (step, kind)
            if kind == "claim":
                leases.update(result)  # type: ignore[call-overload]
            elif kind.startswith("insert"):
                ids += [m.schedule_id for m in new]
            elif kind == "ack":
                leases.pop(target, None)  # type: ignore[arg-type]
            if step % 25 == 0:
                assert _snapshots(store, ids) == _snapshots(model, ids), step
        assert failures >= 40 and successes >= 200, (failures, successes)
        assert _snapshots(store, ids) == _snapshots(model, ids)
    finally:
        vfs.switch.clear()
        store.close()
    assert integrity_check(db) == ["ok"]
    with SqliteScheduleStore.open(db, clock=clock) as reopened:
        assert _snapshots(reopened, ids) == _snapshots(model, ids)
    print(
        f"\nfault storm: {successes} calls succeeded, {failures} raised StoreError"
        f" ({failures - landed} applied nothing, {landed} committed whole before a failed"
        " checkpoint)"
    )


# -- a failed sync, then the process dies --------------------------------------------------


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_a_failed_insert_followed_by_a_crash_is_whole_or_absent_and_safe_to_retry(
    procs: Processes, tmp_path: Path, error: str
) -> None:
    db = tmp_path / "s.db"
    proc = procs.start("fault_child.py", str(db), error)
    assert proc.wait(60) == 0, procs.output(proc)
    out, _ = procs.output(proc)
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["result"].startswith("StoreError"), out
    committed = [uuid.UUID(s) for s in lines["committed"].split()]
    batch = [uuid.UUID(s) for s in lines["batch"].split()]
    assert integrity_check(db) == ["ok"]
    with SqliteScheduleStore.open(db) as store:
        assert all(store.inspect(sid) is not None for sid in committed)
        present = [store.inspect(sid) is not None for sid in batch]
        assert all(present) or not any(present), present
        # The application retries the batch it was told had failed, with the same ids.
        messages = [
            ScheduledMessage.delay(Target.outbox(), T0, "ev", {"i": i}, schedule_id=sid)
            for i, sid in enumerate(batch)
        ]
        try:
            store.insert_many(messages, 3)
            retried = "inserted"
        except DuplicateSchedule:
            retried = "duplicate: the failed attempt had landed"
            assert all(present)
        assert all(store.inspect(sid) is not None for sid in batch)
        assert len(store.list_pending(1000)) == len(committed) + len(batch)
    print(
        f"\nsync failure then crash ({error}): batch {'present' if all(present) else 'absent'}"
        f" after recovery; retry {retried}"
    )


# -- the worker through a fault --------------------------------------------------------------


class _Recorder:
    """A sink that records each delivered occurrence id (thread-safe), and can run a hook."""

    def __init__(self, hook: Callable[[ScheduledMessage], None] | None = None) -> None:
        self.delivered: list[str] = []
        self._lock = threading.Lock()
        self._hook = hook

    def __call__(self, message: ScheduledMessage) -> None:
        with self._lock:
            self.delivered.append(str(message.occurrence_id()))
        if self._hook is not None:
            self._hook(message)

    def count(self) -> int:
        with self._lock:
            return len(self.delivered)


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


FAULT_S = 1.0
"""How long the disk fails in the backoff test: long enough for several doubling tries."""

FAST = SchedulerWorkerConfig(
    poll_interval=timedelta(milliseconds=20),
    batch_size=5,
    lease=timedelta(seconds=2),
    retry_base_delay=timedelta(milliseconds=50),
    retry_max_delay=timedelta(milliseconds=200),
    dispatch_timeout=timedelta(milliseconds=400),
    min_cycle_delay=timedelta(0),
)


def _store_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "hexeract_lite.worker" and "store error" in r.getMessage()
    ]


@pytest.mark.slow
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_the_worker_logs_backs_off_and_recovers_when_the_disk_heals(
    vfs: FaultVFS, tmp_path: Path, caplog: pytest.LogCaptureFixture, error: str
) -> None:
    """Every write fails for 1 s while 30 occurrences are due: each claim raises
    StoreError, the worker logs it and backs off (poll_interval doubling: a handful of
    tries, not a hot loop), nothing is delivered and nothing changes on disk. Once the
    fault clears, every occurrence is delivered exactly once."""
    caplog.set_level(logging.INFO, logger="hexeract_lite")
    db = tmp_path / "s.db"
    now = datetime.now(UTC)
    messages = [_msg(now - timedelta(seconds=i)) for i in range(30)]
    sink = _Recorder()
    with _open_faulty(db) as store:
        store.insert_many(messages, 5)
        before = dump_database(db)
        vfs.switch.arm(ERRORS[error], ops=["write"], files=["wal"])
        worker = SchedulerWorker(store, sink, FAST)
        handle = worker.start()
        try:
            time.sleep(FAULT_S)
            tries = len(_store_errors(caplog))
            assert handle.is_alive
            assert sink.count() == 0
            assert dump_database(db) == before
            assert 2 <= tries <= 12, f"{tries} store errors in {FAULT_S} s: no backoff?"
            delays = [
                float(r.getMessage().split("next try in ")[1].split()[0])
                for r in _store_errors(caplog)
            ]
            assert delays == sorted(delays) and delays[-1] > delays[0], delays
            vfs.switch.clear()
            assert _wait_for(lambda: sink.count() >= 30, 10), sink.count()
        finally:
            vfs.switch.clear()
            assert handle.stop(10)
        snapshots = [store.inspect(m.schedule_id) for m in messages]
    assert sorted(sink.delivered) == sorted(str(m.occurrence_id()) for m in messages)
    assert all(s is not None and s.status == "delivered" for s in snapshots)
    assert any("answers again" in r.getMessage() for r in caplog.records)
    assert integrity_check(db) == ["ok"]
    print(f"\nworker under {error}: {tries} store errors logged in {FAULT_S} s, backoff {delays}")


@pytest.mark.slow
def test_an_acknowledgement_lost_to_the_disk_is_redelivered_after_the_lease(
    vfs: FaultVFS, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills up while the first occurrence is being dispatched: the batch's
    settlement (one transaction for the whole batch) fails (StoreError, logged), so the
    batch stays leased. The disk heals 0.5 s later; after the 2 s lease its occurrences
    are claimed again and delivered. At least once: every occurrence delivered, every
    row delivered, and the only repeats are of that first batch."""
    caplog.set_level(logging.INFO, logger="hexeract_lite")
    db = tmp_path / "s.db"
    now = datetime.now(UTC)
    messages = [_msg(now - timedelta(seconds=i)) for i in range(12)]
    armed = threading.Event()

    def fill_the_disk(message: ScheduledMessage) -> None:
        if not armed.is_set():
            armed.set()
            vfs.switch.arm(apsw.FullError, ops=["write"], files=["wal"])
            threading.Timer(0.5, vfs.switch.clear).start()

    sink = _Recorder(fill_the_disk)
    with _open_faulty(db) as store:
        store.insert_many(messages, 5)
        handle = SchedulerWorker(store, sink, FAST).start()
        try:
            assert _wait_for(
                lambda: all(
                    (snap := store.inspect(m.schedule_id)) is not None
                    and snap.status == "delivered"
                    for m in messages
                ),
                15,
            ), sink.delivered
        finally:
            assert handle.stop(10)
            vfs.switch.clear()
        snapshots = [store.inspect(m.schedule_id) for m in messages]
    first = sink.delivered[0]
    repeats = [oid for oid in set(sink.delivered) if sink.delivered.count(oid) > 1]
    assert set(sink.delivered) == {str(m.occurrence_id()) for m in messages}
    first_batch = set(sink.delivered[: FAST.batch_size])
    assert first in repeats and set(repeats) <= first_batch, (repeats, first_batch)
    assert all(s is not None and s.status == "delivered" for s in snapshots)
    assert _store_errors(caplog)
    assert integrity_check(db) == ["ok"]


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_creating_a_database_on_a_full_disk_fails_cleanly(
    vfs: FaultVFS, tmp_path: Path, error: str
) -> None:
    """The first write of a brand-new database fails: StoreError naming the path, and no
    half-made file is left behind (the next open, on a healthy disk, starts afresh)."""
    db = tmp_path / "new.db"
    vfs.switch.arm(ERRORS[error], ops=["write"])
    with pytest.raises(StoreError) as info:
        _open_faulty(db)
    vfs.switch.clear()
    assert str(db) in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with _open_faulty(db) as store:
        store.insert(_msg(), 3)
    assert integrity_check(db) == ["ok"]
