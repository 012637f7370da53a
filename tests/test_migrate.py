"""Copying schedules between stores: the export/import pair, ``migrate()`` and
``hexeract scheduler migrate``.

Rows in every status are made through the stores' own API on a manual clock, copied,
and compared snapshot by snapshot (payloads decoded: JSONB keeps the JSON value, not
its text). Tests that need PostgreSQL use tests/pg.py: they skip without a server and
fail in CI.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apsw
import attrs
import pytest

from hexeract_lite import (
    InMemoryScheduleStore,
    ManualClock,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    SqliteScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.errors import (
    InvalidArgument,
    InvalidConfiguration,
    InvalidMessage,
    MigrationError,
)
from hexeract_lite.migrate import MigrationReport, migrate
from hexeract_lite.store.base import SWEEP_ERROR
from hexeract_lite.store.record import ScheduleRecord

from . import mysql, pg
from .conftest import T0

LEASE = timedelta(minutes=5)
BIN = Path(sys.executable).parent


# -- rows in every status ---------------------------------------------------------------

CRON_EVERY_2S = "*/2 * * * * *"


def populate(store: ScheduleStore, clock: ManualClock) -> dict[str, uuid.UUID]:
    """One schedule per interesting state, made through the store's API; name -> id."""
    ids: dict[str, uuid.UUID] = {}
    past = T0 - timedelta(minutes=1)

    def add(name: str, msg: ScheduledMessage, max_attempts: int = 3) -> uuid.UUID:
        store.insert(msg, max_attempts)
        ids[name] = msg.schedule_id
        clock.advance(timedelta(milliseconds=7))  # distinct created_at values
        return msg.schedule_id

    def claim_one(name: str, lease: timedelta = LEASE) -> datetime:
        [occ] = store.claim_due(clock.now(), 10, lease)
        assert occ.message.schedule_id == ids[name]
        return occ.leased_until

    def delay(name: str, at: datetime, target: Target | None = None, **kw: Any) -> uuid.UUID:
        msg = ScheduledMessage.delay(target or Target.outbox(), at, f"ev.{name}", {"n": name})
        return add(name, msg, **kw)

    # in flight: claimed, lease live (attempts 1)
    delay("leased", past)
    claim_one("leased")
    # in retry backoff: claimed, failed (lease = retry deadline, last_error set)
    sid = delay("backoff", past)
    assert store.mark_failed(sid, timedelta(seconds=30), "boom\nline 2: é", claim_one("backoff"))
    # delivered
    sid = delay("delivered", past, Target.mediator())
    assert store.mark_delivered(sid, claim_one("delivered"))
    # dead-lettered by a worker
    sid = delay("dead", past, max_attempts=1)
    assert store.mark_dead_lettered(sid, "gave up: HTTP 500", claim_one("dead"))
    # a cron schedule delivered once and rescheduled (attempts back to 0)
    msg = ScheduledMessage.cron(
        Target.bus("reports.tick"), CRON_EVERY_2S, past, "ev.cron_rescheduled", {"k": [1, 2]}
    )
    add("cron_rescheduled", msg)
    assert store.reschedule(msg.schedule_id, T0 + timedelta(hours=4), claim_one("cron_rescheduled"))
    # dead-lettered by the sweep: the worker died on its last attempt
    delay("swept", past, max_attempts=1)
    claim_one("swept", lease=timedelta(seconds=1))
    clock.advance(timedelta(seconds=2))
    assert store.dead_letter_exhausted() == 1
    # replayed after a dead letter: pending again, due now
    sid = delay("replayed", past, max_attempts=1)
    assert store.mark_dead_lettered(sid, "first failure", claim_one("replayed"))
    store.replay(sid)
    # waiting: one-shot (JSONB reorders these keys), cron on a bus, paused ones, cancelled
    msg = ScheduledMessage.delay(
        Target.mediator(),
        T0 + timedelta(hours=1),
        "ev.pending",
        {"zeta": 1, "a": [1.5, "é", None, {"y": True, "x": False}], "mid": "\u2603"},
    )
    add("pending", msg, max_attempts=7)
    cron = ScheduledMessage.cron(
        Target.bus("reports.daily"), "@daily", T0 + timedelta(days=1), "ev.cron", {}
    )
    add("cron", cron)
    sid = delay("paused", T0 + timedelta(hours=2))
    assert store.set_paused(sid, True)
    cron = ScheduledMessage.cron(
        Target.outbox(), "0 9 * * 1-5", T0 - timedelta(days=3), "ev.paused_cron", [1, "two"]
    )
    add("paused_cron", cron)
    assert store.set_paused(cron.schedule_id, True)
    sid = delay("cancelled", T0 + timedelta(hours=3))
    assert store.cancel(sid)
    return ids


EXPECTED_STATUS = {
    "leased": ScheduleStatus.PENDING,
    "backoff": ScheduleStatus.PENDING,
    "delivered": ScheduleStatus.DELIVERED,
    "dead": ScheduleStatus.DEAD_LETTERED,
    "cron_rescheduled": ScheduleStatus.PENDING,
    "swept": ScheduleStatus.DEAD_LETTERED,
    "replayed": ScheduleStatus.PENDING,
    "pending": ScheduleStatus.PENDING,
    "cron": ScheduleStatus.PENDING,
    "paused": ScheduleStatus.PAUSED,
    "paused_cron": ScheduleStatus.PAUSED,
    "cancelled": ScheduleStatus.CANCELLED,
}


def comparable(snapshot: ScheduleSnapshot | None) -> tuple[ScheduleSnapshot, object]:
    """A snapshot with its payload decoded (JSONB keeps the value, not the text)."""
    assert snapshot is not None
    return attrs.evolve(snapshot, payload_json=""), json.loads(snapshot.payload_json)


def snapshots(store: ScheduleStore, ids: dict[str, uuid.UUID]) -> dict[str, object]:
    return {name: comparable(store.inspect(sid)) for name, sid in ids.items()}


def check_states(store: ScheduleStore, ids: dict[str, uuid.UUID]) -> None:
    """The populated rows really are in the states their names say."""
    snaps = {name: store.inspect(sid) for name, sid in ids.items()}
    assert {name: s.status for name, s in snaps.items() if s} == EXPECTED_STATUS
    leased, backoff = snaps["leased"], snaps["backoff"]
    swept, resched = snaps["swept"], snaps["cron_rescheduled"]
    assert leased and leased.attempts == 1 and leased.leased_until is not None
    assert backoff and backoff.last_error == "boom\nline 2: é" and backoff.leased_until
    assert swept and swept.last_error == SWEEP_ERROR
    assert resched and resched.attempts == 0 and resched.trigger.label() == f"cron:{CRON_EVERY_2S}"
    assert resched.target.label() == "bus:reports.tick"


def dump(store: ScheduleStore) -> list[tuple[ScheduleRecord, object]]:
    """Every row of ``store``, in id order, payload decoded (read through migrate)."""
    everything = InMemoryScheduleStore()
    migrate(store, everything)
    records = everything.export_records(None, 1_000_000)
    return [(attrs.evolve(r, payload=""), json.loads(r.payload)) for r in records]


# -- stores of each kind ----------------------------------------------------------------

KINDS = [
    "memory",
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]

Opener = Callable[[str, ManualClock], ScheduleStore]


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Opener]:
    """Open a fresh store of a kind on ``clock``; all are closed (and dropped) after."""
    opened: list[ScheduleStore] = []

    def opener(kind: str, clock: ManualClock) -> ScheduleStore:
        store: ScheduleStore
        if kind == "memory":
            store = InMemoryScheduleStore(clock=clock)
        elif kind == "sqlite":
            store = SqliteScheduleStore.open(tmp_path / f"s{len(opened)}.db", clock=clock)
        elif kind == "mysql":
            store = mysql.open_scratch_store(clock=clock)
        else:
            store = pg.open_scratch_store(clock=clock)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def _export(store: ScheduleStore, after: uuid.UUID | None, limit: int) -> list[ScheduleRecord]:
    return store.export_records(after, limit)


def _import(store: ScheduleStore, records: list[ScheduleRecord]) -> int:
    return store.import_records(records)


# -- the export/import pair, on every store ------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_export_pages_in_id_order(open_store: Opener, clock: ManualClock, kind: str) -> None:
    store = open_store(kind, clock)
    assert _export(store, None, 5) == []
    ids = populate(store, clock)
    pages: list[list[ScheduleRecord]] = []
    after = None
    while page := _export(store, after, 5):
        pages.append(page)
        after = page[-1].schedule_id
    assert [len(p) for p in pages] == [5, 5, 2]
    exported = [r.schedule_id for p in pages for r in p]
    assert exported == sorted(ids.values(), key=lambda u: u.bytes) == sorted(ids.values())
    for record in (r for p in pages for r in p):
        assert comparable(record.snapshot()) == comparable(store.inspect(record.schedule_id))
    # ``after`` need not be a stored id
    assert [r.schedule_id for r in _export(store, uuid.UUID(int=0), 100)] == exported
    assert _export(store, uuid.UUID(int=2**128 - 1), 100) == []
    with pytest.raises(InvalidConfiguration):
        _export(store, None, 0)
    with pytest.raises(InvalidArgument):
        _export(store, str(exported[0]), 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
def test_import_inserts_what_is_absent_as_given(
    open_store: Opener, clock: ManualClock, kind: str
) -> None:
    source = InMemoryScheduleStore(clock=clock)
    ids = populate(source, clock)
    records = source.export_records(None, 100)
    dest = open_store(kind, clock)
    version = dest.changes.version()
    assert _import(dest, []) == 0
    assert _import(dest, records[:4]) == 4
    assert dest.changes.version() != version, "an import that inserted wakes the workers"
    version = dest.changes.version()
    assert _import(dest, records) == len(records) - 4
    assert _import(dest, records) == 0
    assert dest.changes.version() != version
    version = dest.changes.version()
    assert _import(dest, records[:3]) == 0
    assert dest.changes.version() == version, "nothing inserted, nobody woken"
    assert snapshots(dest, ids) == snapshots(source, ids)
    check_states(dest, ids)
    # a row already there is left as it is, even when the import carries another state
    changed = attrs.evolve(records[0], attempts=2, last_error="changed")
    assert _import(dest, [changed]) == 0
    assert comparable(dest.inspect(changed.schedule_id)) == comparable(records[0].snapshot())


@pytest.mark.parametrize("kind", KINDS)
def test_import_counts_a_repeated_id_once_and_refuses_bad_input_whole(
    open_store: Opener, clock: ManualClock, kind: str
) -> None:
    record = ScheduleRecord.new(ScheduledMessage.delay(Target.outbox(), T0, "ev", {"a": 1}), 3, T0)
    other = ScheduleRecord.new(ScheduledMessage.delay(Target.outbox(), T0, "ev", {}), 3, T0)
    dest = open_store(kind, clock)
    naive = attrs.evolve(other, scheduled_for=datetime(2026, 3, 1, 12))
    bad_rows = {
        "object": [record, object()],
        f"record {other.schedule_id}: scheduled_for": [record, naive],
        "attempts": [record, attrs.evolve(other, attempts=-1)],
    }
    for named, bad in bad_rows.items():
        with pytest.raises(InvalidConfiguration, match=re.escape(named)):
            _import(dest, bad)  # type: ignore[arg-type]
        assert dest.inspect(record.schedule_id) is None, "nothing written"
    twin = attrs.evolve(record, event_type="twin")
    assert _import(dest, [record, twin, other]) == 2
    snap = dest.inspect(record.schedule_id)
    assert snap is not None and snap.event_type == "ev", "the first of the two wins"
    record.attempts = 2  # records are mutable: the store must have kept its own
    snap = dest.inspect(record.schedule_id)
    assert snap is not None and snap.attempts == 0
    # instants are stored at millisecond precision, in UTC
    odd = ScheduleRecord.new(ScheduledMessage.delay(Target.outbox(), T0, "ev", {}), 3, T0)
    plus_one = timezone(timedelta(hours=1))
    odd = attrs.evolve(odd, created_at=datetime(2026, 3, 1, 13, 0, 0, 123456, tzinfo=plus_one))
    assert _import(dest, [odd]) == 1
    snap = dest.inspect(odd.schedule_id)
    assert snap is not None
    assert snap.created_at == datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)


# -- migrate() -----------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 5, 12, 500])
def test_migrate_pages_and_is_idempotent(clock: ManualClock, batch_size: int) -> None:
    source, dest = InMemoryScheduleStore(clock=clock), InMemoryScheduleStore(clock=clock)
    ids = populate(source, clock)
    assert migrate(source, dest, batch_size=batch_size) == MigrationReport(read=12, copied=12)
    report = migrate(source, dest, batch_size=batch_size)
    assert (report.read, report.copied, report.skipped) == (12, 0, 12)
    assert report.to_json_dict() == {"read": 12, "copied": 0, "skipped": 12}
    assert dump(dest) == dump(source)
    # a schedule added to the source since is copied by the next run, alone
    clock.advance(timedelta(seconds=1))
    late = ScheduledMessage.delay(Target.outbox(), T0, "ev.late", {})
    source.insert(late, 3)
    assert migrate(source, dest, batch_size=batch_size) == MigrationReport(read=13, copied=1)
    assert snapshots(dest, ids) == snapshots(source, ids)


def test_migrate_empty_source(clock: ManualClock) -> None:
    report = migrate(InMemoryScheduleStore(), InMemoryScheduleStore())
    assert (report.read, report.copied, report.skipped) == (0, 0, 0)


def test_a_failure_part_way_reports_the_counts_and_a_rerun_resumes(clock: ManualClock) -> None:
    source = InMemoryScheduleStore(clock=clock)
    populate(source, clock)

    class Flaky(InMemoryScheduleStore):
        calls = 0

        def import_records(self, records: Any) -> int:
            Flaky.calls += 1
            if Flaky.calls == 3:
                raise StoreError("the connection dropped")
            return super().import_records(records)

    dest = Flaky(clock=clock)
    with pytest.raises(MigrationError, match="stopped after 10 rows read, 10 copied") as info:
        migrate(source, dest, batch_size=5)
    assert info.value.report == MigrationReport(read=10, copied=10)
    assert isinstance(info.value.__cause__, StoreError)
    assert migrate(source, dest, batch_size=5) == MigrationReport(read=12, copied=2)
    assert dump(dest) == dump(source)


def test_migrate_checks_its_arguments() -> None:
    with pytest.raises(InvalidConfiguration, match="batch_size"):
        migrate(InMemoryScheduleStore(), InMemoryScheduleStore(), batch_size=0)
    with pytest.raises(InvalidConfiguration, match="batch_size"):
        migrate(InMemoryScheduleStore(), InMemoryScheduleStore(), batch_size=True)

    class Bare(InMemoryScheduleStore):
        export_records = ScheduleStore.export_records
        import_records = ScheduleStore.import_records

        @property
        def copies_records(self) -> bool:
            return False

    with pytest.raises(InvalidConfiguration, match="no export_records"):
        migrate(Bare(), InMemoryScheduleStore())
    with pytest.raises(InvalidConfiguration, match="no import_records"):
        migrate(InMemoryScheduleStore(), Bare())
    with pytest.raises(NotImplementedError):
        ScheduleStore.export_records(InMemoryScheduleStore(), None, 1)


def test_a_malformed_sqlite_row_stops_the_copy_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    with SqliteScheduleStore.open(db) as store:
        store.insert(ScheduledMessage.delay(Target.outbox(), T0, "ev", {}), 3)
    conn = apsw.Connection(str(db))
    conn.execute(
        "INSERT INTO scheduled_messages (schedule_id, event_type, payload, trigger_kind,"
        " scheduled_for, target_kind, max_attempts, created_at)"
        " VALUES (x'0102', 'ev', '{}', 'delay', '2026-03-01T12:00:00.000Z', 'outbox', 3,"
        " '2026-03-01T12:00:00.000Z')"
    )
    conn.close()
    dest = InMemoryScheduleStore()
    with (
        SqliteScheduleStore.open(db, create=False) as store,
        pytest.raises(MigrationError, match="cannot export the row") as info,
    ):
        migrate(store, dest)
    assert isinstance(info.value.__cause__, StoreError)
    assert len(dest) == 0


# -- SQLite <-> PostgreSQL -------------------------------------------------------------


@pytest.mark.postgres
def test_sqlite_to_postgres_and_back_keeps_every_state(tmp_path: Path, clock: ManualClock) -> None:
    with (
        SqliteScheduleStore.open(tmp_path / "source.db", clock=clock) as source,
        pg.open_scratch_store(clock=clock) as middle,
        SqliteScheduleStore.open(tmp_path / "back.db", clock=clock) as back,
    ):
        ids = populate(source, clock)
        check_states(source, ids)
        assert migrate(source, middle, batch_size=5) == MigrationReport(read=12, copied=12)
        assert snapshots(middle, ids) == snapshots(source, ids)
        check_states(middle, ids)
        assert migrate(source, middle, batch_size=5) == MigrationReport(read=12, copied=0)
        assert migrate(middle, back) == MigrationReport(read=12, copied=12)
        assert snapshots(back, ids) == snapshots(source, ids)
        assert dump(back) == dump(middle) == dump(source)
        # the copies behave as the original: same wake-up, same claims, same sweep
        assert middle.next_wakeup() == back.next_wakeup() == source.next_wakeup()
        later = T0 + timedelta(minutes=10)
        clock.set(later)
        claims = [
            [o.occurrence_id() for o in s.claim_due(later, 100, LEASE)]
            for s in (source, middle, back)
        ]
        # due by then: the expired lease, the finished backoff, the replayed one
        assert claims[0] == claims[1] == claims[2] and len(claims[0]) == 3
        assert [s.dead_letter_exhausted() for s in (source, middle, back)] == [0, 0, 0]
        assert [s.list_dead_letter() for s in (middle, back)] == [source.list_dead_letter()] * 2


@pytest.mark.mysql
@pytest.mark.postgres
def test_sqlite_to_mysql_to_postgres_and_back_keeps_every_row(
    tmp_path: Path, clock: ManualClock
) -> None:
    with (
        SqliteScheduleStore.open(tmp_path / "source.db", clock=clock) as source,
        mysql.open_scratch_store(clock=clock) as first,
        pg.open_scratch_store(clock=clock) as second,
        mysql.open_scratch_store(clock=clock) as third,
        SqliteScheduleStore.open(tmp_path / "back.db", clock=clock) as back,
    ):
        ids = populate(source, clock)
        assert migrate(source, first, batch_size=5) == MigrationReport(read=12, copied=12)
        check_states(first, ids)
        assert migrate(first, second) == MigrationReport(read=12, copied=12)
        assert migrate(second, third) == MigrationReport(read=12, copied=12)
        assert migrate(third, back) == MigrationReport(read=12, copied=12)
        assert migrate(source, first) == MigrationReport(read=12, copied=0)
        for store in (first, second, third, back):
            assert snapshots(store, ids) == snapshots(source, ids)
            assert dump(store) == dump(source)
        assert first.next_wakeup() == back.next_wakeup() == source.next_wakeup()
        later = T0 + timedelta(minutes=10)
        clock.set(later)
        claims = [
            [o.occurrence_id() for o in s.claim_due(later, 100, LEASE)] for s in (source, first)
        ]
        assert claims[0] == claims[1] and len(claims[0]) == 3


@pytest.mark.postgres
def test_postgres_refuses_what_it_cannot_hold_before_writing(
    tmp_path: Path, clock: ManualClock
) -> None:
    with (
        SqliteScheduleStore.open(tmp_path / "nul.db", clock=clock) as source,
        pg.open_scratch_store(clock=clock) as dest,
    ):
        good = ScheduledMessage.delay(Target.outbox(), T0, "ev", {"ok": 1})
        bad = ScheduledMessage.delay(Target.outbox(), T0, "ev", {"s": "a\x00b"})
        source.insert_many([good, bad], 3)
        with pytest.raises(MigrationError, match=f"NUL.*{bad.schedule_id}") as info:
            migrate(source, dest)
        assert isinstance(info.value.__cause__, InvalidMessage)
        assert dest.inspect(good.schedule_id) is None, "the batch is all or nothing"
        [record] = [r for r in _export(source, None, 10) if r.schedule_id == good.schedule_id]
        nul_error = attrs.evolve(record, last_error="bytes: \x00\x01")
        with pytest.raises(InvalidMessage, match=f"{good.schedule_id}: last_error holds a NUL"):
            _import(dest, [nul_error])
        assert dest.inspect(good.schedule_id) is None
        assert _import(dest, [record]) == 1
        too_big = attrs.evolve(record, schedule_id=uuid.uuid4(), max_attempts=2**31)
        with pytest.raises(InvalidConfiguration, match="at most 2147483647"):
            _import(dest, [too_big])


# -- the command ---------------------------------------------------------------------------


@attrs.frozen
class Result:
    code: int
    out: str
    err: str


Cli = Callable[..., Result]
"""``cli("--from", ..., "--to", ...)`` runs ``hexeract scheduler migrate`` in-process."""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cli:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("HEXERACT_SCHEDULER_TABLE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> Result:
        capsys.readouterr()
        code = main(["scheduler", "migrate", *argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def make_source(
    path: Path, clock: ManualClock, table: str = "scheduled_messages"
) -> dict[str, uuid.UUID]:
    with SqliteScheduleStore.open(path, table=table, clock=clock) as store:
        return populate(store, clock)


def test_cli_sqlite_to_sqlite(
    cli: Cli, tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = make_source(tmp_path / "a.db", clock)
    first = cli("--from", "sqlite:///" + str(tmp_path / "a.db"), "--to", "sqlite://b.db")
    assert first.code == 0, first.err
    assert first.out == (
        f"Migrated table scheduled_messages of {tmp_path / 'a.db'}"
        " to table scheduled_messages of b.db:\n"
        "read 12, copied 12, skipped 0 (already in the destination)\n"
    )
    again = cli("--from", "a.db", "--to", "b.db", "--format", "json", "--batch-size", "5")
    assert again.code == 0, again.err
    assert json.loads(again.out) == {
        "source": "a.db",
        "source_table": "scheduled_messages",
        "destination": "b.db",
        "destination_table": "scheduled_messages",
        "read": 12,
        "copied": 0,
        "skipped": 12,
    }
    # another table of the same file, named by --to-table
    other = cli("--from", "a.db", "--to", "a.db", "--to-table", "copy_of", "--format", "json")
    assert other.code == 0, other.err
    assert json.loads(other.out)["copied"] == 12
    # --table defaults to $HEXERACT_SCHEDULER_TABLE, and --to-table to the source's name
    monkeypatch.setenv("HEXERACT_SCHEDULER_TABLE", "copy_of")
    env = cli("--from", "a.db", "--to", "c.db", "--format", "json")
    assert env.code == 0, env.err
    data = json.loads(env.out)
    assert (data["source_table"], data["destination_table"], data["copied"]) == (
        "copy_of",
        "copy_of",
        12,
    )
    with (
        SqliteScheduleStore.open(tmp_path / "a.db", create=False) as a,
        SqliteScheduleStore.open(tmp_path / "b.db", create=False) as b,
        SqliteScheduleStore.open(tmp_path / "a.db", table="copy_of", create=False) as c,
    ):
        assert snapshots(b, ids) == snapshots(c, ids) == snapshots(a, ids)


def test_cli_missing_source_is_exit_1_and_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    dest = tmp_path / "dest.db"
    for source in ("absent.db", "sqlite:///" + str(tmp_path / "absent.db"), "typo/absent.db"):
        result = cli("--from", source, "--to", str(dest))
        assert (result.code, result.out) == (1, ""), result.err
        assert "no database at " in result.err and "absent.db" in result.err
        assert not (tmp_path / "absent.db").exists() and not (tmp_path / "typo").exists()
        assert not dest.exists(), "the destination is not created either"
    # a file without the table is no source either
    with SqliteScheduleStore.open(tmp_path / "other.db", table="other"):
        pass
    result = cli("--from", "other.db", "--to", str(dest))
    assert result.code == 1
    assert "no database at" in result.err and "scheduled_messages" in result.err
    assert not dest.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "a.db", "--to", "./a.db"], "name the same table"),
        (["--from", "a.db", "--to", "b.db", "--batch-size", "0"], "expected an integer >= 1"),
        (["--from", "", "--to", "b.db"], "empty connection string"),
        (["--from", "a.db"], "the following arguments are required: --to"),
        (["--from", "a.db", "--to", "b.db", "--to-table", "x-y"], "invalid table name"),
        (
            ["--from", "a.db", "--to", "oracle://root:hunter2@db/app"],
            "unsupported connection scheme 'oracle'",
        ),
    ],
)
def test_cli_usage_errors(cli: Cli, tmp_path: Path, argv: list[str], message: str) -> None:
    SqliteScheduleStore.open(tmp_path / "a.db").close()
    result = cli(*argv)
    assert result.code == 2
    assert message in result.err
    assert "hunter2" not in result.out + result.err
    assert not (tmp_path / "b.db").exists()


@pytest.mark.parametrize("side", ["--from", "--to"])
def test_cli_never_prints_a_password(cli: Cli, tmp_path: Path, side: str) -> None:
    SqliteScheduleStore.open(tmp_path / "a.db").close()
    url = "postgresql://scheduler:s3cr3t-pw@127.0.0.1:1/app?connect_timeout=1"
    argv = ["--from", url, "--to", "a.db"] if side == "--from" else ["--from", "a.db", "--to", url]
    result = cli(*argv)
    assert result.code == 1
    assert result.err.startswith("hexeract: error: ")
    assert "s3cr3t-pw" not in result.out + result.err


@pytest.mark.postgres
def test_cli_sqlite_to_postgres_and_back(cli: Cli, tmp_path: Path, clock: ManualClock) -> None:
    url = pg.require_server()
    password = urlsplit(url).password or "\0no password\0"
    table = pg.unique_table("mig")
    ids = make_source(tmp_path / "src.db", clock, table="jobs")
    outputs: list[str] = []

    def run(*argv: str) -> Result:
        result = cli(*argv)
        outputs.append(result.out + result.err)
        return result

    try:
        missing = run("--from", url, "--table", table, "--to", "back.db")
        assert missing.code == 1 and f"no table '{table}'" in missing.err
        assert not (tmp_path / "back.db").exists()
        argv = ["--from", "src.db", "--table", "jobs", "--to", url, "--to-table", table]
        first = run(*argv, "--format", "json", "--batch-size", "5")
        assert first.code == 0, first.err
        data = json.loads(first.out)
        assert (data["read"], data["copied"], data["skipped"]) == (12, 12, 0)
        assert data["destination_table"] == table and data["source_table"] == "jobs"
        second = run(*argv)
        assert second.code == 0, second.err
        assert second.out.endswith("read 12, copied 0, skipped 12 (already in the destination)\n")
        back = run("--from", url, "--table", table, "--to", "back.db")
        assert back.code == 0, back.err
        assert "read 12, copied 12, skipped 0" in back.out
        with (
            SqliteScheduleStore.open(tmp_path / "src.db", table="jobs", create=False) as a,
            SqliteScheduleStore.open(tmp_path / "back.db", table=table, create=False) as b,
        ):
            assert snapshots(b, ids) == snapshots(a, ids)
        # a NUL in a payload: refused by PostgreSQL, a runtime error (exit 1), named
        with SqliteScheduleStore.open(tmp_path / "src.db", table="jobs", clock=clock) as a:
            bad = ScheduledMessage.delay(Target.outbox(), T0, "ev", {"s": "\x00"})
            a.insert(bad, 3)
        nul = run(*argv)
        assert nul.code == 1
        assert "NUL" in nul.err and str(bad.schedule_id) in nul.err
        assert "run it again to resume" in nul.err
    finally:
        pg.drop_table(url, table)
    assert not any(password in text for text in outputs)
    assert any("***" in text for text in outputs), "the URL is shown, redacted"


def test_the_hexeract_script_migrates(tmp_path: Path, clock: ManualClock) -> None:
    """One real process of the installed script."""
    ids = make_source(tmp_path / "a.db", clock)
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HEXERACT_SCHEDULER_TABLE")
    }
    script = BIN / "hexeract"
    assert script.exists(), f"{script} is missing: install the project (pip install -e .)"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(script), "scheduler", "migrate", *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = run("--from", "a.db", "--to", "sqlite://b.db", "--to-table", "moved")
    assert (done.returncode, done.stderr) == (0, "")
    assert (
        done.stdout.splitlines()[-1] == "read 12, copied 12, skipped 0 (already in the destination)"
    )
    missing = run("--from", "nope.db", "--to", "c.db")
    assert missing.returncode == 1
    assert missing.stderr == f"hexeract: error: no database at {tmp_path / 'nope.db'}\n"
    assert not (tmp_path / "nope.db").exists() and not (tmp_path / "c.db").exists()
    with (
        SqliteScheduleStore.open(tmp_path / "a.db", create=False) as a,
        SqliteScheduleStore.open(tmp_path / "b.db", table="moved", create=False) as b,
    ):
        assert snapshots(b, ids) == snapshots(a, ids)


def test_migrate_to_postgres_names_a_source_row_whose_payload_is_not_json(tmp_path: Path) -> None:
    """A source row whose payload is not JSON (written by another tool) stops the copy with a
    MigrationError naming its schedule id, so the operator knows which row to fix; the pages
    before it stay copied."""
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
        assert isinstance(failed.value.__cause__, StoreError)
        assert dest.stats().total == 2, "the first page stays; nothing of the failing one"
    finally:
        dest.close()


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
    """On a terminal, the progress line's last text is the final count, however soon after the
    previous rewrite it came."""
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
    """An error after the progress line starts on a line of its own, the progress line keeping
    its last count."""
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
