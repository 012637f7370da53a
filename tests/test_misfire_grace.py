"""Misfire grace: a firing found later than its schedule's grace is not
delivered. A one-shot is dead-lettered with the reason (listed, replayable); a recurring
schedule skips the stale firing and goes on at its next instant. No grace: delivered
late, once (as before). Also the ``misfire_grace_ms`` column's schema step on SQLite
and PostgreSQL."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path

import apsw
import attrs
import pytest

from hexeract_lite import (
    InvalidMessage,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    StoreError,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.hooks import Missed
from hexeract_lite.snapshot import ScheduleSnapshot
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.store.sqlite.schema import META_TABLE, SCHEMA_VERSION
from hexeract_lite.worker import SchedulerWorker

from . import pg
from .conftest import T0, FrozenTime

GRACE = timedelta(minutes=5)


class Recorder:
    def __init__(self) -> None:
        self.got: list[ScheduledMessage] = []

    def dispatch(self, message: ScheduledMessage) -> None:
        self.got.append(message)


def snap(store: ScheduleStore, msg: ScheduledMessage) -> ScheduleSnapshot:
    s = store.inspect(msg.schedule_id)
    assert s is not None
    return s


def test_a_one_shot_found_past_its_grace_is_dead_lettered_and_replayable(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=GRACE)
    store.insert(msg, 3)
    assert snap(store, msg).misfire_grace == GRACE
    sink = Recorder()
    worker = SchedulerWorker(store, sink)
    frozen.move_to(T0 + GRACE + timedelta(milliseconds=1))
    report = worker.run_once()
    assert (report.claimed, report.dead_lettered) == (1, 1)
    assert sink.got == []
    s = snap(store, msg)
    assert s.status is ScheduleStatus.DEAD_LETTERED
    assert s.last_error is not None
    assert s.last_error.startswith("missed: due 2026-03-01T12:00:00.000Z, found 2026-03-01T12:05")
    assert "beyond its misfire grace of 0:05:00; not delivered" in s.last_error
    assert [d.schedule_id for d in store.list_dead_letter()] == [msg.schedule_id]
    if store.keeps_runs:  # its run says what became of it: a dead letter, as charted
        [run] = store.runs(msg.schedule_id)
        assert run.outcome.value == "dead_lettered" and run.error == s.last_error
    store.replay(msg.schedule_id)  # the operator's answer: deliver it now
    assert worker.run_once().delivered == 1
    assert [m.schedule_id for m in sink.got] == [msg.schedule_id]


def test_a_one_shot_within_its_grace_is_delivered(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=GRACE)
    store.insert(msg, 3)
    frozen.move_to(T0 + GRACE)  # exactly the grace: still in time
    assert SchedulerWorker(store, Recorder()).run_once().delivered == 1


def test_no_grace_delivers_late_once(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {})
    store.insert(msg, 3)
    assert snap(store, msg).misfire_grace is None
    frozen.move_to(T0 + timedelta(days=30))
    sink = Recorder()
    assert SchedulerWorker(store, sink).run_once().delivered == 1
    assert len(sink.got) == 1


def test_a_zero_grace_allows_no_lateness(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=timedelta(0))
    store.insert(msg, 3)
    assert snap(store, msg).misfire_grace == timedelta(0)
    frozen.move_to(T0 + timedelta(milliseconds=1))
    assert SchedulerWorker(store, Recorder()).run_once().dead_lettered == 1


@pytest.mark.parametrize("kind", ["cron", "zoned", "interval"])
def test_a_recurring_schedule_skips_the_stale_firing(
    store: ScheduleStore, frozen: FrozenTime, kind: str
) -> None:
    first = T0 + timedelta(hours=1)  # 13:00Z
    if kind == "interval":
        msg = ScheduledMessage.every(
            Target.outbox(), timedelta(hours=1), first, "e", {}, misfire_grace=GRACE
        )
    else:
        msg = ScheduledMessage.cron(
            Target.outbox(),
            "0 * * * *",
            first,
            "e",
            {},
            tz="Europe/Paris" if kind == "zoned" else None,
            misfire_grace=GRACE,
        )
    store.insert(msg, 3)
    sink = Recorder()
    events: list[object] = []
    worker = SchedulerWorker(store, sink, hooks=[events.append])
    frozen.move_to(first + timedelta(minutes=30))  # 30 minutes late: stale
    report = worker.run_once()
    assert (report.claimed, report.missed, report.rescheduled, report.delivered) == (1, 1, 0, 0)
    assert sink.got == []
    [missed] = events
    assert isinstance(missed, Missed) and missed.next == first + timedelta(hours=1)
    assert "beyond its misfire grace of 0:05:00" in missed.reason
    s = snap(store, msg)
    assert s.status is ScheduleStatus.PENDING and s.scheduled_for == first + timedelta(hours=1)
    if store.keeps_runs:  # the stale firing was passed over, not dead-lettered
        assert [r.outcome.value for r in store.runs(msg.schedule_id)] == ["skipped"]
    frozen.move_to(first + timedelta(hours=1, minutes=2))  # 2 minutes late: in time
    assert worker.run_once().rescheduled == 1
    assert [m.scheduled_for for m in sink.got] == [first + timedelta(hours=1)]


def test_a_skipped_firing_is_logged_as_missed_not_as_released(
    store: ScheduleStore, frozen: FrozenTime, caplog: pytest.LogCaptureFixture
) -> None:
    first = T0 + timedelta(hours=1)
    msg = ScheduledMessage.cron(Target.outbox(), "0 * * * *", first, "e", {}, misfire_grace=GRACE)
    store.insert(msg, 3)
    frozen.move_to(first + timedelta(minutes=30))
    with caplog.at_level(logging.DEBUG, logger="hexeract_lite.worker"):
        assert SchedulerWorker(store, Recorder()).run_once().missed == 1
    texts = [r.getMessage() for r in caplog.records]
    assert not [t for t in texts if "released" in t or "stopping" in t]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "beyond its misfire grace of 0:05:00" in warning


def test_a_missed_one_shot_is_logged_as_never_dispatched(
    store: ScheduleStore, frozen: FrozenTime, caplog: pytest.LogCaptureFixture
) -> None:
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=GRACE)
    store.insert(msg, 3)
    frozen.move_to(T0 + timedelta(minutes=30))
    with caplog.at_level(logging.DEBUG, logger="hexeract_lite.worker"):
        assert SchedulerWorker(store, Recorder()).run_once().dead_lettered == 1
    [error] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    text = error.getMessage()
    assert f"schedule {msg.schedule_id} occurrence {msg.occurrence_id()}" in text
    assert "missed" in text and "never dispatched" in text
    assert "beyond its misfire grace of 0:05:00" in text
    assert "attempt" not in text and "1/3" not in text
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "missed" in warning and "attempt" not in warning


def test_a_retry_is_not_a_misfire(store: ScheduleStore, frozen: FrozenTime) -> None:
    """The grace judges how late a firing is first found; a retry waits on purpose."""
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=timedelta(seconds=1))
    store.insert(msg, 3)
    calls: list[ScheduledMessage] = []

    def flaky(m: ScheduledMessage) -> None:
        calls.append(m)
        if len(calls) == 1:
            raise RuntimeError("down")

    worker = SchedulerWorker(store, flaky)
    assert worker.run_once().retried == 1
    frozen.move_to(T0 + timedelta(hours=1))
    assert worker.run_once().delivered == 1
    assert len(calls) == 2


def test_a_crashed_first_attempt_does_not_lift_the_grace(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """Claimed on time, its worker killed (no acknowledgement, no error recorded), the
    host down 2 h: the next claim is 2 h late, beyond the grace, and is not delivered."""
    grace = timedelta(minutes=10)
    once = ScheduledMessage.delay(Target.outbox(), T0, "once", {}, misfire_grace=grace)
    cron = ScheduledMessage.cron(Target.outbox(), "0 * * * *", T0, "cron", {}, misfire_grace=grace)
    store.insert(once, 3)
    store.insert(cron, 3)
    assert len(store.claim_due(T0, 10, timedelta(minutes=5))) == 2  # the crashed worker
    frozen.move_to(T0 + timedelta(hours=2))
    sink = Recorder()
    report = SchedulerWorker(store, sink).run_once()
    assert (report.claimed, report.dead_lettered, report.missed) == (2, 1, 1)
    assert sink.got == []
    s = snap(store, once)
    assert s.status is ScheduleStatus.DEAD_LETTERED
    assert s.last_error is not None and "beyond its misfire grace of 0:10:00" in s.last_error
    assert snap(store, cron).scheduled_for == T0 + timedelta(hours=3)


@pytest.mark.parametrize(
    ("grace", "needle"),
    [
        (
            timedelta(seconds=-1),
            "misfire_grace must not be negative, got -1 s",
        ),
        (
            timedelta(microseconds=1500),
            "whole number of milliseconds (stored instants have millisecond precision),"
            " got datetime.timedelta(microseconds=1500)",
        ),
        (5, "misfire_grace must be a timedelta or None, got 5"),
    ],
)
def test_a_bad_grace_is_refused_naming_it_and_nothing_is_written(
    store: ScheduleStore, grace: object, needle: str
) -> None:
    with pytest.raises(InvalidMessage) as info:
        ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=grace)  # type: ignore[arg-type]
    assert needle in str(info.value)
    built = ScheduledMessage.delay(Target.outbox(), T0, "e", {})
    with pytest.raises(InvalidMessage) as info:
        store.insert(attrs.evolve(built, misfire_grace=grace), 3)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert store.inspect(built.schedule_id) is None


# -- the schema step --------------------------------------------------------------------


def _sqlite_v3(path: Path) -> ScheduledMessage:
    """A file as version 3 left it (named schedules' columns): no misfire_grace_ms
    column, version 3 recorded."""
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {"n": 1})
    with SqliteScheduleStore.open(path) as store:
        store.insert(msg, 3)
    conn = apsw.Connection(str(path))
    conn.execute("ALTER TABLE scheduled_messages DROP COLUMN misfire_grace_ms")
    conn.execute(f"UPDATE {META_TABLE} SET version = 3")
    conn.close()
    return msg


def _sqlite_columns(path: Path) -> list[str]:
    conn = apsw.Connection(str(path))
    try:
        return [str(r[1]) for r in conn.execute("PRAGMA table_info(scheduled_messages)")]
    finally:
        conn.close()


def test_sqlite_version_3_is_read_as_is_read_only_and_upgraded_by_a_writer(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v3.db"
    msg = _sqlite_v3(path)
    assert "misfire_grace_ms" not in _sqlite_columns(path)
    before = path.read_bytes()
    with SqliteScheduleStore.open(path, readonly=True) as store:
        [listed] = store.list_pending()
        assert isinstance(listed, ScheduleSnapshot) and listed.misfire_grace is None
        assert snap(store, msg).misfire_grace is None
    assert path.read_bytes() == before
    with SqliteScheduleStore.open(path) as store:
        assert snap(store, msg).misfire_grace is None
        late = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=GRACE)
        store.insert(late, 3)
        assert snap(store, late).misfire_grace == GRACE
    assert _sqlite_columns(path)[-1] == "misfire_grace_ms"
    conn = apsw.Connection(str(path))
    assert list(conn.execute(f"SELECT version FROM {META_TABLE}")) == [(SCHEMA_VERSION,)]
    conn.close()


def test_postgres_version_3_is_refused_without_create_and_upgraded_with_it() -> None:
    import psycopg

    from hexeract_lite.store.postgres import PostgresScheduleStore
    from hexeract_lite.store.postgres.schema import META_TABLE as PG_META
    from hexeract_lite.store.postgres.schema import SCHEMA_VERSION as PG_VERSION

    url = pg.require_server()
    table = pg.unique_table()
    msg = ScheduledMessage.delay(Target.outbox(), T0, "e", {"n": 1})
    try:
        with PostgresScheduleStore.open(url, table=table) as store:
            store.insert(msg, 3)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{table}" DROP COLUMN misfire_grace_ms'.encode())
            conn.execute(
                f"UPDATE {PG_META} SET version = 3 WHERE table_name = %s".encode(), [table]
            )
        with pytest.raises(StoreError, match="misfire_grace_ms"):
            PostgresScheduleStore.open(url, table=table, create=False)
        with PostgresScheduleStore.open(url, table=table) as store:
            assert snap(store, msg).misfire_grace is None
            late = ScheduledMessage.delay(Target.outbox(), T0, "e", {}, misfire_grace=GRACE)
            store.insert(late, 3)
            assert snap(store, late).misfire_grace == GRACE
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                f"SELECT version FROM {PG_META} WHERE table_name = %s".encode(), [table]
            ).fetchone()
        assert row == (PG_VERSION,)
        with PostgresScheduleStore.open(url, table=table) as store:  # the step is idempotent
            assert snap(store, late).misfire_grace == GRACE
    finally:
        pg.drop_table(url, table)


# -- the CLI ------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_cli_sets_and_shows_the_grace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    db = str(tmp_path / "s.db")
    code, out, err = _cli(
        capsys, "scheduler", "add", "--conn", db, "--in", "1h", "--event-type", "e",
        "--misfire-grace", "10m",
    )  # fmt: skip
    assert code == 0, err
    sid = out.strip()
    code, out, _ = _cli(capsys, "scheduler", "inspect", sid, "--conn", db)
    assert any(line.split() == ["misfire", "grace", "10m"] for line in out.splitlines()), out
    code, out, _ = _cli(capsys, "scheduler", "inspect", sid, "--conn", db, "--format", "json")
    assert json.loads(out)["misfire_grace"] == "10m"
    for bad, needle in (
        ("-5m", "'-5m'"),
        ("0.0005s", "--misfire-grace: invalid duration '0.0005s': a schedule stores whole"),
    ):
        code, out, err = _cli(
            capsys, "scheduler", "add", "--conn", db, "--in", "1h", "--event-type", "e",
            f"--misfire-grace={bad}",
        )  # fmt: skip
        assert code == 2 and needle in err, err
    with SqliteScheduleStore.open(db) as store:
        assert len(store.list_pending()) == 1
