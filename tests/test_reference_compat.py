"""One file, two programs: tables hexeract (Rust) made work here, and rows written here
have the reference's layout (REFERENCE.md, "SQLite table layout")."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    ManualClock,
    OccurrenceId,
    ScheduledMessage,
    ScheduleSnapshot,
    ScheduleStatus,
    SqliteScheduleStore,
    Target,
)
from hexeract_lite.cli import main
from hexeract_lite.store.columns import COLUMNS
from hexeract_lite.store.sqlite import META_TABLE, SCHEMA_VERSION

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

# The reference's DDL, written out from REFERENCE.md (not from hexeract_lite's schema
# module, so that a drift between the two shows up here).
REFERENCE_DDL = """
CREATE TABLE IF NOT EXISTS scheduled_messages (
    schedule_id         BLOB    NOT NULL PRIMARY KEY,
    event_type          TEXT    NOT NULL,
    payload             TEXT    NOT NULL,
    trigger_kind        TEXT    NOT NULL,
    cron_expr           TEXT,
    scheduled_for       TEXT    NOT NULL,
    target_kind         TEXT    NOT NULL,
    target_routing_key  TEXT,
    attempts            INTEGER NOT NULL DEFAULT 0,
    max_attempts        INTEGER NOT NULL,
    leased_until        TEXT,
    paused              INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT,
    created_at          TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    delivered_at        TEXT,
    cancelled_at        TEXT,
    dead_lettered_at    TEXT
);
CREATE INDEX IF NOT EXISTS idx_scheduled_messages_pending
    ON scheduled_messages (scheduled_for)
    WHERE delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL
      AND paused = 0;
CREATE INDEX IF NOT EXISTS idx_scheduled_messages_dead_letter
    ON scheduled_messages (dead_lettered_at)
    WHERE dead_lettered_at IS NOT NULL;
"""

DUE = uuid.UUID("0190a5f0-0000-7000-8000-000000000001")
LATER_TODAY = uuid.UUID("0190a5f0-0000-7000-8000-000000000002")
DEAD = uuid.UUID("0190a5f0-0000-7000-8000-000000000003")
PAUSED = uuid.UUID("0190a5f0-0000-7000-8000-000000000004")
BACKOFF = uuid.UUID("0190a5f0-0000-7000-8000-000000000005")
DONE = uuid.UUID("0190a5f0-0000-7000-8000-000000000006")


def _insert(conn: apsw.Connection, sid: uuid.UUID, **columns: object) -> None:
    row: dict[str, object] = {
        "schedule_id": sid.bytes,
        "event_type": "reminder",
        "payload": '{"user":42}',
        "trigger_kind": "delay",
        "scheduled_for": "2026-03-01T11:00:00.000Z",
        "target_kind": "mediator",
        "max_attempts": 3,
    }
    row.update(columns)
    names = ", ".join(row)
    marks = ", ".join(f":{name}" for name in row)
    conn.execute(f"INSERT INTO scheduled_messages ({names}) VALUES ({marks})", row)


@pytest.fixture
def reference_db(tmp_path: Path) -> Path:
    """A file as hexeract leaves it: its DDL, rows in its formats, no hexeract_lite marks."""
    return make_reference_db(tmp_path)


def make_reference_db(folder: Path) -> Path:
    """``folder/hexeract.db`` as hexeract leaves it (see :func:`reference_db`)."""
    path = folder / "hexeract.db"
    conn = apsw.Connection(str(path))
    conn.execute(REFERENCE_DDL)
    _insert(conn, DUE)  # created_at from the reference's default
    _insert(  # SQLite's datetime('now') layout, later the same day: not due at noon
        conn,
        LATER_TODAY,
        trigger_kind="cron",
        cron_expr="*/5 * * * *",
        scheduled_for="2026-03-01 13:00:00",
        target_kind="bus",
        target_routing_key="billing.remind",
        created_at="2026-02-28 09:30:00",
    )
    _insert(
        conn,
        DEAD,
        attempts=3,
        last_error="RuntimeError: poison",
        dead_lettered_at="2026-03-01T10:00:00.000Z",
    )
    _insert(conn, PAUSED, paused=1, scheduled_for="2026-03-01T10:00:00.000Z")
    _insert(
        conn,
        BACKOFF,
        attempts=1,
        leased_until="2026-03-01T12:05:00.000Z",
        last_error="TimeoutError",
        scheduled_for="2026-03-01T09:00:00.000Z",
    )
    _insert(conn, DONE, attempts=1, delivered_at="2026-03-01T09:00:01.500Z")
    conn.close()
    return path


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def adopted(reference_db: Path, clock: ManualClock) -> Iterator[SqliteScheduleStore]:
    with SqliteScheduleStore.open(reference_db, clock=clock) as store:
        yield store


def _rows(path: Path, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [tuple(row) for row in conn.execute(sql, params)]
    finally:
        conn.close()


# -- a table the reference made ----------------------------------------------------


def test_opening_adopts_the_table_keeping_its_rows_and_indexes(
    reference_db: Path, clock: ManualClock
) -> None:
    reference_indexes = _rows(
        reference_db, "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL"
    )
    columns = _rows(reference_db, "PRAGMA table_info(scheduled_messages)")
    SqliteScheduleStore.open(reference_db, clock=clock).close()
    assert _rows(reference_db, "SELECT count(*) FROM scheduled_messages") == [(6,)]
    # the reference's columns as they were, then ours (versions 3, 4 and 8), nullable,
    # no default
    ours = [c for c in COLUMNS if not c.reference]
    assert _rows(reference_db, "PRAGMA table_info(scheduled_messages)") == [
        *columns,
        *((len(columns) + n, c.name, c.sqlite, 0, None, 0) for n, c in enumerate(ours)),
    ]
    assert [c.name for c in ours[:3]] == ["name", "next_after_lease", "misfire_grace_ms"]
    after = _rows(reference_db, "SELECT name, sql FROM sqlite_schema WHERE type = 'index'")
    assert set(reference_indexes) <= set(after), "the reference's indexes stay as they were"
    assert {str(name) for name, _ in after} >= {
        "idx_scheduled_messages_due",
        "idx_scheduled_messages_leased",
        "idx_scheduled_messages_exhausted",
        "idx_scheduled_messages_paused",
    }
    assert _rows(reference_db, f"SELECT table_name, version FROM {META_TABLE}") == [
        ("scheduled_messages", SCHEMA_VERSION)
    ]


def test_adoption_normalises_sqlite_datetime_text(adopted: SqliteScheduleStore) -> None:
    snap = adopted.inspect(LATER_TODAY)
    assert snap is not None
    assert snap.scheduled_for == datetime(2026, 3, 1, 13, 0, tzinfo=UTC)
    assert snap.created_at == datetime(2026, 2, 28, 9, 30, tzinfo=UTC)
    [(scheduled_for, created_at)] = _rows(
        adopted.path,
        "SELECT scheduled_for, created_at FROM scheduled_messages WHERE schedule_id = ?",
        (LATER_TODAY.bytes,),
    )
    assert (scheduled_for, created_at) == ("2026-03-01T13:00:00.000Z", "2026-02-28T09:30:00.000Z")


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-01 13:00:00",  # SQLite's datetime() form, which readers accept
        "2026-03-01 13:00:00.000",
        "2026-03-01T08:00:00-05:00",  # isoformat() of an aware local time
        "2026-03-01T18:00:00+05:00",
        "2026-03-01T13:00:00Z",
    ],
)
def test_instants_written_in_other_layouts_are_claimed_at_their_time(
    adopted: SqliteScheduleStore, clock: ManualClock, text: str
) -> None:
    """Another tool (the sqlite3 shell: ``datetime('now', '+1 hour')``, Python's
    ``isoformat()``) writes 13:00 UTC in another layout the store reads, after the file
    was adopted. Compared as raw text it would fire hours early (or late)."""
    msg = ScheduledMessage.delay(Target.outbox(), T0 + timedelta(hours=1), "later", {})
    leased = ScheduledMessage.delay(Target.outbox(), T0 - timedelta(hours=3), "backoff", {})
    adopted.insert_many([msg, leased], 3)
    conn = apsw.Connection(str(adopted.path))
    conn.execute(
        "UPDATE scheduled_messages SET scheduled_for = ? WHERE schedule_id = ?",
        (text, msg.schedule_id.bytes),
    )
    conn.execute(
        "UPDATE scheduled_messages SET leased_until = ?, attempts = 1 WHERE schedule_id = ?",
        ("2026-03-01 12:30:00", leased.schedule_id.bytes),
    )
    conn.close()
    assert adopted.next_wakeup() == datetime(2026, 3, 1, 11, tzinfo=UTC), "DUE, not 13:00"
    listed = [s.schedule_id for s in adopted.list_pending()]
    assert listed.index(msg.schedule_id) == len(listed) - 1, "13:00 sorts last"
    [occ] = adopted.claim_due(T0, 10, LEASE)
    assert occ.message.schedule_id == DUE
    assert adopted.mark_delivered(DUE, occ.leased_until)
    assert adopted.next_wakeup() == datetime(2026, 3, 1, 12, 5, tzinfo=UTC)  # BACKOFF
    clock.set(datetime(2026, 3, 1, 12, 30, tzinfo=UTC))
    hour = timedelta(hours=1)
    claimed = [c.message.schedule_id for c in adopted.claim_due(clock.now(), 10, hour)]
    assert claimed == [BACKOFF, leased.schedule_id], "the lease in datetime() form ended"
    clock.set(datetime(2026, 3, 1, 12, 59, 59, 999_000, tzinfo=UTC))
    assert adopted.claim_due(clock.now(), 10, LEASE) == []
    clock.set(datetime(2026, 3, 1, 13, tzinfo=UTC))
    [fixture_row, late] = adopted.claim_due(clock.now(), 10, LEASE)  # a tie at 13:00
    assert fixture_row.message.schedule_id == LATER_TODAY
    assert late.message.schedule_id == msg.schedule_id
    assert late.message.scheduled_for == T0 + timedelta(hours=1)
    assert late.occurrence_id() == msg.occurrence_id()
    [(stored,)] = _rows(
        adopted.path,
        "SELECT scheduled_for FROM scheduled_messages WHERE schedule_id = ?",
        (msg.schedule_id.bytes,),
    )
    assert stored == "2026-03-01T13:00:00.000Z", "rewritten canonically, the same instant"


def test_reference_rows_are_claimed_acked_and_listed(
    adopted: SqliteScheduleStore, clock: ManualClock
) -> None:
    pending = adopted.list_pending()
    assert [s.schedule_id for s in pending] == [BACKOFF, PAUSED, DUE, LATER_TODAY]
    assert [s.status for s in pending] == [
        ScheduleStatus.PENDING,
        ScheduleStatus.PAUSED,
        ScheduleStatus.PENDING,
        ScheduleStatus.PENDING,
    ]
    later = pending[3]
    assert isinstance(later, ScheduleSnapshot)
    assert later.trigger.label() == "cron:*/5 * * * *"
    assert later.target == Target.bus("billing.remind")
    dead = adopted.list_dead_letter()
    assert [s.schedule_id for s in dead] == [DEAD]
    assert isinstance(dead[0], ScheduleSnapshot)
    assert dead[0].last_error == "RuntimeError: poison"
    done = adopted.inspect(DONE)
    assert done is not None and done.status is ScheduleStatus.DELIVERED

    # at noon only DUE is due: 13:00 written as "2026-03-01 13:00:00" is not (the raw
    # text sorts before "2026-03-01T12:00:00.000Z"), BACKOFF waits, PAUSED is paused
    [occ] = adopted.claim_due(clock.now(), 10, LEASE)
    assert occ.message.schedule_id == DUE
    assert occ.message.payload == {"user": 42} and occ.message.event_type == "reminder"
    assert occ.attempts == 1 and occ.max_attempts == 3
    assert occ.occurrence_id() == OccurrenceId.derive(DUE, datetime(2026, 3, 1, 11, tzinfo=UTC))
    assert adopted.mark_delivered(DUE, occ.leased_until)
    assert adopted.next_wakeup() == datetime(2026, 3, 1, 12, 5, tzinfo=UTC)

    clock.set(datetime(2026, 3, 1, 12, 5, tzinfo=UTC))
    [retry] = adopted.claim_due(clock.now(), 10, LEASE)
    assert retry.message.schedule_id == BACKOFF and retry.attempts == 2
    assert adopted.mark_failed(BACKOFF, timedelta(minutes=1), "again", retry.leased_until)

    clock.set(datetime(2026, 3, 1, 13, 0, tzinfo=UTC))
    claimed = adopted.claim_due(clock.now(), 10, LEASE)
    assert [c.message.schedule_id for c in claimed] == [BACKOFF, LATER_TODAY]
    nxt = datetime(2026, 3, 1, 13, 5, tzinfo=UTC)
    assert adopted.reschedule(LATER_TODAY, nxt, claimed[1].leased_until)
    adopted.replay(DEAD)
    snap = adopted.inspect(DEAD)
    assert snap is not None and snap.status is ScheduleStatus.PENDING and snap.attempts == 0


def test_the_reference_can_read_what_the_store_wrote(
    adopted: SqliteScheduleStore, clock: ManualClock
) -> None:
    """The reference's own pending query, over its own index, sees our rows in order."""
    early = ScheduledMessage.delay(Target.outbox(), T0 - timedelta(hours=5), "a", [1])
    adopted.insert(early, 2)
    rows = _rows(
        adopted.path,
        "SELECT schedule_id FROM scheduled_messages INDEXED BY idx_scheduled_messages_pending"
        " WHERE delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"
        " AND paused = 0 AND scheduled_for <= ? ORDER BY scheduled_for",
        ("2026-03-01T12:00:00.000Z",),
    )
    assert [uuid.UUID(bytes=bytes(r[0])) for r in rows] == [
        early.schedule_id,
        BACKOFF,
        DUE,
    ]


# -- rows this store writes ---------------------------------------------------------


def test_written_rows_have_the_reference_layout_column_by_column(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "lite.db"
    delay = ScheduledMessage.delay(
        Target.mediator(), T0 + timedelta(milliseconds=7), "reminder", {"é": [1, None, 2.5]}
    )
    cron = ScheduledMessage.cron(Target.bus("a.b"), "*/2 * * * * *", T0, "tick", "x")
    with SqliteScheduleStore.open(path, clock=clock) as store:
        store.insert(delay, 3)
        store.insert_many([cron], 5)
        [occ] = store.claim_due(T0, 10, LEASE)
        clock.advance(timedelta(seconds=1))
        store.mark_failed(cron.schedule_id, timedelta(seconds=2), "boom", occ.leased_until)

    typed = _rows(
        path,
        "SELECT typeof(schedule_id), length(schedule_id), typeof(event_type),"
        " typeof(payload), typeof(trigger_kind), typeof(cron_expr), typeof(scheduled_for),"
        " typeof(target_kind), typeof(target_routing_key), typeof(attempts),"
        " typeof(max_attempts), typeof(leased_until), typeof(paused), typeof(last_error),"
        " typeof(created_at), typeof(delivered_at), typeof(cancelled_at),"
        " typeof(dead_lettered_at) FROM scheduled_messages WHERE schedule_id = ?",
        (delay.schedule_id.bytes,),
    )
    assert typed == [
        (
            *("blob", 16, "text", "text", "text", "null", "text", "text", "null"),
            *("integer", "integer", "null", "integer", "null", "text", "null", "null", "null"),
        )
    ]
    [row] = _rows(
        path, "SELECT * FROM scheduled_messages WHERE schedule_id = ?", (delay.schedule_id.bytes,)
    )
    assert row == (
        delay.schedule_id.bytes,
        "reminder",
        '{"é":[1,null,2.5]}',
        "delay",
        None,
        "2026-03-01T12:00:00.007Z",
        "mediator",
        None,
        0,
        3,
        None,
        0,
        None,
        "2026-03-01T12:00:00.000Z",
        None,
        None,
        None,
        None,  # name (ours)
        None,  # next_after_lease (ours)
        None,  # misfire_grace_ms (ours): no grace
        *(None,) * 11,  # the policy and long-handler columns (ours): none
    )
    assert json.loads(str(row[2])) == {"é": [1, None, 2.5]}

    [row] = _rows(
        path, "SELECT * FROM scheduled_messages WHERE schedule_id = ?", (cron.schedule_id.bytes,)
    )
    assert row == (
        cron.schedule_id.bytes,
        "tick",
        '"x"',
        "cron",
        "*/2 * * * * *",
        "2026-03-01T12:00:00.000Z",
        "bus",
        "a.b",
        1,
        5,
        "2026-03-01T12:00:03.000Z",
        0,
        "boom",
        "2026-03-01T12:00:00.000Z",
        None,
        None,
        None,
        None,
        None,
        None,
        *(None,) * 11,
    )
    for value in _rows(
        path,
        "SELECT scheduled_for, created_at, leased_until FROM scheduled_messages",
    ):
        for text in value:
            assert text is None or TS.fullmatch(str(text)), text


def test_a_fresh_table_matches_the_reference_ddl(tmp_path: Path) -> None:
    ours = tmp_path / "ours.db"
    SqliteScheduleStore.open(ours).close()
    theirs = tmp_path / "theirs.db"
    conn = apsw.Connection(str(theirs))
    conn.execute(REFERENCE_DDL)
    conn.close()
    for pragma in ("table_info", "index_list"):
        sql = f"PRAGMA {pragma}(scheduled_messages)"
        mine = _rows(ours, sql)
        reference = _rows(theirs, sql)
        if pragma == "table_info":  # ours adds nullable columns after the reference's
            extra = [c for c in COLUMNS if not c.reference]
            assert mine[len(reference) :] == [
                (len(reference) + n, c.name, c.sqlite, 0, None, 0) for n, c in enumerate(extra)
            ]
            mine = mine[: len(reference)]
        if pragma == "index_list":  # ours has more indexes; the reference's are among them
            mine = [r[1:] for r in mine if str(r[1]).endswith(("_pending", "_dead_letter", "_1"))]
            reference = [r[1:] for r in reference]
            assert sorted(mine) == sorted(reference)
        else:
            assert mine == reference
    for index in ("idx_scheduled_messages_pending", "idx_scheduled_messages_dead_letter"):
        assert _rows(ours, f"PRAGMA index_xinfo({index})") == _rows(
            theirs, f"PRAGMA index_xinfo({index})"
        )

        def where(path: Path, name: str = index) -> str:
            [(sql,)] = _rows(path, "SELECT sql FROM sqlite_schema WHERE name = ?", (name,))
            return " ".join(str(sql).split(" WHERE ", 1)[1].split())

        assert where(ours) == where(theirs)


def test_the_reference_default_still_fills_created_at(tmp_path: Path) -> None:
    """The reference inserts without created_at and relies on the column default, which
    the DDL keeps; hexeract_lite never relies on it (it binds created_at)."""
    path = tmp_path / "ours.db"
    SqliteScheduleStore.open(path).close()
    conn = apsw.Connection(str(path))
    _insert(conn, DUE)
    [(created,)] = conn.execute("SELECT created_at FROM scheduled_messages").fetchall()
    conn.close()
    assert TS.fullmatch(str(created))


def test_list_schedules_reads_a_reference_file_read_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """list_schedules and the listings of the CLI (``--status all``, ``--event-type``,
    ``--name``) read a reference table, which has no ``name`` column, read-only: each name
    is None and the file is unchanged."""
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
        # statuses whose partial index only an upgrade adds
        assert store.list_schedules(status="delivered") == []
        assert store.list_schedules(status="pending") == [rows[0]]
        assert store.list_schedules(name="*") == []
        assert store.list_schedules(after=DUE) == [rows[1]]
    for argv in (
        ["--status", "all"],
        ["--status", "paused"],
        ["--event-type", "rem*"],
        ["--name", "x*"],
    ):
        code = main(["scheduler", "list", *argv, "--conn", str(db)])
        assert code == 0, (argv, capsys.readouterr().err)
    assert db.read_bytes() == before
