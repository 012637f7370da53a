"""``hexeract scheduler list`` (text, no filter) on a SQLite file reads its rows without
the store's value classes (:mod:`hexeract_lite.store.sqlite.plain`): its output must be
what the store's own listing renders, byte for byte, on every kind of table and row,
and it must fall back to the store for any row it cannot vouch for."""

# ruff: noqa: E501 - the golden listing's lines are as wide as the command prints them

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.cli import main
from hexeract_lite.cli.commands.list import pending_text
from hexeract_lite.cli.output import format_pending
from hexeract_lite.connect import parse_conn
from hexeract_lite.store.sqlite import SqliteScheduleStore
from hexeract_lite.store.sqlite.plain import uuid_text
from tests.test_reference_compat import make_reference_db

T0 = datetime(2030, 3, 1, 12, 0, tzinfo=UTC)
TABLE = "scheduled_messages"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("HEXERACT_SCHEDULER_TABLE", raising=False)


def _id(n: int) -> uuid.UUID:
    return uuid.UUID(f"0190a5f0-0000-7000-8000-{n:012d}")


def _store_text(db: Path, limit: int = 50) -> str:
    """What the store's listing renders (the path every other listing takes)."""
    with SqliteScheduleStore.open(db, readonly=True) as store:
        return format_pending(store.list_pending(limit))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _file_state(db: Path) -> tuple[bytes, list[str]]:
    return db.read_bytes(), sorted(p.name for p in db.parent.iterdir())


def _varied(db: Path) -> None:
    """Every kind of row a listing shows: one-shots to each target, named ones (with
    characters the listing flattens), a paused one, cron (UTC and zoned) and interval
    rules, a misfire grace, attempts made, and ended rows that it does not show."""
    with SqliteScheduleStore.open(db) as store:
        store.insert(ScheduledMessage.delay(Target.outbox(), T0, "a.b", {}, schedule_id=_id(1)), 5)
        store.insert(
            ScheduledMessage.delay(Target.bus("billing.x"), T0, "c.d", [1], schedule_id=_id(2)),
            3,
        )
        store.insert(ScheduledMessage.delay(Target.mediator(), T0, "e", {}, name="x.y"), 5)
        store.insert(
            ScheduledMessage.delay(
                Target.mediator(),
                T0 + timedelta(minutes=1),
                "grace",
                {},
                schedule_id=_id(3),
                misfire_grace=timedelta(seconds=90),
            ),
            5,
        )
        store.insert(
            ScheduledMessage.cron(
                Target.outbox(), "*/5 * * * *", T0, "cron.utc", {}, schedule_id=_id(4)
            ),
            5,
        )
        store.insert(
            ScheduledMessage.cron(
                Target.outbox(),
                "0 9 * * *",
                T0 + timedelta(days=1),
                "cron.zoned",
                {},
                schedule_id=_id(5),
                tz="Europe/Paris",
            ),
            5,
        )
        store.insert(
            ScheduledMessage.every(
                Target.outbox(), "15m", T0 + timedelta(hours=2), "every", {}, schedule_id=_id(6)
            ),
            5,
        )
        for n in (7, 8, 9, 10):
            store.insert(
                ScheduledMessage.delay(
                    Target.outbox(), T0 + timedelta(hours=n), f"e{n}", {}, schedule_id=_id(n)
                ),
                5,
            )
        store.set_paused(_id(7), True)
        store.cancel(_id(8))
    conn = apsw.Connection(str(db))
    conn.execute(
        f"UPDATE {TABLE} SET attempts = 2, last_error = 'boom' WHERE schedule_id = ?",
        (_id(9).bytes,),
    )
    conn.execute(
        f"UPDATE {TABLE} SET delivered_at = '2030-03-01T12:00:00.000Z' WHERE schedule_id = ?",
        (_id(10).bytes,),
    )
    # what another tool may write: text the listing flattens onto one line
    conn.execute(
        f"UPDATE {TABLE} SET event_type = 'c' || char(9) || 'd  e' WHERE schedule_id = ?",
        (_id(2).bytes,),
    )
    conn.execute(f"UPDATE {TABLE} SET name = 'x.y' || char(10) || ' z' WHERE name = 'x.y'")
    conn.close()


# Written by this project's code before the plain listing existed (main at 210cdd1), with
# the local-time column added since (a zoned schedule's wall-clock time): the plain
# listing's output must stay the store's.
GOLDEN = """\
SCHEDULE ID                           STATUS   SCHEDULED FOR             ATTEMPTS  TRIGGER                                            EVENT TYPE  NAME   LOCAL TIME
0190a5f0-0000-7000-8000-000000000001  pending  2030-03-01T12:00:00.000Z  0/5       delay                                              a.b         -      -
0190a5f0-0000-7000-8000-000000000002  pending  2030-03-01T12:00:00.000Z  0/3       delay                                              c d e       -      -
0190a5f0-0000-7000-8000-000000000004  pending  2030-03-01T12:00:00.000Z  0/5       cron:*/5 * * * *                                   cron.utc    -      -
98cf6174-3a49-556a-9ebe-499b4312aeaa  pending  2030-03-01T12:00:00.000Z  0/5       delay                                              e           x.y z  -
0190a5f0-0000-7000-8000-000000000003  pending  2030-03-01T12:01:00.000Z  0/5       delay                                              grace       -      -
0190a5f0-0000-7000-8000-000000000006  pending  2030-03-01T14:00:00.000Z  0/5       interval:@every 15m from 2030-03-01T14:00:00.000Z  every       -      -
0190a5f0-0000-7000-8000-000000000007  paused   2030-03-01T19:00:00.000Z  0/5       delay                                              e7          -      -
0190a5f0-0000-7000-8000-000000000009  pending  2030-03-01T21:00:00.000Z  2/5       delay                                              e9          -      -
0190a5f0-0000-7000-8000-000000000005  pending  2030-03-02T12:00:00.000Z  0/5       cron:CRON_TZ=Europe/Paris 0 9 * * *                cron.zoned  -      2030-03-02 13:00:00 CET
"""


def test_the_list_text_is_unchanged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "sched.db"
    _varied(db)
    before = _file_state(db)
    code, out, err = _cli(capsys, "scheduler", "list", "--conn", str(db))
    assert (code, err) == (0, "")
    assert out == _store_text(db) + "\n"
    assert pending_text(parse_conn(str(db)), TABLE, 50) is not None  # read without the store
    assert _file_state(db) == before  # read-only: nothing written, no -wal/-shm left
    assert out == GOLDEN


@pytest.mark.parametrize("limit", [1, 3, 9, 50])
def test_the_limit_is_the_stores(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, limit: int
) -> None:
    db = tmp_path / "sched.db"
    _varied(db)
    code, out, _ = _cli(capsys, "scheduler", "list", "--conn", str(db), "--limit", str(limit))
    assert code == 0
    assert out == _store_text(db, limit) + "\n"


def test_an_empty_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "sched.db"
    SqliteScheduleStore.open(db).close()
    assert pending_text(parse_conn(str(db)), TABLE, 50) == "no pending schedules"
    assert _cli(capsys, "scheduler", "list", "--conn", str(db))[1] == "no pending schedules\n"


def test_a_table_the_reference_created_is_read_as_the_store_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An older table (no version recorded, SQLite's own instant layout in some rows, a
    cron rule, a bus target): the portable statement, never an upgrade."""
    db = make_reference_db(tmp_path)
    before = _file_state(db)
    text = pending_text(parse_conn(str(db)), TABLE, 50)
    assert text is not None
    assert text == _store_text(db)
    assert _cli(capsys, "scheduler", "list", "--conn", str(db))[1] == text + "\n"
    assert _file_state(db) == before


def test_instants_in_another_layout_take_the_portable_statement(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "sched.db"
    _varied(db)
    conn = apsw.Connection(str(db))
    # SQLite's datetime() layout sorts before the canonical text of a later instant
    conn.execute(
        f"UPDATE {TABLE} SET scheduled_for = '2030-03-01 11:00:00' WHERE schedule_id = ?",
        (_id(9).bytes,),
    )
    conn.close()
    text = pending_text(parse_conn(str(db)), TABLE, 3)
    assert text is not None
    assert text == _store_text(db, 3)
    assert "2030-03-01T11:00:00.000Z" in text.splitlines()[1]


# Each makes the store's decoding of the row fail (a malformed row) or show something
# other than the stored text; the plain listing must leave them to the store.
MALFORMED = [
    ("schedule_id", "x'00112233'"),
    ("scheduled_for", "'2099-02-30T00:00:00.000Z'"),
    ("created_at", "42"),
    ("leased_until", "'yesterday'"),
    ("cron_expr", "'not a rule'"),  # on the cron row
    ("target_kind", "'bus'"),  # without a routing key
    ("target_routing_key", "'x'"),  # on an outbox target
    ("misfire_grace_ms", "'soon'"),
    ("event_type", "x'07'"),
    ("name", "x'00'"),
]


@pytest.mark.parametrize(("column", "value"), MALFORMED)
def test_a_row_it_cannot_vouch_for_is_listed_by_the_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, column: str, value: str
) -> None:
    db = tmp_path / "sched.db"
    _varied(db)
    row = _id(4) if column == "cron_expr" else _id(1)
    conn = apsw.Connection(str(db))
    conn.execute(f"UPDATE {TABLE} SET {column} = {value} WHERE schedule_id = ?", (row.bytes,))
    conn.close()
    assert pending_text(parse_conn(str(db)), TABLE, 50) is None
    code, out, err = _cli(capsys, "scheduler", "list", "--conn", str(db))
    if column in ("event_type", "name"):  # the store's snapshot holds it; the text fails
        assert code == 1 and "unexpected TypeError" in err
        return
    assert (code, err) == (0, "")
    assert out == _store_text(db) + "\n"
    assert "malformed" in out


def test_an_unknown_trigger_kind_shows_as_the_store_shows_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A kind that is none of delay, cron or interval is a malformed row, in the store's
    listing and in the plain one alike (never listed as a one-shot)."""
    db = tmp_path / "sched.db"
    _varied(db)
    conn = apsw.Connection(str(db))
    conn.execute(
        f"UPDATE {TABLE} SET trigger_kind = 'bogus' WHERE schedule_id = ?", (_id(1).bytes,)
    )
    conn.close()
    text = _store_text(db)
    assert f"{_id(1)}  malformed  trigger_kind must be 'delay'" in text, text
    plain = pending_text(parse_conn(str(db)), TABLE, 50)
    assert plain is None or plain == text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--conn", "{dir}/missing.db"], "no database at"),
        (["--conn", "{dir}"], ""),
        (["--conn", "{dir}/sched.db", "--table", "other"], "no table"),
        (["--conn", "{dir}/sched.db", "--table", "order"], "order"),
        (["--conn", "{dir}/not-a-db.db"], ""),
    ],
)
def test_errors_are_the_stores(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    db = tmp_path / "sched.db"
    _varied(db)
    (tmp_path / "not-a-db.db").write_bytes(b"not a database, clearly" * 100)
    args = [a.replace("{dir}", str(tmp_path)) for a in argv]
    code, out, err = _cli(capsys, "scheduler", "list", *args)
    expected = _cli(capsys, "scheduler", "list", "--format", "json", *args)  # the store's path
    assert code == expected[0] != 0
    assert out == ""
    assert err == expected[2]
    assert message in err


@pytest.mark.parametrize("seed", range(200))
def test_ids_are_spelled_as_uuid_spells_them(seed: int) -> None:
    raw = os.urandom(16) if seed else bytes(16)
    assert uuid_text(raw) == str(uuid.UUID(bytes=raw))
