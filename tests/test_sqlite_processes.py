"""Several processes and several threads on one SQLite file: a live lease is never handed
out twice, and nothing is lost."""

from __future__ import annotations

import errno
import itertools
import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite import ScheduledMessage, ScheduleStatus, Target
from hexeract_lite.snapshot import MalformedSchedule, ScheduleSnapshot
from hexeract_lite.store.sqlite import SqliteScheduleStore

CLAIMER = Path(__file__).resolve().parent / "sqlite_claimer.py"


def _messages(start: datetime, count: int, spread: timedelta) -> list[ScheduledMessage]:
    step = spread / count
    return [
        ScheduledMessage.delay(Target.outbox(), start + i * step, "job", {"i": i})
        for i in range(count)
    ]


def _read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_three_processes_claim_from_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    start = datetime.now(UTC)
    first = _messages(start, 900, timedelta(seconds=2))
    with SqliteScheduleStore.open(db) as store:
        store.insert_many(first, 10)
    logs = [tmp_path / f"claimer{n}.log" for n in range(3)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(CLAIMER),
                str(db),
                str(log),
                "--seconds",
                "3",
                "--lease-ms",
                "400",
                "--drop-every",
                "37",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for log in logs
    ]
    later: list[ScheduledMessage] = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == b"ready"
        # while they claim, this process inserts more, one by one and in batches
        with SqliteScheduleStore.open(db) as store:
            for _ in range(30):
                batch = _messages(datetime.now(UTC), 10, timedelta(milliseconds=500))
                store.insert(batch[0], 10)
                store.insert_many(batch[1:], 10)
                later.extend(batch)
                time.sleep(0.03)
            # and one claimer dies mid-flight, holding whatever it held
            time.sleep(0.3)
            procs[0].send_signal(signal.SIGKILL)
        outcomes = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:  # pragma: no cover - only when the test failed
                proc.kill()
                proc.communicate()
    assert procs[0].returncode == -signal.SIGKILL
    for proc, (_, err) in zip(procs[1:], outcomes[1:], strict=True):
        assert proc.returncode == 0, err.decode()

    claims: dict[str, list[dict[str, Any]]] = defaultdict(list)
    ok_acks: dict[str, int] = defaultdict(int)
    pids: set[int] = set()
    for log in logs:
        for entry in _read_log(log):
            if "ack" in entry:
                ok_acks[entry["ack"]] += bool(entry["ok"])
            else:
                claims[entry["sid"]].append(entry)
                pids.add(entry["pid"])
    assert len(pids) == 3, "every process got work: they competed"

    inserted = {str(m.schedule_id) for m in (*first, *later)}
    assert set(claims) == inserted, "every occurrence was handed out"
    reclaimed = 0
    for sid, entries in claims.items():
        entries.sort(key=lambda e: datetime.fromisoformat(e["now"]))
        for before, after in itertools.pairwise(entries):
            # the next claim happened only once the previous lease had run out
            assert datetime.fromisoformat(after["now"]) >= datetime.fromisoformat(
                before["until"]
            ), (sid, before, after)
            reclaimed += 1
        assert len({e["occurrence"] for e in entries}) == 1
        assert ok_acks[sid] <= 1, sid
    assert reclaimed > 0, "dropped and killed claims were redelivered after their lease"

    with SqliteScheduleStore.open(db, create=False) as store:
        assert store.list_pending(10_000) == [], "none lost: every occurrence was delivered"
        for message in (*first, *later):
            snap = store.inspect(message.schedule_id)
            assert snap is not None and snap.status is ScheduleStatus.DELIVERED


def test_an_inserting_thread_and_a_claiming_thread_share_one_store(tmp_path: Path) -> None:
    total = 400
    errors: list[BaseException] = []
    inserted: list[uuid.UUID] = []
    claimed: list[uuid.UUID] = []
    done_inserting = threading.Event()
    t0 = datetime.now(UTC)
    with SqliteScheduleStore.open(tmp_path / "threads.db", durability="normal") as store:

        def insert() -> None:
            try:
                for i in range(total):
                    msg = ScheduledMessage.delay(
                        Target.mediator(), t0 - timedelta(milliseconds=i), "ev", i
                    )
                    if i % 2:
                        store.insert(msg, 3)
                    else:
                        store.insert_many([msg], 3)
                    inserted.append(msg.schedule_id)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                done_inserting.set()

        def claim() -> None:
            try:
                for _ in range(1_000_000):
                    batch = store.claim_due(datetime.now(UTC), 7, timedelta(minutes=5))
                    for occ in batch:
                        claimed.append(occ.message.schedule_id)
                        assert store.mark_delivered(occ.message.schedule_id, occ.leased_until)
                    if not batch and done_inserting.is_set() and not store.list_pending():
                        return
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def read() -> None:
            try:
                while not done_inserting.is_set():
                    store.next_wakeup()
                    store.list_pending(5)
                    store.data_version()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=f) for f in (insert, claim, read)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert len(claimed) == len(set(claimed)) == total, "each handed out once"
        assert set(claimed) == set(inserted)
        assert store.list_pending() == []


def test_several_stores_in_threads_of_one_process(tmp_path: Path) -> None:
    """Connections of one process compete like processes do (each store, its own)."""
    db = tmp_path / "many.db"
    msgs = _messages(datetime.now(UTC) - timedelta(seconds=1), 300, timedelta(milliseconds=300))
    with SqliteScheduleStore.open(db) as store:
        store.insert_many(msgs, 3)
    claimed: list[uuid.UUID] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with SqliteScheduleStore.open(db, durability="normal") as mine:
                while batch := mine.claim_due(datetime.now(UTC), 3, timedelta(minutes=5)):
                    with lock:
                        claimed.extend(o.message.schedule_id for o in batch)
                    for occ in batch:
                        assert mine.mark_delivered(occ.message.schedule_id, occ.leased_until)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sorted(claimed) == sorted(m.schedule_id for m in msgs)


# -- a store used in a forked child ----------------------------------------------------

FORK = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork() on this platform"
)
T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _msg() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), T0, "job", {})


def _wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def _run_in_fork(child: Any, timeout: float = 20) -> Any:
    """Run ``child()`` in a process made by fork(); return what it returned. A child that
    does not answer within ``timeout`` seconds is killed and the test fails."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def body() -> None:
        try:
            send.send(("ok", child()))
        except BaseException as exc:
            send.send(("error", f"{type(exc).__name__}: {exc}"))

    proc = ctx.Process(target=body)
    proc.start()
    try:
        if not receive.poll(timeout):
            pytest.fail(f"the forked child hung for {timeout} s")
        outcome, value = receive.recv()
    finally:
        if proc.is_alive():
            proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    assert outcome == "ok", value
    return value


def _held_for(lock: Any, seconds: float) -> threading.Thread:
    """A thread that holds ``lock`` from now for ``seconds`` (started, holding)."""
    taken = threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            time.sleep(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    return thread


@FORK
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+: fork() with threads
@pytest.mark.parametrize("detection", ["register_at_fork", "pid check"])
def test_a_forked_child_completes_its_first_call_while_a_parent_thread_holds_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, detection: str
) -> None:
    """A parent thread inside a store call when the process forks leaves the child's
    copy of the store's lock free: the fork waits for the call in flight
    (register_at_fork), or the child starts from a fresh lock (the pid check where
    register_at_fork is missing); either way the child opens its own connection and
    what it writes the parent reads."""
    import hexeract_lite.store.sqlite.store as module

    if detection == "pid check":
        monkeypatch.setattr(module, "AT_FORK_HOOKS", False)
    db = tmp_path / "forked.db"
    store = SqliteScheduleStore.open(db)
    first, from_child = _msg(), _msg()
    store.insert(first, 3)
    holder = _held_for(store._lock, 0.3)

    def child() -> list[str]:
        seen = [str(s.schedule_id) for s in store.list_pending()]
        store.insert(from_child, 3)
        assert store._conn is not None
        store.close()
        return seen

    try:
        seen = _run_in_fork(child)
    finally:
        holder.join()
    assert seen == [str(first.schedule_id)]
    assert {s.schedule_id for s in store.list_pending()} == {
        first.schedule_id,
        from_child.schedule_id,
    }, "the child's write is in the file"
    store.insert(_msg(), 3)  # the parent's own connection goes on
    store.close()


@FORK
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_fork_during_a_write_transaction_leaves_the_child_able_to_write(
    tmp_path: Path,
) -> None:
    """SQLite keeps its locks' bookkeeping per process: a child forked while one of the
    parent's connections held the write lock could never write to the file (every
    write: busy, then StoreError). The fork waits for the store's transaction instead."""
    db = tmp_path / "forked.db"
    store = SqliteScheduleStore.open(db, busy_timeout=timedelta(seconds=2))
    inside, from_child = _msg(), _msg()
    begun = threading.Event()

    def write_slowly() -> None:
        with store._write("test") as cur:
            begun.set()
            time.sleep(0.3)
            cur.execute(store._sql.insert, _row(inside))

    writer = threading.Thread(target=write_slowly)
    writer.start()
    assert begun.wait(10)

    def child() -> bool:
        store.insert(from_child, 3)
        store.close()
        return True

    try:
        assert _run_in_fork(child)
    finally:
        writer.join()
    ids = {s.schedule_id for s in store.list_pending()}
    assert ids == {inside.schedule_id, from_child.schedule_id}
    store.close()


def _row(msg: ScheduledMessage) -> tuple[Any, ...]:
    """The parameters of the store's insert statement for ``msg``."""
    return (
        msg.schedule_id.bytes,
        msg.event_type,
        msg.payload_json,
        msg.trigger.kind,
        msg.trigger.expression,
        "2026-03-01T12:00:00.000Z",
        msg.target.kind,
        msg.target.routing_key,
        3,
        "2026-03-01T12:00:00.000Z",
        msg.name,
        None,  # misfire_grace_ms
        *(None,) * 6,  # end_at, max_firings, jitter_ms, jitter_offset_ms, catch_up, catch_up_limit
    )


@FORK
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_memory_store_in_a_forked_child_is_a_copy_with_a_fresh_lock() -> None:
    from hexeract_lite import InMemoryScheduleStore

    store = InMemoryScheduleStore()
    before = _msg()
    store.insert(before, 3)
    holder = _held_for(store._lock, 0.3)

    def child() -> int:
        version = store.changes.version()
        store.insert(_msg(), 3)
        assert store.changes.version() == version + 1
        return len(store)

    try:
        assert _run_in_fork(child) == 2, "the child's copy holds the parent's rows"
    finally:
        holder.join()
    assert len(store) == 1, "the parent's store is its own"


def test_a_store_cannot_be_pickled_and_says_what_to_do(tmp_path: Path) -> None:
    """What a spawned process or a process pool would need: one store per process."""
    import pickle

    with (
        SqliteScheduleStore.open(tmp_path / "s.db") as store,
        pytest.raises(TypeError, match="open the store in each process"),
    ):
        pickle.dumps(store)


# -- creating one file from many places without hard links ------------------------------


def _ids(listed: list[ScheduleSnapshot | MalformedSchedule]) -> list[uuid.UUID]:
    assert all(isinstance(s, ScheduleSnapshot) for s in listed), listed
    return [s.schedule_id for s in listed if isinstance(s, ScheduleSnapshot)]


def _open_and_insert_at_once(db: Path, count: int) -> list[uuid.UUID]:
    """``count`` threads open ``db`` at the same moment and insert one row each."""
    barrier = threading.Barrier(count)
    ids: list[uuid.UUID] = []
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            barrier.wait()
            with SqliteScheduleStore.open(db) as store:
                msg = _msg()
                store.insert(msg, 3)
                ids.append(msg.schedule_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return ids


@pytest.mark.parametrize("no_links", ["os.link fails", "no os.link"])
def test_creators_without_hard_links_all_end_up_on_one_file_with_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_links: str
) -> None:
    """Without hard links, publishing the file by exists() then os.replace() would let
    two creators both replace, one then writing to an unlinked file: every creator
    ends on the one file, nothing lost."""
    if no_links == "os.link fails":

        def link(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EPERM, "Operation not permitted")  # e.g. FAT, some shares

        monkeypatch.setattr(os, "link", link)
    else:  # os.link is POSIX and NTFS only
        monkeypatch.delattr(os, "link")
    for attempt in range(5):
        db = tmp_path / f"fresh{attempt}.db"
        ids = _open_and_insert_at_once(db, 8)
        with SqliteScheduleStore.open(db, create=False) as store:
            assert sorted(_ids(store.list_pending())) == sorted(ids)
        if os.name == "posix":
            assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert not [p.name for p in tmp_path.iterdir() if "creating" in p.name]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork()")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_processes_creating_one_file_without_hard_links_share_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(os, "link")  # the children inherit the patched module
    db = tmp_path / "fresh.db"
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()

    def opener() -> None:
        start.wait(30)
        with SqliteScheduleStore.open(db) as store:
            store.insert(_msg(), 3)

    procs = [ctx.Process(target=opener) for _ in range(6)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * 6
    with SqliteScheduleStore.open(db, create=False) as store:
        assert len(store.list_pending()) == 6
