"""The PostgreSQL schema: its version, the upgrade ladder, and tables the reference made.

A table the reference created (its columns and two indexes, no version recorded) is
adopted: it gets hexeract_lite's indexes and a version row, keeps its rows, and the
reference's own statements (written here in PostgreSQL's dialect from the SQLite
statements in ``shared/vectors/reference_sqlite_statements.tsv``: the claim is a
``FOR UPDATE SKIP LOCKED`` selection wrapped in an ``UPDATE ... RETURNING``) still
work on it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import ScheduledMessage, SchedulerWorker, ScheduleStatus, StoreError, Target
from hexeract_lite.runlog import RunOutcome
from hexeract_lite.store.columns import POLICY_COLUMNS
from hexeract_lite.store.postgres.schema import (
    INDEXES,
    META_TABLE,
    SCHEMA_VERSION,
    UNIQUE_INDEXES,
    postgres_ddl,
    postgres_index_name,
    reference_ddl,
    runs_table_name,
)

from . import pg

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

from hexeract_lite.store.postgres import PostgresScheduleStore  # noqa: E402

# -- the DDL is versioned -----------------------------------------------------------

PINNED_DDL_DIGESTS = {
    1: "b2f8200648bec92aafd00100b2fa8183fdc19d965787401ad128c7c7f31f9a3a",
    2: "9bb0589a0433a0566a3405e9e8772fd97e9f4ec118ae6ca415c020ac9418647a",
    3: "1a50dd8eeabc455195f2b9f04259a788abbea40a94e0009357b9b5b8bbee99d9",  # name
    4: "e7ba021c5b65546c02768471a2d6915369254e8d44399ec83e3dac6d016fcc07",  # misfire_grace_ms
    5: "a0441b81dc2f53975369d63abfc909ad2a05e78432b95d9294c8049b71f937b1",  # retention indexes
    6: "acde8355fe03b89397ce2255826d9cc64328b9ece2db96b445e827e48de0aca4",  # the run log
    7: "068aeaf00705b7599f7314c8c7e1be95d71432aa26098edbceaa359ba6a41205",  # policy columns
}
"""sha256 of ``postgres_ddl()`` (the default table) at each schema version."""


def test_the_ddl_digest_is_pinned_to_the_schema_version() -> None:
    digest = hashlib.sha256(postgres_ddl().encode()).hexdigest()
    assert PINNED_DDL_DIGESTS.get(SCHEMA_VERSION) == digest, (
        f"postgres_ddl() has sha256 {digest}, but the digest pinned for SCHEMA_VERSION"
        f" {SCHEMA_VERSION} is {PINNED_DDL_DIGESTS.get(SCHEMA_VERSION)}. A DDL change"
        " needs all three: SCHEMA_VERSION + 1 in hexeract_lite/store/postgres/schema.py;"
        " an upgrade step for it at the end of _UPGRADES (idempotent, with its own index"
        " definitions, tested from the previous layout); and the new digest pinned here"
        " under the new version (keep the old ones)."
    )


# -- on a real server ---------------------------------------------------------------


@pytest.fixture
def pg_url() -> str:
    return pg.require_server()


@pytest.fixture
def table(pg_url: str) -> Iterator[str]:
    name = pg.unique_table("ref")
    yield name
    pg.drop_table(pg_url, name)


def _ref(statement: str, table: str) -> bytes:
    return statement.replace("{t}", f'"{table}"').encode()


_NOT_TERMINAL = "delivered_at IS NULL AND cancelled_at IS NULL AND dead_lettered_at IS NULL"
REFERENCE = {
    "insert": "INSERT INTO {t} (schedule_id, event_type, payload, trigger_kind, cron_expr,"
    " scheduled_for, target_kind, target_routing_key, max_attempts)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
    "claim": "UPDATE {t} SET leased_until = now() + %s::interval, attempts = attempts + 1"
    " WHERE schedule_id IN (SELECT schedule_id FROM {t} WHERE scheduled_for <= now()"
    f" AND {_NOT_TERMINAL} AND paused = FALSE AND attempts < max_attempts"
    " AND (leased_until IS NULL OR leased_until <= now())"
    " ORDER BY scheduled_for LIMIT %s FOR UPDATE SKIP LOCKED)"
    " RETURNING schedule_id, event_type, payload, trigger_kind, cron_expr, scheduled_for,"
    " target_kind, target_routing_key, attempts, max_attempts, leased_until",
    "mark_delivered": "UPDATE {t} SET delivered_at = now(), leased_until = NULL"
    f" WHERE schedule_id = %s AND leased_until = %s AND {_NOT_TERMINAL}",
    "reschedule": "UPDATE {t} SET scheduled_for = %s, attempts = 0, leased_until = NULL,"
    f" last_error = NULL WHERE schedule_id = %s AND leased_until = %s AND {_NOT_TERMINAL}",
    "mark_failed": "UPDATE {t} SET leased_until = now() + %s::interval, last_error = %s"
    f" WHERE schedule_id = %s AND leased_until = %s AND {_NOT_TERMINAL}",
    "mark_dead_lettered": "UPDATE {t} SET dead_lettered_at = now(), last_error = %s,"
    f" leased_until = NULL WHERE schedule_id = %s AND leased_until = %s AND {_NOT_TERMINAL}",
    "dead_letter_exhausted": "UPDATE {t} SET dead_lettered_at = now(), last_error = %s,"
    f" leased_until = NULL WHERE {_NOT_TERMINAL} AND paused = FALSE"
    " AND attempts >= max_attempts AND (leased_until IS NULL OR leased_until <= now())",
    "cancel": "UPDATE {t} SET cancelled_at = now(), leased_until = NULL"
    f" WHERE schedule_id = %s AND {_NOT_TERMINAL}",
    "set_paused": "UPDATE {t} SET paused = %s WHERE schedule_id = %s",
    "resume_with_next": "UPDATE {t} SET paused = FALSE, scheduled_for = %s, attempts = 0,"
    " last_error = NULL, leased_until = NULL"
    f" WHERE schedule_id = %s AND paused = TRUE AND {_NOT_TERMINAL}",
    "resume_only": "UPDATE {t} SET paused = FALSE, leased_until = NULL"
    f" WHERE schedule_id = %s AND paused = TRUE AND {_NOT_TERMINAL}",
    "inspect": "SELECT schedule_id, trigger_kind, cron_expr, scheduled_for, attempts,"
    " max_attempts, paused, last_error, delivered_at, cancelled_at, dead_lettered_at"
    " FROM {t} WHERE schedule_id = %s",
    "list_pending": "SELECT schedule_id, trigger_kind, cron_expr, scheduled_for, attempts,"
    " max_attempts, paused, last_error, delivered_at, cancelled_at, dead_lettered_at"
    f" FROM {{t}} WHERE {_NOT_TERMINAL} ORDER BY scheduled_for LIMIT %s",
    "list_dead_letter": "SELECT schedule_id, trigger_kind, cron_expr, scheduled_for, attempts,"
    " max_attempts, paused, last_error, delivered_at, cancelled_at, dead_lettered_at"
    " FROM {t} WHERE dead_lettered_at IS NOT NULL ORDER BY dead_lettered_at DESC LIMIT %s",
    "replay": "UPDATE {t} SET scheduled_for = now(), attempts = 0, leased_until = NULL,"
    " last_error = NULL, paused = FALSE, dead_lettered_at = NULL"
    " WHERE schedule_id = %s AND dead_lettered_at IS NOT NULL",
    "exists": "SELECT 1 FROM {t} WHERE schedule_id = %s",
}
"""The reference's 16 statements, in PostgreSQL's dialect (they read the server's clock,
as the reference does)."""


def _ref_insert(conn: Any, table: str, *, at: datetime, cron: str | None = None) -> uuid.UUID:
    sid = uuid.uuid4()
    conn.execute(
        _ref(REFERENCE["insert"], table),
        [sid, "ev", '{"n": 1}', "cron" if cron else "delay", cron, at, "outbox", None, 3],
    )
    return sid


def _indexes(conn: Any, table: str) -> dict[str, str]:
    rows = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table]
    ).fetchall()
    return {
        name.replace(table, "<t>"): definition.replace(table, "<t>") for name, definition in rows
    }


def _version(conn: Any, table: str) -> int | None:
    if conn.execute("SELECT to_regclass(%s)", [META_TABLE]).fetchone() == (None,):
        return None
    row = conn.execute(
        f"SELECT version FROM {META_TABLE} WHERE table_name = %s".encode(), [table]
    ).fetchone()
    return None if row is None else int(row[0])


@pytest.mark.postgres
def test_a_table_the_reference_created_is_adopted(pg_url: str, table: str) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(reference_ddl(table).encode())
        before = _indexes(conn, table)
        assert set(before) == {"<t>_pkey", "idx_<t>_pending", "idx_<t>_dead_letter"}
        ids = [_ref_insert(conn, table, at=now - timedelta(minutes=i)) for i in range(3)]
        assert _version(conn, table) is None

    with PostgresScheduleStore.open(pg_url, table=table) as store:
        listed = store.list_pending()
        assert {s.schedule_id for s in listed} == set(ids), "the rows stay"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        after = _indexes(conn, table)
        assert _version(conn, table) == SCHEMA_VERSION
    expected = {f"idx_<t>_{suffix}" for suffix, _, _ in INDEXES + UNIQUE_INDEXES} | {"<t>_pkey"}
    assert set(after) == expected
    for name in before:
        assert after[name] == before[name], "the reference's indexes are untouched"

    # what the ladder made is what a fresh table gets
    fresh = pg.unique_table("ref")
    try:
        with PostgresScheduleStore.open(pg_url, table=fresh):
            pass
        with psycopg.connect(pg_url) as conn:
            made = {k.replace(fresh, "<t>"): v for k, v in _indexes(conn, fresh).items()}
        assert {k: v.replace(fresh, "<t>") for k, v in made.items()} == after
    finally:
        pg.drop_table(pg_url, fresh)


@pytest.mark.postgres
def test_the_reference_s_statements_work_on_an_upgraded_table(pg_url: str, table: str) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(reference_ddl(table).encode())
        first = _ref_insert(conn, table, at=now - timedelta(seconds=5))
        cron = _ref_insert(conn, table, at=now - timedelta(seconds=4), cron="*/5 * * * *")
        PostgresScheduleStore.open(pg_url, table=table).close()  # adopt and upgrade
        late = _ref_insert(conn, table, at=now - timedelta(seconds=3))

        def run(name: str, *params: object) -> Any:
            return conn.execute(_ref(REFERENCE[name], table), list(params))

        claimed = run("claim", "30 seconds", 10).fetchall()
        assert [row[0] for row in claimed] and {row[0] for row in claimed} == {
            first,
            cron,
            late,
        }
        leases = {row[0]: row[10] for row in claimed}
        assert run("mark_delivered", first, leases[first]).rowcount == 1
        assert run("reschedule", now + timedelta(hours=1), cron, leases[cron]).rowcount == 1
        assert run("mark_failed", "0 seconds", "boom", late, leases[late]).rowcount == 1
        [(_, _, _, _, attempts, *_rest)] = run("inspect", late).fetchall()
        assert attempts == 1
        assert run("exists", late).fetchone() == (1,)
        assert run("set_paused", True, cron).rowcount == 1
        assert run("resume_only", cron).rowcount == 1
        assert run("set_paused", True, cron).rowcount == 1
        assert run("resume_with_next", now + timedelta(hours=2), cron).rowcount == 1
        reclaimed = run("claim", "30 seconds", 10).fetchall()
        assert [row[0] for row in reclaimed] == [late]
        error = "exhausted"
        assert run("mark_dead_lettered", error, late, reclaimed[0][10]).rowcount == 1
        assert [row[0] for row in run("list_dead_letter", 10).fetchall()] == [late]
        assert run("replay", late).rowcount == 1
        assert run("dead_letter_exhausted", "swept").rowcount == 0
        assert {row[0] for row in run("list_pending", 10).fetchall()} == {cron, late}
        assert run("cancel", cron).rowcount == 1

    # and hexeract_lite reads what the reference wrote
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as store:
        assert store.inspect(first).status is ScheduleStatus.DELIVERED  # type: ignore[union-attr]
        assert store.inspect(cron).status is ScheduleStatus.CANCELLED  # type: ignore[union-attr]
        snapshot = store.inspect(late)
        assert snapshot is not None and snapshot.status is ScheduleStatus.PENDING


def _version_1_ddl(table: str) -> bytes:
    """The layout of schema version 1: the reference's plus claim, leased, exhausted."""
    pending = (
        "delivered_at IS NULL AND dead_lettered_at IS NULL AND cancelled_at IS NULL"
        " AND paused = FALSE"
    )
    text = reference_ddl(table)
    for suffix, keys, where in (
        ("claim", "scheduled_for, schedule_id", pending),
        ("leased", "leased_until", f"leased_until IS NOT NULL AND {pending}"),
        ("exhausted", "leased_until", f"attempts >= max_attempts AND {pending}"),
    ):
        text += f'CREATE INDEX "idx_{table}_{suffix}" ON "{table}" ({keys}) WHERE {where};\n'
    return text.encode()


@pytest.mark.postgres
def test_a_version_1_table_is_upgraded_to_the_two_index_claim(pg_url: str, table: str) -> None:
    now = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(_version_1_ddl(table))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {META_TABLE}"
            " (table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)".encode()
        )
        conn.execute(
            f"INSERT INTO {META_TABLE} VALUES (%s, 1) ON CONFLICT (table_name)"
            " DO UPDATE SET version = 1".encode(),
            [table],
        )
        sid = _ref_insert(conn, table, at=now - timedelta(seconds=1))
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        [occurrence] = store.claim_due(now, 10, timedelta(seconds=30))
        assert occurrence.message.schedule_id == sid
    with psycopg.connect(pg_url) as conn:
        names = set(_indexes(conn, table))
        assert _version(conn, table) == SCHEMA_VERSION
    assert names == {f"idx_<t>_{suffix}" for suffix, _, _ in INDEXES + UNIQUE_INDEXES} | {
        "<t>_pkey"
    }
    assert "idx_<t>_claim" not in names and "idx_<t>_leased" not in names


def _version_2_ddl(table: str) -> bytes:
    """The layout of schema version 2: the reference's columns, its indexes and ours."""
    text = reference_ddl(table)
    for suffix, keys, where in INDEXES:
        if suffix not in ("pending", "dead_letter"):
            text += f'CREATE INDEX "idx_{table}_{suffix}" ON "{table}" ({keys}) WHERE {where};\n'
    return text.encode()


@pytest.mark.postgres
def test_a_version_2_table_is_upgraded_to_named_schedules(pg_url: str, table: str) -> None:
    """2 → 3: ``name`` and ``next_after_lease`` added (nullable), the unique
    name index made, the rows kept; the reference's insert still works after."""
    now = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(_version_2_ddl(table))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {META_TABLE}"
            " (table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)".encode()
        )
        conn.execute(
            f"INSERT INTO {META_TABLE} VALUES (%s, 2) ON CONFLICT (table_name)"
            " DO UPDATE SET version = 2".encode(),
            [table],
        )
        old = _ref_insert(conn, table, at=now + timedelta(hours=1))
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        msg = ScheduledMessage.cron(Target.mediator(), "0 3 * * *", event_type="b", name="a.b")
        assert store.ensure(msg, 3).value == "created"
        assert {s.schedule_id for s in store.list_pending()} == {old, msg.schedule_id}
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == SCHEMA_VERSION >= 4
        assert "idx_<t>_name" in _indexes(conn, table)
        later = _ref_insert(conn, table, at=now)  # the reference's own insert
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(f'UPDATE "{table}" SET name = %s WHERE schedule_id = %s', ["a.b", later])
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        snap = store.inspect(later)
        assert snap is not None and snap.name is None and snap.misfire_grace is None
        late = ScheduledMessage.delay(  # 3 -> 4 ran too: the grace is kept
            Target.outbox(), now, "e", {}, misfire_grace=timedelta(minutes=10)
        )
        store.insert(late, 3)
        snap = store.inspect(late.schedule_id)
        assert snap is not None and snap.misfire_grace == timedelta(minutes=10)


@pytest.mark.postgres
def test_a_version_3_table_is_upgraded_to_the_misfire_grace(pg_url: str, table: str) -> None:
    """3 → 4: a table at version 3 (named schedules, no ``misfire_grace_ms``)
    is refused with create=False naming the column, then upgraded with create=True:
    rows and names kept, the grace stored, the reference's insert still works."""
    now = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(_version_2_ddl(table))
        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN name TEXT'.encode())
        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN next_after_lease TIMESTAMPTZ'.encode())
        conn.execute(
            f'CREATE UNIQUE INDEX "idx_{table}_name" ON "{table}" (name)'
            " WHERE name IS NOT NULL".encode()
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {META_TABLE}"
            " (table_name TEXT PRIMARY KEY NOT NULL, version INTEGER NOT NULL)".encode()
        )
        conn.execute(
            f"INSERT INTO {META_TABLE} VALUES (%s, 3) ON CONFLICT (table_name)"
            " DO UPDATE SET version = 3".encode(),
            [table],
        )
        old = _ref_insert(conn, table, at=now + timedelta(hours=1))
        conn.execute(f'UPDATE "{table}" SET name = %s WHERE schedule_id = %s', ["a.old", old])
    with pytest.raises(StoreError, match=r"lacks the column.*misfire_grace_ms"):
        PostgresScheduleStore.open(pg_url, table=table, create=False)
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        grace = timedelta(minutes=5)
        msg = ScheduledMessage.cron(
            Target.mediator(), "0 3 * * *", event_type="b", name="a.b", misfire_grace=grace
        )
        assert store.ensure(msg, 3).value == "created"
        assert [s.name for s in store.list_named("a.")] == ["a.b", "a.old"]
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.misfire_grace == grace
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == SCHEMA_VERSION >= 4
        later = _ref_insert(conn, table, at=now)  # the reference's own insert
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as store:
        snap = store.inspect(later)
        assert snap is not None and snap.name is None and snap.misfire_grace is None


@pytest.mark.postgres
def test_a_version_5_table_is_upgraded_to_the_run_log(pg_url: str, table: str) -> None:
    """5 → 6: a table without the run log is used as it is with create=False (no runs
    recorded or read), then upgraded: the runs table made, the worker's runs recorded;
    the reference's statements keep working on the upgraded table and never touch it."""
    PostgresScheduleStore.open(pg_url, table=table).close()
    runs = runs_table_name(table)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP TABLE "{runs}"'.encode())
        conn.execute(f"UPDATE {META_TABLE} SET version = 5 WHERE table_name = %s".encode(), [table])
        old = _ref_insert(conn, table, at=datetime.now(UTC) - timedelta(seconds=1))
    with PostgresScheduleStore.open(pg_url, table=table, create=False) as store:
        assert not store.keeps_runs and store.runs() == []
        assert SchedulerWorker(store, lambda message: None).run_once().delivered == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == 5
        assert conn.execute("SELECT to_regclass(%s)", [f'"{runs}"']).fetchone() == (None,)
        again = _ref_insert(conn, table, at=datetime.now(UTC) - timedelta(seconds=1))
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        assert store.keeps_runs
        assert SchedulerWorker(store, lambda message: None).run_once().delivered == 1
        [run] = store.runs()
        assert run.schedule_id == again and run.outcome is RunOutcome.DELIVERED
        assert store.runs(old) == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == SCHEMA_VERSION
        _ref_insert(conn, table, at=datetime.now(UTC) - timedelta(seconds=1))
        claimed = conn.execute(_ref(REFERENCE["claim"], table), ["30 seconds", 10]).fetchall()
        assert len(claimed) == 1, "the reference's claim on the upgraded table"
        [(count,)] = conn.execute(f'SELECT count(*) FROM "{runs}"'.encode()).fetchall()
        assert count == 1, "the reference's statements never write the run log"
        conn.execute(f'DROP TABLE "{runs}"'.encode())  # another tool drops it
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        assert store.runs() == [], "made again at open"


@pytest.mark.postgres
def test_a_version_6_table_is_upgraded_to_the_policy_columns(pg_url: str, table: str) -> None:
    """6 → 7: a table without the policy and long-handler columns is refused with
    create=False, naming them, and left as it was; then upgraded in place: its rows stay,
    the columns are added (nullable) and the reference's statements keep working."""
    PostgresScheduleStore.open(pg_url, table=table).close()
    drops = ", ".join(f"DROP COLUMN {name}" for name in POLICY_COLUMNS)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{table}" {drops}'.encode())
        conn.execute(f"UPDATE {META_TABLE} SET version = 6 WHERE table_name = %s".encode(), [table])
        old = _ref_insert(conn, table, at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(StoreError, match=r"end_at.*abort_requested"):
        PostgresScheduleStore.open(pg_url, table=table, create=False)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == 6
    with PostgresScheduleStore.open(pg_url, table=table) as store:
        [record] = store.export_records(None, 10)
        assert record.schedule_id == old and record.end_at is None and record.snoozes is None
        assert SchedulerWorker(store, lambda message: None).run_once().delivered == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert _version(conn, table) == SCHEMA_VERSION
        found = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attnum > 0 AND NOT attisdropped",
            [f'"{table}"'],
        ).fetchall()
        assert set(POLICY_COLUMNS) <= {row[0] for row in found}
        _ref_insert(conn, table, at=datetime.now(UTC) - timedelta(seconds=1))
        claimed = conn.execute(_ref(REFERENCE["claim"], table), ["30 seconds", 10]).fetchall()
        assert len(claimed) == 1, "the reference's claim on the upgraded table"


@pytest.mark.postgres
def test_create_false_writes_nothing_to_an_older_table(pg_url: str, table: str) -> None:
    """An older table lacks the columns of versions 3 and 4 (name, next_after_lease,
    misfire_grace_ms): with create=False it is refused, naming them, and left exactly
    as it was."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(reference_ddl(table).encode())
        before = _indexes(conn, table)
    with pytest.raises(
        StoreError, match=r"lacks the column.*name, next_after_lease, misfire_grace_ms.*create=True"
    ):
        PostgresScheduleStore.open(pg_url, table=table, create=False)
    with psycopg.connect(pg_url) as conn:
        assert _indexes(conn, table) == before
        assert _version(conn, table) is None


@pytest.mark.postgres
def test_a_newer_schema_version_is_refused(pg_url: str, table: str) -> None:
    PostgresScheduleStore.open(pg_url, table=table).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {META_TABLE} SET version = %s WHERE table_name = %s".encode(),
            [SCHEMA_VERSION + 1, table],
        )
    for create in (True, False):
        with pytest.raises(StoreError, match=rf"schema version {SCHEMA_VERSION + 1}, newer"):
            PostgresScheduleStore.open(pg_url, table=table, create=create)
    with psycopg.connect(pg_url) as conn:
        assert _version(conn, table) == SCHEMA_VERSION + 1, "left as it was"


@pytest.mark.postgres
def test_a_lost_index_under_a_current_version_is_made_again(pg_url: str, table: str) -> None:
    PostgresScheduleStore.open(pg_url, table=table).close()
    index = postgres_index_name(table, INDEXES[-1][0])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{index}"'.encode())
    PostgresScheduleStore.open(pg_url, table=table).close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", [f'"{index}"']).fetchone() != (None,)
        assert _version(conn, table) == SCHEMA_VERSION
