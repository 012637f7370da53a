"""The SQLite schema over time: the DDL pinned to its version, files in older layouts
upgraded, foreign files left as they were, and read-only openings that never write."""

from __future__ import annotations

import hashlib
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from hexeract_lite import (
    ManualClock,
    ScheduledMessage,
    SchedulerWorker,
    StoreError,
    Target,
    name_id,
)
from hexeract_lite.cli import main
from hexeract_lite.runlog import RunOutcome
from hexeract_lite.snapshot import MalformedSchedule, ScheduleSnapshot
from hexeract_lite.store.columns import POLICY_COLUMNS
from hexeract_lite.store.schema import (
    LIVE,
    NONCANONICAL,
    sqlite_ddl,
    sqlite_extra_index_ddl,
    sqlite_reference_index_ddl,
    sqlite_unique_index_ddl,
)
from hexeract_lite.store.sqlite import META_TABLE, SCHEMA_VERSION, SqliteScheduleStore

from .test_reference_compat import (
    BACKOFF,
    DEAD,
    DUE,
    LATER_TODAY,
    PAUSED,
    REFERENCE_DDL,
    _insert,
    make_reference_db,
)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
TABLE = "scheduled_messages"
VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"

SQLITE_DDL_DIGESTS = {
    2: "7c0f31460d9ed190a1b832edef3fa722c798dcf2b1ba4ab34f9d55ee89db2285",
    3: "c93245041f0f7b3506d687f5ec69d5f912d66103536205e078a4f5962eae6899",  # name
    4: "890d2d57d60372ce42fae63653b32bfd7e8719bc5011b7d59fe9479d8997603b",  # misfire_grace_ms
    5: "dd1f6b0ebfa705791484d4a2e6b9e1bde21fea27216523a6f38e1713bbfc4939",  # retention indexes
    6: "25ab3bc6a7d1d530e1e3f5a333d9ec5a71013d857f4b1acb0d81bd9be8c4d632",  # cheap noncanon
    7: "c09a34faf4510cd42336495567d18bec11baac44955d220a1ed95cfa9dfd2c7c",  # the run log
    8: "9a0e9d5aa678585a8f66cd746eee496a4f65c2515551ca69b2ffc8a8b695674d",  # policy columns
    9: "08b8e52358ad10fe0352c9e9a6b2434a6fb9df00817bedf1b73216262e6cc2f7",  # integer run log
}
"""sha256 of ``sqlite_ddl()`` (the default table) at each schema version."""


def test_the_sqlite_ddl_is_pinned_to_the_schema_version() -> None:
    digest = hashlib.sha256(sqlite_ddl().encode()).hexdigest()
    assert SQLITE_DDL_DIGESTS.get(SCHEMA_VERSION) == digest, (
        "sqlite_ddl() changed without a new schema version. Bump SCHEMA_VERSION in"
        " hexeract_lite/store/sqlite/schema.py, add the upgrade step from the old layout"
        " to UPGRADES (and a test that opens a file in the old layout), then pin the new"
        f" digest here: {SCHEMA_VERSION + 1}: {digest!r}"
    )


def one_shot(at: datetime = T0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), at, "ev", {"n": 1})


def _names(path: Path, kind: str = "index") -> dict[str, str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {
            str(name): " ".join(str(sql).split())
            for name, sql in conn.execute(
                "SELECT name, sql FROM sqlite_schema WHERE type = ? AND sql IS NOT NULL", (kind,)
            )
        }
    finally:
        conn.close()


def _version(path: Path) -> int | None:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            f"SELECT version FROM {META_TABLE} WHERE table_name = ?", (TABLE,)
        ).fetchall()
    finally:
        conn.close()
    return int(str(rows[0][0])) if rows else None


# -- files in the layouts version 1 recorded ---------------------------------------------

_SPACED_GLOB = "'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]*'"


def _spaced(column: str) -> str:
    return (
        f"({column} GLOB {_SPACED_GLOB} AND strftime('%Y-%m-%dT%H:%M:%fZ', {column}) IS NOT NULL)"
    )


# The extra indexes as version-1 files hold them (git log -p -S idx_ -- store/schema.py):
# from 8d714ab until 6c3aaf1 renamed it, idx_<t>_spaced instead of _noncanonical; before
# ddbb5cf, idx_<t>_leased on leased_until alone and no such index at all.
OLD_V1_EXTRAS = {
    "spaced": [
        f"CREATE INDEX idx_{TABLE}_due ON {TABLE} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NULL;",
        f"CREATE INDEX idx_{TABLE}_leased ON {TABLE} (leased_until, scheduled_for)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NOT NULL;",
        f"CREATE INDEX idx_{TABLE}_exhausted ON {TABLE} (leased_until)\n"
        f"    WHERE {LIVE} AND paused = 0 AND attempts >= max_attempts;",
        f"CREATE INDEX idx_{TABLE}_paused ON {TABLE} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused <> 0;",
        f"CREATE INDEX idx_{TABLE}_spaced ON {TABLE} (schedule_id)\n"
        f"    WHERE {LIVE} AND ({_spaced('scheduled_for')} OR {_spaced('leased_until')});",
    ],
    "first": [
        f"CREATE INDEX idx_{TABLE}_due ON {TABLE} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NULL;",
        f"CREATE INDEX idx_{TABLE}_leased ON {TABLE} (leased_until)\n"
        f"    WHERE {LIVE} AND paused = 0 AND leased_until IS NOT NULL;",
        f"CREATE INDEX idx_{TABLE}_exhausted ON {TABLE} (leased_until)\n"
        f"    WHERE {LIVE} AND paused = 0 AND attempts >= max_attempts;",
        f"CREATE INDEX idx_{TABLE}_paused ON {TABLE} (scheduled_for, schedule_id)\n"
        f"    WHERE {LIVE} AND paused <> 0;",
    ],
}


def _old_v1_file(path: Path, layout: str, version: int = 1) -> list[uuid.UUID]:
    """A WAL file as a version-1 hexeract_lite left it (or, with ``version=2`` and the
    current extra indexes, a version-2 one; with layout ``"version 3"`` and
    ``version=3``, a version-3 one: named schedules' columns and index, no
    ``misfire_grace_ms``), with two due rows: the reference's table (versions 1 and 2
    had its columns only)."""
    conn = apsw.Connection(str(path))
    conn.pragma("journal_mode", "wal")
    conn.execute(REFERENCE_DDL)
    if layout == "version 3":
        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN name TEXT")
        conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN next_after_lease TEXT")
    if layout in ("version 2", "version 3"):
        extras = list(sqlite_extra_index_ddl(TABLE))
        if layout == "version 3":
            extras += sqlite_unique_index_ddl(TABLE)
    else:
        extras = OLD_V1_EXTRAS[layout]
    for ddl in (*sqlite_reference_index_ddl(TABLE), *extras):
        conn.execute(ddl)
    conn.execute(
        f"CREATE TABLE {META_TABLE} (table_name TEXT PRIMARY KEY NOT NULL,"
        " version INTEGER NOT NULL)"
    )
    conn.execute(f"INSERT INTO {META_TABLE} VALUES (?, ?)", (TABLE, version))
    ids = [uuid.UUID(int=n) for n in (1, 2)]
    for sid in ids:
        _insert(conn, sid, created_at="2026-03-01T10:00:00.000Z")
    conn.close()
    return ids


@pytest.mark.parametrize("layout", sorted(OLD_V1_EXTRAS))
def test_a_file_in_an_old_version_1_layout_is_upgraded_and_claims_work(
    tmp_path: Path, layout: str
) -> None:
    """A version-1 file in an older index layout (idx_<t>_spaced) is upgraded to this
    version's indexes, idx_<t>_noncanonical included, which every claim names with
    INDEXED BY: its claims work and the old index is gone."""
    db = tmp_path / "old.db"
    ids = _old_v1_file(db, layout)
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        claimed = store.claim_due(T0, 10, LEASE)
        assert sorted(c.message.schedule_id for c in claimed) == ids
        for occ in claimed:
            assert store.mark_delivered(occ.message.schedule_id, occ.leased_until)
        store.insert(one_shot(), 3)
        assert store.next_wakeup() == T0
        assert store.dead_letter_exhausted() == 0
    assert _version(db) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _names(db) == _names(fresh), "every index as a new file has it, the old one gone"
    assert f"idx_{TABLE}_spaced" not in _names(db)


def test_the_upgrade_rebuilds_an_index_only_when_its_definition_differs(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    _old_v1_file(db, "spaced")
    conn = apsw.Connection(str(db))
    [(due_root,)] = conn.execute(
        "SELECT rootpage FROM sqlite_schema WHERE name = ?", (f"idx_{TABLE}_due",)
    ).fetchall()
    conn.close()
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    [(after,)] = conn.execute(
        "SELECT rootpage FROM sqlite_schema WHERE name = ?", (f"idx_{TABLE}_due",)
    ).fetchall()
    conn.close()
    assert after == due_root, "an index already as defined is kept"


# -- a file version 5 wrote ----------------------------------------------------------------

V5_NONCANONICAL = (
    f"CREATE INDEX idx_{TABLE}_noncanonical ON {TABLE} (schedule_id)\n    WHERE {NONCANONICAL};"
)
"""idx_<t>_noncanonical as versions 2 to 5 defined it: strftime in its WHERE."""


def _v5_file(path: Path) -> list[uuid.UUID]:
    """A file as version 5 left it, with a due row, a row whose instant another tool
    wrote in SQLite's ``datetime()`` layout, and a leased row."""
    SqliteScheduleStore.open(path).close()
    conn = apsw.Connection(str(path))
    conn.execute(f"DROP INDEX idx_{TABLE}_noncanonical")
    conn.execute(V5_NONCANONICAL)
    conn.execute(f"UPDATE {META_TABLE} SET version = 5 WHERE table_name = ?", (TABLE,))
    ids = [uuid.UUID(int=n) for n in (1, 2, 3)]
    _insert(conn, ids[0], created_at="2026-03-01T10:00:00.000Z")
    _insert(
        conn,
        ids[1],
        scheduled_for="2026-03-01 10:30:00",
        created_at="2026-03-01T10:00:00.000Z",
    )
    _insert(
        conn,
        ids[2],
        leased_until="2026-03-01T11:59:00.000Z",
        attempts=1,
        created_at="2026-03-01T10:00:00.000Z",
    )
    conn.close()
    return ids


def test_a_version_5_file_is_upgraded_to_the_cheap_noncanonical_index(tmp_path: Path) -> None:
    db = tmp_path / "v5.db"
    ids = _v5_file(db)
    assert "strftime" in _names(db)[f"idx_{TABLE}_noncanonical"]
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        claimed = store.claim_due(T0, 10, LEASE)
        # the odd instant was rewritten (the same instant) before the claim compared it
        assert [c.message.schedule_id for c in claimed] == [ids[1], ids[0], ids[2]]
        assert claimed[0].message.scheduled_for == datetime(2026, 3, 1, 10, 30, tzinfo=UTC)
        for occ in claimed:
            assert store.mark_delivered(occ.message.schedule_id, occ.leased_until)
        assert store.dead_letter_exhausted() == 0
    assert _version(db) == SCHEMA_VERSION
    index = _names(db)[f"idx_{TABLE}_noncanonical"]
    assert "strftime" not in index and "NOT GLOB" in index
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _names(db) == _names(fresh), "every index as a new file has it"


def test_text_that_is_no_instant_never_makes_the_store_write(tmp_path: Path) -> None:
    """Such a row is in idx_<t>_noncanonical (its WHERE is a cheap superset) but not
    rewritable: the sweep's probe must not open a write transaction for it."""
    db = tmp_path / "odd.db"
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    _insert(conn, uuid.UUID(int=7), scheduled_for="soon", created_at="2026-03-01T10:00:00.000Z")
    assert conn.execute(
        f"SELECT count(*) FROM {TABLE} INDEXED BY idx_{TABLE}_noncanonical"
        f" WHERE {LIVE} AND scheduled_for NOT GLOB '????-??-??T??:??:??.???Z'"
    ).fetchall() == [(1,)]
    with SqliteScheduleStore.open(db, clock=ManualClock(T0)) as store:
        before = conn.execute("PRAGMA data_version").fetchall()
        for _ in range(3):
            assert store.dead_letter_exhausted() == 0
            store.list_pending()
        assert conn.execute("PRAGMA data_version").fetchall() == before, "nothing committed"
    conn.close()


# -- a file version 6 wrote ----------------------------------------------------------------


def _v6_file(path: Path) -> list[uuid.UUID]:
    """A file as version 6 left it (no run log), with two due rows."""
    SqliteScheduleStore.open(path).close()
    conn = apsw.Connection(str(path))
    conn.execute(f"DROP TABLE {TABLE}_runs")
    conn.execute(f"UPDATE {META_TABLE} SET version = 6 WHERE table_name = ?", (TABLE,))
    ids = [uuid.UUID(int=n) for n in (1, 2)]
    for sid in ids:
        _insert(conn, sid, created_at="2026-03-01T10:00:00.000Z")
    conn.close()
    return ids


def test_a_version_6_file_is_upgraded_to_the_run_log(tmp_path: Path) -> None:
    db = tmp_path / "v6.db"
    ids = _v6_file(db)
    assert f"{TABLE}_runs" not in _names(db, "table")
    with SqliteScheduleStore.open(db, readonly=True) as reader:
        assert not reader.keeps_runs and reader.runs() == [], "read-only: no run log yet"
    assert _version(db) == 6
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        assert store.keeps_runs
        worker = SchedulerWorker(store, lambda message: None, clock=clock)
        assert worker.run_once().delivered == 2
        runs = store.runs()
        assert sorted(r.schedule_id for r in runs) == ids
        assert {r.outcome for r in runs} == {RunOutcome.DELIVERED}
    assert _version(db) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _names(db) == _names(fresh), "every index as a new file has it"
    assert _names(db, "table") == _names(fresh, "table")


def test_a_table_another_tool_dropped_is_made_again_with_every_index(tmp_path: Path) -> None:
    db = tmp_path / "dropped.db"
    SqliteScheduleStore.open(db).close()
    conn = apsw.Connection(str(db))
    conn.execute(f"DROP TABLE {TABLE}")  # its indexes go with it; its meta row stays
    conn.close()
    assert _version(db) == SCHEMA_VERSION
    with SqliteScheduleStore.open(db) as store:
        store.insert(ScheduledMessage.delay(Target.outbox(), T0, "ev", {}), max_attempts=3)
        assert len(store.list_pending()) == 1
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _names(db) == _names(fresh), "every index as a new file has it"


def _v7_file(path: Path) -> list[uuid.UUID]:
    """A file as version 7 left it (none of the policy columns), with two due rows."""
    SqliteScheduleStore.open(path).close()
    conn = apsw.Connection(str(path))
    for column in POLICY_COLUMNS:
        conn.execute(f"ALTER TABLE {TABLE} DROP COLUMN {column}")
    conn.execute(f"UPDATE {META_TABLE} SET version = 7 WHERE table_name = ?", (TABLE,))
    ids = [uuid.UUID(int=n) for n in (1, 2)]
    for sid in ids:
        _insert(conn, sid, created_at="2026-03-01T10:00:00.000Z")
    conn.close()
    return ids


def _columns(path: Path) -> list[tuple[str, str]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [(str(r[1]), str(r[2])) for r in conn.execute(f"PRAGMA table_info({TABLE})")]
    finally:
        conn.close()


def test_a_version_7_file_is_upgraded_to_the_policy_columns(tmp_path: Path) -> None:
    """7 → 8: the rows stay, the nullable policy and long-handler columns are added; a
    read-only open of the version-7 file reads it without them and leaves it as it was."""
    db = tmp_path / "v7.db"
    ids = _v7_file(db)
    before = _columns(db)
    assert not {name for name, _ in before} & set(POLICY_COLUMNS)
    with SqliteScheduleStore.open(db, readonly=True) as reader:
        records = reader.export_records(None, 10)
        assert [r.schedule_id for r in records] == ids
        assert all(r.end_at is None and r.snoozes is None for r in records)
    assert _version(db) == 7 and _columns(db) == before, "read-only: nothing written"
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        worker = SchedulerWorker(store, lambda message: None, clock=clock)
        assert worker.run_once().delivered == 2
    assert _version(db) == SCHEMA_VERSION
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _columns(db) == _columns(fresh), "every column, in a new file's order and types"
    assert _names(db) == _names(fresh)


# The run log as versions 7 and 8 wrote it: instants as text.
V8_RUNS_DDL = [
    f"CREATE TABLE {TABLE}_runs (run_id INTEGER PRIMARY KEY, schedule_id BLOB NOT NULL,"
    " scheduled_for TEXT NOT NULL, attempt INTEGER NOT NULL, started TEXT, finished TEXT NOT NULL,"
    " outcome TEXT NOT NULL, lag_ms INTEGER NOT NULL, duration_ms REAL, host TEXT NOT NULL,"
    " pid INTEGER NOT NULL, error TEXT)",
    f"CREATE INDEX idx_{TABLE}_runs_finished ON {TABLE}_runs (finished)",
    f"CREATE INDEX idx_{TABLE}_runs_schedule ON {TABLE}_runs (schedule_id, finished)",
]
V8_RUNS = [  # schedule, scheduled_for, attempt, started, finished, outcome, lag, took, error
    (2, "2026-03-01T09:59:59.999Z", 1, None, "2026-03-01T10:30:00.001Z", "skipped", 1800002,
     None, None),
    (1, "2026-03-01T11:00:00.000Z", 1, "2026-03-01T11:00:00.250Z", "2026-03-01T11:00:01.500Z",
     "failed", 250, 1250.0, "boom"),
    (1, "2026-03-01T11:00:00.000Z", 2, "2026-03-01T11:00:02.000Z", "2026-03-01T11:00:02.007Z",
     "delivered", 2000, 7.0, None),
]  # fmt: skip


def _v8_file(path: Path) -> None:
    """A file as version 8 left it: its run log's instants as text, with three runs."""
    SqliteScheduleStore.open(path).close()
    conn = apsw.Connection(str(path))
    conn.execute(f"DROP TABLE {TABLE}_runs")
    for ddl in V8_RUNS_DDL:
        conn.execute(ddl)
    for sid, due, attempt, started, finished, outcome, lag, took, error in V8_RUNS:
        conn.execute(
            f"INSERT INTO {TABLE}_runs (schedule_id, scheduled_for, attempt, started, finished,"
            " outcome, lag_ms, duration_ms, host, pid, error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'h', 7, ?)",
            (uuid.UUID(int=sid).bytes, due, attempt, started, finished, outcome, lag, took, error),
        )
    conn.execute(f"UPDATE {META_TABLE} SET version = 8 WHERE table_name = ?", (TABLE,))
    conn.close()


def test_a_version_8_run_log_is_rewritten_with_integer_instants(tmp_path: Path) -> None:
    """8 → 9: every run keeps its instants, lag, duration, id and order; read-only, the
    version-8 file is read as it is and left alone."""
    db = tmp_path / "v8.db"
    _v8_file(db)
    newest_first = [
        (
            uuid.UUID(int=sid),
            datetime.fromisoformat(due),
            attempt,
            None if started is None else datetime.fromisoformat(started),
            datetime.fromisoformat(finished),
            RunOutcome(outcome),
            timedelta(milliseconds=lag),
            None if took is None else timedelta(milliseconds=took),
            error,
        )
        for sid, due, attempt, started, finished, outcome, lag, took, error in reversed(V8_RUNS)
    ]

    def figures(store: SqliteScheduleStore) -> list[tuple[object, ...]]:
        return [
            (r.schedule_id, r.scheduled_for, r.attempt, r.started, r.finished, r.outcome,
             r.lag, r.duration, r.error)
            for r in store.runs()
        ]  # fmt: skip

    hour = datetime(2026, 3, 1, 11, tzinfo=UTC)
    hours = [(hour, RunOutcome.DELIVERED, 1), (hour, RunOutcome.FAILED, 1)]
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, readonly=True, clock=ManualClock(T0)) as reader:
        assert figures(reader) == newest_first
        assert reader.run_counts(hour, hour + timedelta(hours=1)) == hours
        assert reader.prune_runs(timedelta(hours=1), dry_run=True) == 1
    assert db.read_bytes() == before and _version(db) == 8, "read-only: nothing written"
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(db, clock=clock) as store:
        assert figures(store) == newest_first
        assert store.run_counts(hour, hour + timedelta(hours=1)) == hours
        assert store.prune_runs(timedelta(hours=1), dry_run=True) == 1
        store.insert(one_shot(T0 - timedelta(seconds=1)), 3)
        assert SchedulerWorker(store, lambda message: None, clock=clock).run_once().delivered == 1
        assert figures(store)[1:] == newest_first, "the new run first"
    assert _version(db) == SCHEMA_VERSION
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    types = conn.execute(
        f"SELECT DISTINCT typeof(scheduled_for), typeof(finished) FROM {TABLE}_runs"
    ).fetchall()
    conn.close()
    assert types == [("integer", "integer")]
    fresh = tmp_path / "fresh.db"
    SqliteScheduleStore.open(fresh).close()
    assert _names(db) == _names(fresh) and _names(db, "table") == _names(fresh, "table")


def _reference_statements() -> dict[str, str]:
    lines = (VECTORS / "reference_sqlite_statements.tsv").read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if line.strip())


@pytest.mark.skipif(
    not (VECTORS / "reference_sqlite_statements.tsv").exists(), reason="no shared vectors"
)
@pytest.mark.parametrize(
    "start",
    [
        "reference",
        "old version 1",
        "version 2",
        "version 3",
        "version 5",
        "version 6",
        "version 7",
        "version 8",
    ],
)
def test_the_references_own_statements_work_on_an_upgraded_table(
    tmp_path: Path, start: str
) -> None:
    """REFERENCE.md: a table stays readable and writable by the reference's own 16
    statements after an upgrade. (They read SQLite's clock, so this test runs on the
    real one.)"""
    db = tmp_path / "shared.db"
    if start == "reference":
        conn = apsw.Connection(str(db))
        conn.execute(REFERENCE_DDL)
        conn.close()
    elif start == "version 2":
        _old_v1_file(db, "version 2", version=2)
    elif start == "version 3":
        _old_v1_file(db, "version 3", version=3)
    elif start in ("version 5", "version 6", "version 7", "version 8"):
        makers = {"version 5": _v5_file, "version 6": _v6_file, "version 7": _v7_file}
        makers.get(start, _v8_file)(db)
        conn = apsw.Connection(str(db))
        conn.execute(f"DELETE FROM {TABLE}")
        if start == "version 8":
            conn.execute(f"DELETE FROM {TABLE}_runs")
        conn.close()
    else:
        _old_v1_file(db, "spaced")
    SqliteScheduleStore.open(db).close()
    assert _version(db) == SCHEMA_VERSION
    sql = _reference_statements()
    assert len(sql) == 16
    conn = apsw.Connection(str(db))
    past = "2000-01-01T00:00:00.000Z"

    def run(name: str, *params: Any) -> list[Any]:
        return conn.execute(sql[name], params).fetchall()

    a, b = uuid.uuid4().bytes, uuid.uuid4().bytes
    for sid in (a, b):
        run("insert", sid, "ev", "{}", "delay", None, past, "outbox", None, 3)
    assert run("exists", a) == [(1,)]
    claimed = run("claim", "+30 seconds", 10)
    leases = {bytes(row[0]): row[10] for row in claimed}
    assert set(leases) >= {a, b}
    run("mark_failed", "+0 seconds", "boom", a, leases[a])
    assert conn.changes() == 1
    run("mark_dead_lettered", "poison", b, leases[b])
    assert conn.changes() == 1
    [lease_a] = [row[10] for row in run("claim", "+30 seconds", 10) if bytes(row[0]) == a]
    run("reschedule", "2999-01-01T00:00:00.000Z", a, lease_a)
    assert conn.changes() == 1
    run("set_paused", 1, a)
    run("resume_with_next", past, a)
    run("set_paused", 1, a)
    run("resume_only", a)
    [lease_a] = [row[10] for row in run("claim", "+30 seconds", 10) if bytes(row[0]) == a]
    run("mark_delivered", a, lease_a)
    assert conn.changes() == 1
    run("dead_letter_exhausted", "swept")
    assert [bytes(row[0]) for row in run("list_dead_letter", 10)] == [b]
    run("replay", b)
    assert conn.changes() == 1
    assert bytes(run("inspect", b)[0][0]) == b
    assert b in [bytes(row[0]) for row in run("list_pending", 10)]
    run("cancel", b)
    assert conn.changes() == 1
    conn.close()
    with SqliteScheduleStore.open(db) as store:  # and the store still reads it all
        assert store.inspect(uuid.UUID(bytes=a)) is not None
        listed = {s.schedule_id.bytes for s in store.list_pending() if s.schedule_id}
        assert not listed & {a, b}, "delivered and cancelled"
        assert store.runs() == [], "the reference's statements never touch the run log"
        # and a worker of ours on the same file records runs beside them
        c = uuid.uuid4()
        store.insert(ScheduledMessage.delay(Target.outbox(), T0, "ev", {}, schedule_id=c), 3)
        assert SchedulerWorker(store, lambda message: None).run_once().delivered == 1
        assert [r.schedule_id for r in store.runs()] == [c]


def test_a_version_2_file_is_upgraded_to_named_schedules(tmp_path: Path) -> None:
    """2 → 3: the rows stay, ``name`` and ``next_after_lease`` are added
    (nullable) with the unique index on names; a read-only open of the version-2 file
    reads it without them and leaves it as it was."""
    db = tmp_path / "v3.db"
    ids = _old_v1_file(db, "version 2", version=2)
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, readonly=True) as store:
        assert {s.schedule_id for s in store.list_pending()} == set(ids)
        snap = store.inspect(ids[0])
        assert snap is not None and snap.name is None
    assert db.read_bytes() == before, "a read-only open changed the file"
    with SqliteScheduleStore.open(db) as store:
        assert {s.schedule_id for s in store.list_pending()} == set(ids), "the rows stay"
        msg = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", event_type="b", name="a.b")
        assert store.ensure(msg, 3).value == "created"
        assert [s.name for s in store.list_named("a.")] == ["a.b"]
    assert _version(db) == SCHEMA_VERSION >= 4
    assert f"idx_{TABLE}_name" in _names(db)
    with SqliteScheduleStore.open(db) as store:  # and 3 -> 4 ran too: the grace is kept
        late = ScheduledMessage.delay(
            Target.outbox(), T0, "e", {}, misfire_grace=timedelta(minutes=10)
        )
        store.insert(late, 3)
        snap = store.inspect(late.schedule_id)
        assert snap is not None and snap.misfire_grace == timedelta(minutes=10)
    conn = apsw.Connection(str(db))
    try:
        with pytest.raises(apsw.ConstraintError):
            conn.execute(f"UPDATE {TABLE} SET name = 'a.b' WHERE schedule_id = ?", (ids[0].bytes,))
    finally:
        conn.close()


def test_a_version_3_file_is_upgraded_to_the_misfire_grace(tmp_path: Path) -> None:
    """3 → 4: a file at version 3 (named schedules, no ``misfire_grace_ms``)
    keeps its rows, names and index and gains the column; a read-only open reads it
    with no grace and leaves it as it was."""
    db = tmp_path / "v3.db"
    ids = _old_v1_file(db, "version 3", version=3)
    conn = apsw.Connection(str(db))
    conn.execute(f"UPDATE {TABLE} SET name = 'a.one' WHERE schedule_id = ?", (ids[0].bytes,))
    conn.close()
    before = db.read_bytes()
    with SqliteScheduleStore.open(db, readonly=True) as store:
        snap = store.inspect(ids[0])
        assert snap is not None and snap.name == "a.one" and snap.misfire_grace is None
    assert db.read_bytes() == before, "a read-only open changed the file"
    with SqliteScheduleStore.open(db) as store:
        assert {s.schedule_id for s in store.list_pending()} == set(ids), "the rows stay"
        assert [s.name for s in store.list_named("a.")] == ["a.one"]
        grace = timedelta(minutes=5)
        msg = ScheduledMessage.cron(
            Target.mediator(), "0 3 * * *", event_type="b", name="a.b", misfire_grace=grace
        )
        assert store.ensure(msg, 3).value == "created"
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.misfire_grace == grace
    assert _version(db) == SCHEMA_VERSION >= 4
    conn = apsw.Connection(str(db))
    try:
        columns = [str(row[1]) for row in conn.execute(f"PRAGMA table_info({TABLE})")]
        ours = ["name", "next_after_lease", "misfire_grace_ms", *POLICY_COLUMNS]
        assert columns[-len(ours) :] == ours
    finally:
        conn.close()


# -- a foreign file is refused as it was ------------------------------------------------


def _fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes, its mtime and the names of the files beside it."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


def test_a_foreign_table_is_refused_before_the_file_changes(tmp_path: Path) -> None:
    """A table that is not a scheduler's is refused before the file is touched: not
    switched to WAL first (header bytes 18-19 unchanged, no -wal or -shm beside it)."""
    folder = tmp_path / "foreign"
    folder.mkdir()
    db = folder / "app.db"
    conn = apsw.Connection(str(db))
    conn.execute(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute(f"INSERT INTO {TABLE} (body) VALUES ('theirs')")
    conn.close()
    before = _fingerprint(db)
    with pytest.raises(StoreError, match="not a scheduler table"):
        SqliteScheduleStore.open(db)
    assert _fingerprint(db) == before
    with pytest.raises(StoreError, match="not a scheduler table"):
        SqliteScheduleStore.open(db, readonly=True)
    assert _fingerprint(db) == before


def test_a_table_too_new_is_refused_before_the_file_changes(tmp_path: Path) -> None:
    folder = tmp_path / "new"
    folder.mkdir()
    db = folder / "s.db"
    conn = apsw.Connection(str(db))  # a rollback-journal file, as another tool made it
    conn.execute(REFERENCE_DDL)
    conn.execute(
        f"CREATE TABLE {META_TABLE} (table_name TEXT PRIMARY KEY NOT NULL,"
        " version INTEGER NOT NULL)"
    )
    conn.execute(f"INSERT INTO {META_TABLE} VALUES (?, ?)", (TABLE, SCHEMA_VERSION + 1))
    conn.close()
    before = _fingerprint(db)
    for readonly in (False, True):
        with pytest.raises(StoreError, match="newer"):
            SqliteScheduleStore.open(db, readonly=readonly)
        assert _fingerprint(db) == before


# -- read-only openings ---------------------------------------------------------------------


@pytest.fixture
def reference_file(tmp_path: Path) -> Path:
    """A file as hexeract (Rust) leaves it, alone in its folder (see test_reference_compat)."""
    folder = tmp_path / "ref"
    folder.mkdir()
    return make_reference_db(folder)


def test_a_read_only_open_of_a_reference_table_reads_it_and_leaves_it_byte_identical(
    reference_file: Path,
) -> None:
    before = _fingerprint(reference_file)
    clock = ManualClock(T0)
    with SqliteScheduleStore.open(reference_file, readonly=True, clock=clock) as store:
        assert store.readonly
        pending = store.list_pending()
        # ordered by instant, though LATER_TODAY's text is SQLite's datetime() form
        # (which only a writer may rewrite canonically)
        assert [s.schedule_id for s in pending] == [BACKOFF, PAUSED, DUE, LATER_TODAY]
        assert all(isinstance(s, ScheduleSnapshot) for s in pending)
        assert [s.schedule_id for s in store.list_dead_letter()] == [DEAD]
        snap = store.inspect(LATER_TODAY)
        assert snap is not None and snap.scheduled_for == datetime(2026, 3, 1, 13, tzinfo=UTC)
        assert store.next_wakeup() == datetime(2026, 3, 1, 11, tzinfo=UTC)
        assert len(store.export_records(None, 100)) == 6
        store.data_version()
    assert _fingerprint(reference_file) == before


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.insert(one_shot(), 3),
        lambda s: s.insert_many([one_shot()], 3),
        lambda s: s.claim_due(T0, 10, LEASE),
        lambda s: s.dead_letter_exhausted(),
        lambda s: s.cancel(DUE),
        lambda s: s.set_paused(DUE, True),
        lambda s: s.resume(PAUSED),
        lambda s: s.replay(DEAD),
        lambda s: s.mark_delivered(DUE, T0),
        lambda s: s.import_records([]) or s.import_records(s.export_records(None, 1)),
    ],
    ids=[
        "insert",
        "insert_many",
        "claim_due",
        "sweep",
        "cancel",
        "set_paused",
        "resume",
        "replay",
        "ack",
        "import",
    ],
)
def test_a_read_only_store_refuses_every_write_naming_it(reference_file: Path, call: Any) -> None:
    before = _fingerprint(reference_file)
    with (
        SqliteScheduleStore.open(reference_file, readonly=True) as store,
        pytest.raises(StoreError, match="read-only") as info,
    ):
        call(store)
    assert str(reference_file) in str(info.value)
    assert _fingerprint(reference_file) == before


def test_a_read_only_open_never_creates_nor_adopts(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(StoreError, match="no database"):
        SqliteScheduleStore.open(missing, readonly=True)
    assert not missing.exists()
    folder = tmp_path / "other"
    folder.mkdir()
    other = folder / "app.db"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    before = _fingerprint(other)
    with pytest.raises(StoreError, match=f"no table {TABLE}"):
        SqliteScheduleStore.open(other, readonly=True)
    assert _fingerprint(other) == before


_WRITER = """
import sys
from datetime import UTC, datetime, timedelta
from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.store.sqlite import SqliteScheduleStore
store = SqliteScheduleStore.open(sys.argv[1])
for _ in sys.stdin:  # one insert per line, the file held open meanwhile
    at = datetime.now(UTC) + timedelta(hours=1)
    store.insert(ScheduledMessage.delay(Target.outbox(), at, "e", {}), 3)
    print("ok", flush=True)
"""


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_reading_a_file_another_process_writes_leaves_its_wal_and_shm_as_they_were(
    tmp_path: Path, driver: str
) -> None:
    """A read-only store reads the latest commits of a process that holds the file
    open, and leaves the database, its -wal and its -shm byte for byte as they were;
    so it does once that process was killed and left them behind."""
    import signal
    import subprocess
    import sys

    db = tmp_path / "shared.db"
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        for n in (1, 2):
            writer.stdin.write("insert\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "ok\n"
            before = _folder_bytes(tmp_path)
            assert {"shared.db-wal", "shared.db-shm"} <= set(before)
            with SqliteScheduleStore.open(db, readonly=True, driver=driver) as store:
                assert len(store.list_pending()) == n, "the writer's last commit is read"
                assert store.stats().pending == n
            assert _folder_bytes(tmp_path) == before
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdin.close()
        writer.stdout.close()
    before = _folder_bytes(tmp_path)  # what the killed writer left
    with SqliteScheduleStore.open(db, readonly=True, driver=driver) as store:
        assert len(store.list_pending()) == 2
    assert _folder_bytes(tmp_path) == before


def _folder_bytes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def test_a_read_only_open_of_an_old_version_reads_without_upgrading(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    db = folder / "old.db"
    ids = _old_v1_file(db, "spaced")
    indexes = _names(db)
    with SqliteScheduleStore.open(db, readonly=True) as store:
        assert [s.schedule_id for s in store.list_pending()] == ids
        assert store.next_wakeup() == datetime(2026, 3, 1, 11, tzinfo=UTC)
        assert store.list_dead_letter() == []
    assert _version(db) == 1 and _names(db) == indexes


def test_a_read_only_open_of_a_current_file_with_odd_instants_orders_them(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    later = one_shot(T0 + timedelta(hours=1))
    with SqliteScheduleStore.open(db) as store:
        store.insert_many([later, one_shot(T0 - timedelta(hours=1))], 3)
    conn = apsw.Connection(str(db))  # another tool writes 13:00 UTC in another layout
    conn.execute(
        f"UPDATE {TABLE} SET scheduled_for = '2026-03-01T08:00:00-05:00' WHERE schedule_id = ?",
        (later.schedule_id.bytes,),
    )
    conn.close()
    with SqliteScheduleStore.open(db, readonly=True) as store:
        listed = store.list_pending()
        assert listed[-1].schedule_id == later.schedule_id, "13:00 sorts last"
        assert store.next_wakeup() == T0 - timedelta(hours=1)
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    [(text,)] = conn.execute(
        f"SELECT scheduled_for FROM {TABLE} WHERE schedule_id = ?", (later.schedule_id.bytes,)
    ).fetchall()
    conn.close()
    assert text == "2026-03-01T08:00:00-05:00", "a read-only store rewrites nothing"


def test_a_read_only_listing_marks_a_malformed_row(reference_file: Path) -> None:
    conn = apsw.Connection(str(reference_file))
    conn.execute(
        f"UPDATE {TABLE} SET scheduled_for = '2099-02-30T00:00:00.000Z' WHERE schedule_id = ?",
        (PAUSED.bytes,),
    )
    conn.close()
    with SqliteScheduleStore.open(reference_file, readonly=True) as store:
        listed = store.list_pending()
    marked = [s for s in listed if isinstance(s, MalformedSchedule)]
    assert [m.schedule_id for m in marked] == [PAUSED] and "scheduled_for" in marked[0].reason
    assert len(listed) == 4


@pytest.mark.skipif(os.name != "posix" or not hasattr(os, "fork"), reason="POSIX permissions")
def test_a_file_the_user_may_only_read_opens_read_only(tmp_path: Path) -> None:
    """As another user (root drops to nobody), a 0444 file in a 0555 folder: a read-only
    open lists it; nothing beside it is created."""
    import shutil
    import tempfile

    from .test_sqlite_store import _as_another_user

    folder = Path(tempfile.mkdtemp(prefix="hexeract-ro-"))
    try:
        db = folder / "s.db"
        msg = one_shot()
        with SqliteScheduleStore.open(db) as store:  # a WAL file, -wal and -shm gone
            store.insert(msg, 3)
        db.chmod(0o444)
        folder.chmod(0o555)
        before = _fingerprint(db)

        def action() -> None:
            with SqliteScheduleStore.open(db, readonly=True) as store:
                [snap] = store.list_pending()
                assert snap.schedule_id == msg.schedule_id

        assert _as_another_user(action) == "ok"
        assert _fingerprint(db) == before
    finally:
        folder.chmod(0o700)
        shutil.rmtree(folder)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


UNKNOWN = "01a22fd1-6d1d-7acb-a025-718301d4b44b"


PENDING = str(uuid.UUID(int=1))


REFUSED = [
    (["pause", UNKNOWN], 1),
    (["resume", UNKNOWN], 1),
    (["cancel", UNKNOWN], 1),
    (["pause", "--name", "nope.x"], 1),
    (["pause", "--group", "nope"], 1),  # no live schedule in the group
    (["resume", "--group", "nope"], 1),
    (["pause", "--group", "nope", "--note", "x"], 1),
    (["pause", "--group", "nope", "--note", " "], 2),  # a blank note
    (["reschedule", UNKNOWN, "--in", "5m"], 1),
    (["update", UNKNOWN, "--payload", "{}"], 1),
    (["update", PENDING, "--cron", "@daily"], 1),  # a delay schedule has no rule
    (["update", PENDING, "--cron", "bad"], 2),
    (["run-now", "--name", "nope.x"], 1),
    (["dead-letter", "replay", PENDING], 1),  # pending: not replayable
    (["add", "--in", "1m", "--event-type", "t.x", "--schedule-id", PENDING], 1),
    (["ensure", "--name", "a.b", "--at", "2030-01-01T00:00:00Z", "--event-type", "t.x"], None),
]


def _older_file(path: Path, version: str) -> None:
    if version == "5":
        _v5_file(path)
    else:
        _old_v1_file(path, "version 3" if version == "3" else "spaced", version=int(version))


@pytest.mark.parametrize("version", ["1", "3", "5"])
@pytest.mark.parametrize(("argv", "code"), REFUSED)
def test_a_refused_command_leaves_an_older_file_byte_identical(
    tmp_path: Path,
    version: str,
    argv: list[str],
    code: int | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A command refused with exit 1 (no such schedule, not changeable, not replayable, a
    duplicate) or 2 (a bad rule found after opening) leaves a file of an older version
    byte-identical: its table is not upgraded."""
    db = tmp_path / "old.db"
    _older_file(db, version)
    if code is None:  # ensure at= of a name stored as a cron schedule: not changeable
        code = 1
        from tests.test_reference_compat import _insert

        conn = apsw.Connection(str(db))
        columns = {"trigger_kind": "cron", "cron_expr": "@daily"}
        if version != "1":  # the name column came with version 3
            columns["name"] = "a.b"
        _insert(conn, name_id("a.b"), created_at="2026-03-01T10:00:00.000Z", **columns)
        conn.close()
    before = {p.name: _sha(p) for p in tmp_path.iterdir()}
    assert main(["scheduler", *argv, "--conn", str(db)]) == code, capsys.readouterr().err
    assert {p.name: _sha(p) for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("version", ["1", "3", "5"])
@pytest.mark.parametrize(
    "argv",
    [
        ["update", "--payload", "{}"],
        ["reschedule", "--in", "5m"],
        ["backfill", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02T00:00:00Z"],
    ],
)
def test_a_change_refused_for_a_malformed_row_leaves_an_older_file_byte_identical(
    tmp_path: Path, version: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The in-memory rehearsal cannot copy a row whose rule does not decode: the command
    refuses it from the file read read-only, before the table would be upgraded."""
    from tests.test_reference_compat import _insert

    db = tmp_path / "old.db"
    _older_file(db, version)
    conn = apsw.Connection(str(db))
    sid = uuid.UUID(int=77)
    _insert(
        conn,
        sid,
        created_at="2026-03-01T10:00:00.000Z",
        cron_expr="bogus cron",
        trigger_kind="cron",
    )
    conn.close()
    before = {p.name: _sha(p) for p in tmp_path.iterdir()}
    assert main(["scheduler", *argv, str(sid), "--conn", str(db)]) == 1
    assert (
        "is malformed: cron_expr: invalid cron expression 'bogus cron'" in capsys.readouterr().err
    )
    assert {p.name: _sha(p) for p in tmp_path.iterdir()} == before
