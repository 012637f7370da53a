"""Several processes and several threads on one SQLite file: a live lease is never handed
out twice, and nothing is lost."""

from __future__ import annotations

import itertools
import json
import signal
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
