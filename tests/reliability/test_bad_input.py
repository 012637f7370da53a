"""Bad input, table-driven: every case gets a clear error naming the bad value, and the
database is left exactly as it was.

Each case runs against its own copy of one prepared database (a pending one-shot, a
pending cron schedule, a paused one, a dead-lettered one). Before and after the case the
test takes two pictures of it: the SHA-256 of the file and its ``-wal`` (byte-for-byte)
and every row of every table with the schema and ``user_version`` (row-for-row). Cases
that must fail before any store opens a connection demand both; the others demand the
rows. A case passes only if it raised the documented error type (API) or exit code
(CLI), the message contains every expected fragment (the bad value itself), and the
pictures match.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import apsw
import pytest

from hexeract_lite import (
    MAX_PAYLOAD_BYTES,
    DuplicateSchedule,
    InvalidArgument,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTrigger,
    ManualClock,
    NotReplayable,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerError,
    StoreError,
    Target,
)
from hexeract_lite.cli import main as cli_main
from hexeract_lite.snapshot import MalformedSchedule
from hexeract_lite.store.sqlite import META_TABLE, SCHEMA_VERSION, SqliteScheduleStore
from hexeract_lite.worker import SchedulerWorker, SchedulerWorkerConfig

from ..conftest import T0, FrozenTime
from .conftest import ROOT, TABLE, dump_database, file_fingerprint

NOW = datetime.now(UTC).replace(microsecond=0)
NAIVE = datetime(2026, 3, 1, 12, 0, 0)
UNKNOWN = uuid.UUID("01890000-0000-7000-8000-00000000dead")
LEASE = timedelta(seconds=30)


@dataclass
class World:
    """One case's database, its known schedule ids, and a store opened on demand."""

    db: Path
    ids: dict[str, uuid.UUID]
    capsys: pytest.CaptureFixture[str]
    _store: SqliteScheduleStore | None = None

    @property
    def store(self) -> SqliteScheduleStore:
        if self._store is None:
            self._store = SqliteScheduleStore.open(self.db, create=False)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def fill(self, text: str) -> str:
        """``text`` with ``{db}`` and ``{<id name>}`` replaced."""
        for key, value in [("db", self.db), *self.ids.items()]:
            text = text.replace("{" + key + "}", str(value))
        return text

    def cli(self, *argv: str) -> tuple[int, str]:
        """Run ``hexeract`` in-process on this database; return (exit code, stderr)."""
        self.capsys.readouterr()
        argv = tuple(self.fill(a) for a in argv)
        if "--conn" not in argv and argv[:2] != ("scheduler", "schema"):
            argv = (*argv, "--conn", str(self.db))
        code = cli_main(list(argv))
        _out, err = self.capsys.readouterr()
        return code, err


@dataclass(frozen=True)
class Case:
    """``action`` must raise ``error`` (API) or return ``exit_code`` (CLI, stderr checked);
    the message contains each of ``names``."""

    id: str
    action: Callable[[World], object]
    error: type[BaseException] | None = None
    exit_code: int | None = None
    names: tuple[str, ...] = ()
    bytes_unchanged: bool = False
    prepare: Callable[[Path], None] | None = field(default=None)


def _msg(**overrides: object) -> ScheduledMessage:
    kw: dict[str, object] = {
        "target": Target.outbox(),
        "at": NOW,
        "event_type": "ev",
        "payload": {"ok": 1},
    }
    kw.update(overrides)
    return ScheduledMessage.delay(**kw)  # type: ignore[arg-type]


def _cron(expression: str) -> ScheduledMessage:
    return ScheduledMessage.cron(Target.outbox(), expression, NOW, "ev", {})


def _config(**overrides: object) -> SchedulerWorkerConfig:
    return SchedulerWorkerConfig(**overrides)  # type: ignore[arg-type]


def _make_dir(db: Path) -> None:
    for part in db.parent.glob(db.name + "*"):
        part.unlink()
    db.mkdir()


def _not_sqlite(db: Path) -> None:
    for part in db.parent.glob(db.name + "*"):
        part.unlink()
    db.write_bytes(b"name,value\nthis is a CSV file, not a database\n" * 100)


def _newer_schema(db: Path) -> None:
    """Record a schema version for the table above what this code understands."""
    conn = apsw.Connection(str(db))
    conn.execute(
        f"UPDATE {META_TABLE} SET version = ? WHERE table_name = ?", (SCHEMA_VERSION + 1, TABLE)
    )
    assert conn.changes() == 1
    conn.close()


def _with_env(action: Callable[[], tuple[int, str]], **env: str) -> tuple[int, str]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return action()
    finally:
        for key, value in saved.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value


PLUS_14 = timezone(timedelta(hours=14))
MINUS_14 = timezone(timedelta(hours=-14))
YEAR_1_PLUS_14 = datetime(1, 1, 1, tzinfo=PLUS_14)  # 0000-12-31T10:00Z: before year 1


def _nested(depth: int) -> list[object]:
    """``[[[...]]]``, ``depth`` lists deep."""
    outer: list[object] = []
    inner = outer
    for _ in range(depth):
        nested: list[object] = []
        inner.append(nested)
        inner = nested
    return outer


DEEP_PAYLOAD = _nested(100_000)


class NaiveClock:
    """A clock returning naive datetimes (a mistake the store must name)."""

    def now(self) -> datetime:
        return datetime(2026, 3, 1, 12, 0, 0)


def _insert_with_naive_clock(w: World) -> None:
    with SqliteScheduleStore.open(w.db, clock=NaiveClock()) as store:
        store.insert(_msg(), 3)


def _open_dir(w: World) -> None:
    SqliteScheduleStore.open(w.db).close()


def _open(w: World) -> None:
    SqliteScheduleStore.open(w.db).close()


CASES: list[Case] = [
    # -- values: naive datetimes ---------------------------------------------------
    Case(
        "naive-at",
        lambda w: w.store.insert(_msg(at=NAIVE), 3),
        InvalidMessage,
        names=("naive", "2026-03-01T12:00:00"),
    ),
    Case(
        "naive-first-occurrence",
        lambda w: w.store.insert(
            ScheduledMessage.cron(Target.outbox(), "* * * * *", NAIVE, "ev", {}), 3
        ),
        InvalidMessage,
        names=("naive", "first_occurrence"),
    ),
    Case(
        "naive-claim-now",
        lambda w: w.store.claim_due(NAIVE, 10, LEASE),
        InvalidConfiguration,
        names=("naive", "now"),
    ),
    Case(
        "naive-resume-next",
        lambda w: w.store.resume(w.ids["paused"], NAIVE),
        InvalidArgument,
        names=("naive", "next"),
    ),
    Case(
        "naive-clock-insert",
        _insert_with_naive_clock,
        InvalidConfiguration,
        names=("clock.now()", "naive", "2026-03-01T12:00:00"),
    ),
    # -- values: instants with no UTC equivalent ----------------------------------------
    Case(
        "at-year-1-plus-14h",
        lambda w: w.store.insert(_msg(at=YEAR_1_PLUS_14), 3),
        InvalidMessage,
        names=("at", "0001-01-01T00:00:00+14:00", "out of range"),
    ),
    Case(
        "at-year-9999-minus-14h",
        lambda w: w.store.insert(_msg(at=datetime(9999, 12, 31, 12, tzinfo=MINUS_14)), 3),
        InvalidMessage,
        names=("9999-12-31T12:00:00-14:00", "out of range"),
    ),
    Case(
        "at-rounds-up-past-9999",
        lambda w: w.store.insert(_msg(at=datetime(9999, 12, 31, 23, 59, 59, 999_001, UTC)), 3),
        InvalidMessage,
        names=("9999-12-31T23:59:59.999001", "out of range"),
    ),
    Case(
        "first-occurrence-year-1-plus-14h",
        lambda w: w.store.insert(
            ScheduledMessage.cron(Target.outbox(), "@daily", YEAR_1_PLUS_14, "ev", {}), 3
        ),
        InvalidMessage,
        names=("first_occurrence", "0001-01-01T00:00:00+14:00"),
    ),
    Case(
        "manual-clock-year-1-plus-14h",
        lambda w: ManualClock(YEAR_1_PLUS_14),
        InvalidArgument,
        names=("ManualClock", "0001-01-01T00:00:00+14:00"),
    ),
    # -- triggers --------------------------------------------------------------------
    Case(
        "cron-field-out-of-range",
        lambda w: w.store.insert(_cron("61 * * * *"), 3),
        InvalidTrigger,
        names=("61 * * * *",),
    ),
    Case(
        "cron-three-fields",
        lambda w: w.store.insert(_cron("* * *"), 3),
        InvalidTrigger,
        names=("'* * *'", "3 fields"),
    ),
    Case(
        "cron-unknown-macro",
        lambda w: w.store.insert(_cron("@every 5m"), 3),
        InvalidTrigger,
        names=("@every 5m",),
    ),
    Case(
        "cron-zero-step",
        lambda w: w.store.insert(_cron("*/0 * * * *"), 3),
        InvalidTrigger,
        names=("*/0 * * * *",),
    ),
    Case(
        "cron-never-fires",
        lambda w: w.store.insert(_cron("0 0 31 2 *"), 3),
        InvalidTrigger,
        names=("0 0 31 2 *", "never fire"),
    ),
    Case("cron-empty", lambda w: w.store.insert(_cron("  "), 3), InvalidTrigger, names=("empty",)),
    # -- messages --------------------------------------------------------------------
    Case(
        "payload-set",
        lambda w: w.store.insert(_msg(payload={1, 2}), 3),
        InvalidMessage,
        names=("JSON", "{1, 2}"),
    ),
    Case(
        "payload-nan",
        lambda w: w.store.insert(_msg(payload=[float("nan")]), 3),
        InvalidMessage,
        names=("JSON", "nan"),
    ),
    Case(
        "payload-object",
        lambda w: w.store.insert(_msg(payload=object()), 3),
        InvalidMessage,
        names=("JSON", "object"),
    ),
    Case(
        "payload-nested-100k-deep",
        lambda w: w.store.insert(_msg(payload=DEEP_PAYLOAD), 3),
        InvalidMessage,
        names=("payload", "[[[[[[", "nested too deeply"),
    ),
    Case(
        "payload-over-limit",
        lambda w: w.store.insert(_msg(payload="x" * MAX_PAYLOAD_BYTES), 3),
        InvalidMessage,
        names=(str(MAX_PAYLOAD_BYTES + 2), str(MAX_PAYLOAD_BYTES)),
    ),
    Case(
        "event-type-empty",
        lambda w: w.store.insert(_msg(event_type=""), 3),
        InvalidMessage,
        names=("event_type", "''"),
    ),
    Case(
        "event-type-65",
        lambda w: w.store.insert(_msg(event_type="e" * 65), 3),
        InvalidMessage,
        names=("event_type", "65 characters"),
    ),
    Case(
        "event-type-not-str",
        lambda w: w.store.insert(_msg(event_type=42), 3),
        InvalidMessage,
        names=("event_type", "42"),
    ),
    Case(
        "target-bus-empty-key",
        lambda w: w.store.insert(_msg(target=Target.bus("")), 3),
        InvalidMessage,
        names=("routing_key", "''"),
    ),
    Case(
        "target-unknown-kind",
        lambda w: w.store.insert(_msg(target=Target("email")), 3),  # type: ignore[arg-type]
        InvalidMessage,
        names=("'email'",),
    ),
    Case(
        "schedule-id-not-uuid",
        lambda w: w.store.insert(_msg(schedule_id="1234"), 3),
        InvalidMessage,
        names=("schedule_id", "'1234'"),
    ),
    # -- store arguments ---------------------------------------------------------------
    Case(
        "max-attempts-0",
        lambda w: w.store.insert(_msg(), 0),
        InvalidConfiguration,
        names=("max_attempts", "got 0"),
    ),
    Case(
        "max-attempts-negative",
        lambda w: w.store.insert_many([_msg(), _msg()], -1),
        InvalidConfiguration,
        names=("max_attempts", "-1"),
    ),
    Case(
        "max-attempts-bool",
        lambda w: w.store.insert(_msg(), True),
        InvalidConfiguration,
        names=("max_attempts", "True"),
    ),
    Case(
        "batch-size-0",
        lambda w: w.store.claim_due(NOW, 0, LEASE),
        InvalidConfiguration,
        names=("batch_size", "0"),
    ),
    Case(
        "lease-negative",
        lambda w: w.store.claim_due(NOW, 5, -LEASE),
        InvalidConfiguration,
        names=("lease", "days=-1, seconds=86370"),
    ),
    Case(
        "retry-in-negative",
        lambda w: w.store.mark_failed(w.ids["pending"], timedelta(seconds=-1), "x", NOW),
        InvalidConfiguration,
        names=("retry_in", "days=-1, seconds=86399"),
    ),
    Case("limit-0", lambda w: w.store.list_pending(0), InvalidConfiguration, names=("limit", "0")),
    Case(
        "duplicate-id",
        lambda w: w.store.insert(_msg(schedule_id=w.ids["pending"]), 3),
        DuplicateSchedule,
        names=("already exists",),
    ),
    Case(
        "duplicate-in-batch",
        lambda w: w.store.insert_many([_msg(schedule_id=UNKNOWN), _msg(schedule_id=UNKNOWN)], 3),
        DuplicateSchedule,
        names=(str(UNKNOWN),),
    ),
    Case(
        "non-uuid-inspect",
        lambda w: w.store.inspect("not-a-uuid"),  # type: ignore[arg-type]
        InvalidArgument,
        names=("schedule_id", "'not-a-uuid'"),
    ),
    Case(
        "non-uuid-cancel",
        lambda w: w.store.cancel(str(w.ids["pending"])),  # type: ignore[arg-type]
        InvalidArgument,
        names=("schedule_id", "'{pending}'"),
    ),
    Case(
        "unknown-id-cancel",
        lambda w: w.store.cancel(UNKNOWN),
        ScheduleNotFound,
        names=(str(UNKNOWN),),
    ),
    Case(
        "unknown-id-pause",
        lambda w: w.store.set_paused(UNKNOWN, True),
        ScheduleNotFound,
        names=(str(UNKNOWN),),
    ),
    Case(
        "unknown-id-replay",
        lambda w: w.store.replay(UNKNOWN),
        ScheduleNotFound,
        names=(str(UNKNOWN),),
    ),
    Case(
        "replay-pending",
        lambda w: w.store.replay(w.ids["pending"]),
        NotReplayable,
        names=("not replayable", "pending"),
    ),
    Case(
        "replay-paused",
        lambda w: w.store.replay(w.ids["paused"]),
        NotReplayable,
        names=("not replayable", "paused"),
    ),
    # -- worker configuration ------------------------------------------------------------
    Case(
        "config-batch-size-0",
        lambda w: _config(batch_size=0),
        InvalidConfiguration,
        names=("batch_size=0",),
    ),
    Case(
        "config-lease-too-short",
        lambda w: _config(
            batch_size=10, dispatch_timeout=timedelta(seconds=30), lease=timedelta(seconds=299)
        ),
        InvalidConfiguration,
        names=("lease=299 s", "10 * 30 s = 300 s"),
    ),
    Case(
        "config-poll-interval-0",
        lambda w: _config(poll_interval=timedelta(0)),
        InvalidConfiguration,
        names=("poll_interval=0 s",),
    ),
    Case(
        "config-retry-max-below-base",
        lambda w: _config(
            retry_base_delay=timedelta(seconds=10), retry_max_delay=timedelta(seconds=5)
        ),
        InvalidConfiguration,
        names=("retry_max_delay=5 s", "10 s"),
    ),
    Case(
        "config-dispatch-timeout-negative",
        lambda w: _config(dispatch_timeout=timedelta(seconds=-1)),
        InvalidConfiguration,
        names=("dispatch_timeout=-1 s",),
    ),
    Case(
        "config-batch-size-float",
        lambda w: _config(batch_size=2.5),
        InvalidConfiguration,
        names=("batch_size=2.5",),
    ),
    Case(
        "open-durability-unknown",
        lambda w: SqliteScheduleStore.open(w.db, durability="fast"),
        InvalidConfiguration,
        names=("durability", "'fast'"),
        bytes_unchanged=True,
    ),
    Case(
        "open-busy-timeout-negative",
        lambda w: SqliteScheduleStore.open(w.db, busy_timeout=timedelta(seconds=-1)),
        InvalidConfiguration,
        names=("busy_timeout",),
        bytes_unchanged=True,
    ),
    Case(
        "cron-seven-fields",
        lambda w: w.store.insert(_cron("0 0 0 1 1 * 2030"), 3),
        InvalidTrigger,
        names=("0 0 0 1 1 * 2030", "7 fields"),
    ),
    Case(
        "routing-key-too-long",
        lambda w: w.store.insert(_msg(target=Target.bus("k" * 256)), 3),
        InvalidMessage,
        names=("routing_key", "k" * 100),
    ),
    Case(
        "insert-many-not-a-message",
        lambda w: w.store.insert_many([_msg(), {"event_type": "x"}], 3),  # type: ignore[list-item]
        InvalidMessage,
        names=("ScheduledMessage", "'event_type': 'x'"),
    ),
    # -- files and tables: refused before anything is written ----------------------------
    Case(
        "table-with-sql",
        lambda w: SqliteScheduleStore.open(w.db, table='x"; DROP TABLE scheduled_messages; --'),
        InvalidConfiguration,
        names=("DROP TABLE scheduled_messages",),
        bytes_unchanged=True,
    ),
    Case(
        "table-sqlite-schema",
        lambda w: SqliteScheduleStore.open(w.db, table="sqlite_schema"),
        InvalidConfiguration,
        names=("'sqlite_schema'", "sqlite_"),
        bytes_unchanged=True,
    ),
    Case(
        "table-sqlite-master-any-case",
        lambda w: SqliteScheduleStore.open(w.db, table="SQLite_Master"),
        InvalidConfiguration,
        names=("'SQLite_Master'",),
        bytes_unchanged=True,
    ),
    Case(
        "table-too-long",
        lambda w: SqliteScheduleStore.open(w.db, table="t" * 64),
        InvalidConfiguration,
        names=("t" * 64,),
        bytes_unchanged=True,
    ),
    Case(
        "db-is-a-directory",
        _open_dir,
        StoreError,
        names=("{db}",),
        bytes_unchanged=True,
        prepare=_make_dir,
    ),
    Case(
        "db-is-not-sqlite",
        _open,
        StoreError,
        names=("{db}",),
        bytes_unchanged=True,
        prepare=_not_sqlite,
    ),
    Case(
        "schema-newer-than-code",
        _open,
        StoreError,
        names=("{db}", "version"),
        bytes_unchanged=True,
        prepare=_newer_schema,
    ),
    # -- the CLI ---------------------------------------------------------------------------
    Case(
        "cli-inspect-not-a-uuid",
        lambda w: w.cli("scheduler", "inspect", "not-a-uuid"),
        exit_code=2,
        names=("not-a-uuid",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-inspect-unknown",
        lambda w: w.cli("scheduler", "inspect", str(UNKNOWN)),
        exit_code=1,
        names=(str(UNKNOWN),),
    ),
    Case(
        "cli-replay-pending",
        lambda w: w.cli("scheduler", "dead-letter", "replay", "{pending}"),
        exit_code=1,
        names=("not replayable", "pending"),
    ),
    Case(
        "cli-replay-with-format",
        lambda w: w.cli("scheduler", "dead-letter", "replay", "{dead}", "--format", "json"),
        exit_code=2,
        names=("--format",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-cancel-unknown",
        lambda w: w.cli("scheduler", "cancel", str(UNKNOWN)),
        exit_code=1,
        names=(str(UNKNOWN),),
    ),
    Case(
        "cli-table-with-sql",
        lambda w: w.cli("scheduler", "list", "--table", "x;DROP TABLE scheduled_messages"),
        exit_code=2,
        names=("x;DROP TABLE scheduled_messages",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-limit-0",
        lambda w: w.cli("scheduler", "list", "--limit", "0"),
        exit_code=2,
        names=("'0'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-format-xml",
        lambda w: w.cli("scheduler", "list", "--format", "xml"),
        exit_code=2,
        names=("'xml'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-bad-cron",
        lambda w: w.cli("scheduler", "add", "--cron", "61 * * * *", "--event-type", "e"),
        exit_code=2,
        names=("61 * * * *",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-naive-at",
        lambda w: w.cli("scheduler", "add", "--at", "2026-03-01T12:00:00", "--event-type", "e"),
        exit_code=2,
        names=("2026-03-01T12:00:00", "timezone"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-at-year-1-plus-14h",
        lambda w: w.cli(
            "scheduler", "add", "--at", "0001-01-01T00:00:00+14:00", "--event-type", "e"
        ),
        exit_code=2,
        names=("0001-01-01T00:00:00+14:00", "out of range"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-first-year-9999-minus-14h",
        lambda w: w.cli(
            "scheduler",
            "add",
            "--cron",
            "@daily",
            "--first",
            "9999-12-31T12:00:00-14:00",
            "--event-type",
            "e",
        ),
        exit_code=2,
        names=("9999-12-31T12:00:00-14:00", "out of range"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-payload-nested-100k-deep",
        lambda w: w.cli(
            "scheduler",
            "add",
            "--in",
            "5m",
            "--event-type",
            "e",
            "--payload",
            "[" * 100_000 + "]" * 100_000,
        ),
        exit_code=2,
        names=("nested too deeply", "[[[["),
        bytes_unchanged=True,
    ),
    Case(
        "cli-table-sqlite-schema",
        lambda w: w.cli("scheduler", "list", "--table", "sqlite_schema"),
        exit_code=2,
        names=("'sqlite_schema'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-table-sqlite-master",
        lambda w: w.cli("scheduler", "inspect", "{pending}", "--table", "sqlite_master"),
        exit_code=2,
        names=("'sqlite_master'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-bad-payload",
        lambda w: w.cli("scheduler", "add", "--in", "5m", "--event-type", "e", "--payload", "{bad"),
        exit_code=2,
        names=("JSON",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-bad-duration",
        lambda w: w.cli("scheduler", "add", "--in", "5x", "--event-type", "e"),
        exit_code=2,
        names=("'5x'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-max-attempts-0",
        lambda w: w.cli(
            "scheduler", "add", "--in", "5m", "--event-type", "e", "--max-attempts", "0"
        ),
        exit_code=2,
        names=("'0'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-event-type-too-long",
        lambda w: w.cli("scheduler", "add", "--in", "5m", "--event-type", "e" * 65),
        exit_code=2,
        names=("e" * 65,),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-target-unknown",
        lambda w: w.cli("scheduler", "add", "--in", "5m", "--event-type", "e", "--target", "email"),
        exit_code=2,
        names=("'email'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-payload-over-limit",
        lambda w: w.cli(
            "scheduler",
            "add",
            "--in",
            "5m",
            "--event-type",
            "e",
            "--payload",
            '"' + "x" * MAX_PAYLOAD_BYTES + '"',
        ),
        exit_code=2,
        names=(str(MAX_PAYLOAD_BYTES),),
        bytes_unchanged=True,
    ),
    Case(
        "cli-conn-unknown-scheme",
        lambda w: w.cli("scheduler", "list", "--conn", "oracle://u@h/db"),
        exit_code=2,
        names=("'oracle'",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-cron-never-fires",
        lambda w: w.cli("scheduler", "add", "--cron", "0 0 31 2 *", "--event-type", "e"),
        exit_code=2,
        names=("0 0 31 2 *", "never fire"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-add-naive-first",
        lambda w: w.cli(
            "scheduler",
            "add",
            "--cron",
            "@daily",
            "--first",
            "2026-03-01 00:00",
            "--event-type",
            "e",
        ),
        exit_code=2,
        names=("2026-03-01 00:00", "timezone"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-dead-letter-limit-negative",
        lambda w: w.cli("scheduler", "dead-letter", "list", "--limit", "-5"),
        exit_code=2,
        names=("-5",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-table-env-with-sql",
        lambda w: _with_env(
            HEXERACT_SCHEDULER_TABLE="t;DELETE FROM scheduled_messages",
            action=lambda: w.cli("scheduler", "list"),
        ),
        exit_code=2,
        names=("HEXERACT_SCHEDULER_TABLE", "t;DELETE FROM scheduled_messages"),
        bytes_unchanged=True,
    ),
    Case(
        "cli-worker-sink-missing",
        lambda w: w.cli("scheduler", "worker", "--sink", "no_such_module_6:sink"),
        exit_code=2,
        names=("no_such_module_6",),
        bytes_unchanged=True,
    ),
    Case(
        "cli-conn-directory",
        lambda w: w.cli("scheduler", "list"),
        exit_code=1,
        names=("{db}",),
        bytes_unchanged=True,
        prepare=_make_dir,
    ),
    Case(
        "cli-conn-not-sqlite",
        lambda w: w.cli("scheduler", "dead-letter", "list"),
        exit_code=1,
        names=("{db}",),
        bytes_unchanged=True,
        prepare=_not_sqlite,
    ),
    Case(
        "cli-schema-newer",
        lambda w: w.cli("scheduler", "list"),
        exit_code=1,
        names=("{db}", "version"),
        bytes_unchanged=True,
        prepare=_newer_schema,
    ),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, uuid.UUID]]:
    """A database with a pending one-shot, a pending cron, a paused and a dead-lettered
    schedule, closed (checkpointed) so that it is one file."""
    db = tmp_path_factory.mktemp("template") / "template.db"
    ids: dict[str, uuid.UUID] = {}
    with SqliteScheduleStore.open(db) as store:
        pending = _msg(at=NOW + timedelta(hours=1))
        cron = ScheduledMessage.cron(Target.bus("a.b"), "*/5 * * * *", NOW, "tick", [1])
        paused = _msg(at=NOW + timedelta(hours=2))
        dead = _msg(at=NOW - timedelta(hours=1), payload={"poison": True})
        store.insert_many([pending, cron, paused], 5)
        store.insert(dead, 1)
        store.set_paused(paused.schedule_id, True)
        (leased,) = store.claim_due(NOW - timedelta(minutes=30), 1, LEASE)
        assert leased.message.schedule_id == dead.schedule_id
        assert store.mark_dead_lettered(dead.schedule_id, "boom", leased.leased_until)
        ids.update(
            pending=pending.schedule_id,
            cron=cron.schedule_id,
            paused=paused.schedule_id,
            dead=dead.schedule_id,
        )
    return db, ids


def _copy(template: Path, dest: Path) -> None:
    for part in template.parent.glob(template.name + "*"):
        shutil.copy2(part, dest.parent / part.name.replace(template.name, dest.name))


def test_there_are_at_least_30_cases_across_api_and_cli() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    api = [c for c in CASES if c.error is not None]
    cli = [c for c in CASES if c.exit_code is not None]
    assert len(api) >= 30 and len(cli) >= 10, (len(api), len(cli))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_clearly_and_changes_nothing(
    case: Case,
    template: tuple[Path, dict[str, uuid.UUID]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    src, ids = template
    db = tmp_path / "case.db"
    _copy(src, db)
    if case.prepare is not None:
        case.prepare(db)
    before_bytes = file_fingerprint(db)
    before_rows = dump_database(db) if db.is_file() and case.prepare is not _not_sqlite else None
    world = World(db, dict(ids), capsys)
    names = [world.fill(n) for n in case.names]
    try:
        if case.error is not None:
            with pytest.raises(case.error) as info:
                case.action(world)
            text = str(info.value)
        else:
            result = case.action(world)
            assert isinstance(result, tuple), result
            code, text = result
            assert code == case.exit_code, text
    finally:
        world.close()
    for name in names:
        assert name in text, f"{name!r} not in {text!r}"
    assert "Traceback" not in text
    if case.bytes_unchanged:
        assert file_fingerprint(db) == before_bytes
    if before_rows is not None:
        assert dump_database(db) == before_rows
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("case.db")) == []


# -- a read-only database ---------------------------------------------------------------

READ_ONLY_SCRIPT = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from hexeract_lite import ScheduledMessage, StoreError, Target
    from hexeract_lite.store.sqlite import META_TABLE, SCHEMA_VERSION, SqliteScheduleStore
    message = ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "ev", {})
    try:
        with SqliteScheduleStore.open(sys.argv[1]) as store:
            store.insert(message, 3)
    except StoreError as exc:
        print(f"StoreError: {exc}")
        sys.exit(0)
    print("no error")
    sys.exit(1)
    """
)


def _without_root_powers() -> None:
    """In the child, before exec: drop CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and
    CAP_FOWNER from the bounding set, so that even root obeys file permission bits."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.mark.skipif(sys.platform != "linux", reason="POSIX permissions, Linux capabilities")
@pytest.mark.parametrize("read_only", ["file", "file-and-folder"])
def test_a_read_only_database_is_refused_naming_the_path_and_unchanged(
    template: tuple[Path, dict[str, uuid.UUID]], tmp_path: Path, read_only: str
) -> None:
    """A database file the process may read but not write (and, second case, in a folder
    it cannot write either). Root ignores permission bits (CI containers run as root), so
    the attempt runs in a child process without the capabilities that let it."""
    src, _ = template
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "ro.db"
    _copy(src, db)
    before_bytes, before_rows = file_fingerprint(db), dump_database(db)
    for part in folder.iterdir():
        part.chmod(0o444)
    if read_only == "file-and-folder":
        folder.chmod(0o555)
    try:
        result = subprocess.run(
            [sys.executable, "-c", READ_ONLY_SCRIPT, str(db)],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=60,
            preexec_fn=_without_root_powers if os.geteuid() == 0 else None,
        )
    finally:
        folder.chmod(0o755)
    assert result.returncode == 0, result
    assert result.stdout.startswith("StoreError: "), result
    assert str(db) in result.stdout, result.stdout
    assert "read-only" in result.stdout, result.stdout
    assert file_fingerprint(db) == before_bytes
    assert dump_database(db) == before_rows


def test_a_missing_database_is_never_created_by_a_reader(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    for argv in (["scheduler", "list"], ["scheduler", "dead-letter", "list"]):
        buf = io.StringIO()
        with contextlib.redirect_stderr(buf):
            assert cli_main([*argv, "--conn", str(db)]) == 1
        assert f"no database at {db}" in buf.getvalue()
    with pytest.raises(StoreError, match=r"typo\.db"):
        SqliteScheduleStore.open(db, create=False)
    assert list(tmp_path.iterdir()) == []


def test_every_error_is_a_scheduler_error() -> None:
    for case in CASES:
        if case.error is not None:
            assert issubclass(case.error, SchedulerError), case.id


# -- a malformed row in the file ---------------------------------------------------------

CORRUPTIONS = {
    "payload-not-json": ("payload", "{not json"),
    "cron-expr-invalid": ("cron_expr", "61 * * * *"),
    "target-kind-unknown": ("target_kind", "email"),
}


def _corrupt_db(
    db: Path, corruption: str, now: datetime
) -> tuple[ScheduledMessage, list[ScheduledMessage]]:
    """One malformed row (the oldest due) and three healthy due rows."""
    bad = (
        ScheduledMessage.cron(Target.outbox(), "*/5 * * * *", now - timedelta(minutes=5), "e", {})
        if corruption == "cron-expr-invalid"
        else _msg(at=now - timedelta(minutes=5))
    )
    good = [_msg(at=now - timedelta(minutes=4 - i)) for i in range(3)]
    with SqliteScheduleStore.open(db) as store:
        store.insert(bad, 3)
        store.insert_many(good, 3)
    column, value = CORRUPTIONS[corruption]
    conn = apsw.Connection(str(db))
    conn.execute(
        f"UPDATE {TABLE} SET {column} = ? WHERE schedule_id = ?", (value, bad.schedule_id.bytes)
    )
    conn.close()
    return bad, good


def _raw_state(db: Path, sid: uuid.UUID) -> tuple[object, ...]:
    """(attempts, delivered_at, dead_lettered_at, last_error), read with SQL."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(
            conn.execute(
                f"SELECT attempts, delivered_at, dead_lettered_at, last_error FROM {TABLE}"
                " WHERE schedule_id = ?",
                (sid.bytes,),
            ).fetchall()[0]
        )
    finally:
        conn.close()


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_a_malformed_row_does_not_poison_the_rows_claimed_with_it(
    tmp_path: Path, frozen: FrozenTime, corruption: str
) -> None:
    """A row another tool (or a hand edit) wrote badly: a payload that is not JSON, a cron
    expression that does not parse, an unknown target kind. It is the oldest due row, so
    every claim takes it together with three healthy ones. The healthy ones must be
    delivered; the bad one must end dead-lettered with a reason naming what is wrong;
    no cycle of the worker may fail."""
    db = tmp_path / "s.db"
    bad, good = _corrupt_db(db, corruption, frozen.now())
    delivered: list[uuid.UUID] = []
    config = SchedulerWorkerConfig(batch_size=10, lease=timedelta(seconds=300))
    errors = []
    with SqliteScheduleStore.open(db) as store:
        worker = SchedulerWorker(store, lambda m: delivered.append(m.schedule_id), config)
        for _ in range(5):  # more cycles than max_attempts, each after the leases expired
            try:
                worker.run_once()
            except Exception as exc:
                errors.append(exc)
            frozen.shift(timedelta(seconds=301))
    good_rows = [_raw_state(db, m.schedule_id) for m in good]
    bad_row = _raw_state(db, bad.schedule_id)
    print(f"\nhealthy rows after 5 cycles: {good_rows}; errors: {errors[:1]}")
    assert errors == []
    assert sorted(delivered) == sorted(m.schedule_id for m in good)
    assert all(row[1] is not None and row[2] is None for row in good_rows), good_rows
    assert bad_row[2] is not None, bad_row  # dead-lettered
    assert CORRUPTIONS[corruption][0] in str(bad_row[3]), bad_row  # naming the column


@pytest.mark.parametrize("corruption", ["cron-expr-invalid", "target-kind-unknown"])
def test_a_malformed_row_is_named_by_inspect_and_marked_in_listings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], corruption: str
) -> None:
    """inspect raises a StoreError naming the row; a listing shows the healthy rows and
    marks the bad one (one bad row never fails the whole listing)."""
    db = tmp_path / "s.db"
    bad, good = _corrupt_db(db, corruption, datetime.now(UTC))
    column = CORRUPTIONS[corruption][0]
    with SqliteScheduleStore.open(db) as store:
        with pytest.raises(StoreError) as info:
            store.inspect(bad.schedule_id)
        assert str(bad.schedule_id) in str(info.value) and column in str(info.value)
        listed = store.list_pending()
    marked = [item for item in listed if isinstance(item, MalformedSchedule)]
    assert [m.schedule_id for m in marked] == [bad.schedule_id] and column in marked[0].reason
    assert len(listed) == 1 + len(good)
    assert cli_main(["scheduler", "inspect", str(bad.schedule_id), "--conn", str(db)]) == 1
    assert str(bad.schedule_id) in capsys.readouterr().err
    assert cli_main(["scheduler", "list", "--conn", str(db)]) == 0
    out = capsys.readouterr().out
    assert str(bad.schedule_id) in out and "malformed" in out


FOREIGN_FORMS = {
    # SQLite's datetime() form, which REFERENCE.md says readers accept
    "sqlite-seconds": "2026-03-01 13:00:00",
    "sqlite-millis": "2026-03-01 13:00:00.000",
}
OFFSET_FORMS = {
    # ISO 8601 with an offset (what datetime.isoformat() writes), which readers accept too
    "offset-west": "2026-03-01T08:00:00-05:00",
    "offset-east": "2026-03-01T18:00:00+05:00",
}


@pytest.mark.parametrize(
    "text",
    [*FOREIGN_FORMS.values(), *OFFSET_FORMS.values()],
    ids=[*FOREIGN_FORMS, *OFFSET_FORMS],
)
def test_a_row_timestamped_by_another_tool_is_claimed_at_its_time(
    tmp_path: Path, frozen: FrozenTime, text: str
) -> None:
    """Another tool writes a due time an hour ahead in a form the store reads: the
    sqlite3 shell's ``datetime('now', '+1 hour')``, or Python's ``isoformat()`` of an
    aware local time. The store reads it as 13:00 UTC; it must not claim it at 12:00,
    and must claim it at 13:00."""
    db = tmp_path / "s.db"
    message = _msg(at=frozen.now() + timedelta(hours=1))
    with SqliteScheduleStore.open(db) as store:
        store.insert(message, 3)
    conn = apsw.Connection(str(db))
    conn.execute(f"UPDATE {TABLE} SET scheduled_for = ?", (text,))
    conn.close()
    with SqliteScheduleStore.open(db) as store:
        snap = store.inspect(message.schedule_id)
        assert snap is not None and snap.scheduled_for == T0 + timedelta(hours=1)
        assert store.claim_due(frozen.now(), 10, LEASE) == []  # 12:00: not due
        frozen.shift(timedelta(hours=1))
        assert len(store.claim_due(frozen.now(), 10, LEASE)) == 1  # 13:00: due
