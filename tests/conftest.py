"""Shared fixtures: frozen time, the store factories the contract suite runs on, and
temporary files in memory."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine

os.environ["TZ"] = "UTC"
time.tzset()

RAM_TMP = Path("/dev/shm")
RAM_TMP_MIN_FREE = 2 << 30


def _temporary_files_in_memory() -> None:
    """Put the tests' temporary files (``tmp_path``, and every child process's) in a
    RAM-backed folder when there is one with room: what the tests check never depends on
    an fsync reaching a disk (the test PostgreSQL server runs with fsync off for the same
    reason), and SQLite's fsyncs to a real disk would be most of the suite's waiting. An
    explicit ``TMPDIR`` is kept."""
    if os.environ.get("TMPDIR") or not RAM_TMP.is_dir() or not os.access(RAM_TMP, os.W_OK):
        return
    free = os.statvfs(RAM_TMP)
    if free.f_bavail * free.f_frsize < RAM_TMP_MIN_FREE:
        return
    os.environ["TMPDIR"] = str(RAM_TMP)
    tempfile.tempdir = str(RAM_TMP)


_temporary_files_in_memory()

from hexeract_lite import InMemoryScheduleStore, SchedulerWorkerConfig, ScheduleStore  # noqa: E402
from hexeract_lite.store.sqlite import SqliteScheduleStore  # noqa: E402

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
"""The instant frozen-clock tests start at."""

TIGHT = SchedulerWorkerConfig(
    batch_size=2,
    lease=timedelta(milliseconds=600),
    dispatch_timeout=timedelta(milliseconds=250),
    poll_interval=timedelta(milliseconds=20),
    jitter=False,
)
"""A real-time worker config whose lease covers a batch (2 x 0.25 s), but not a pause of
:data:`tests.test_hooks.PAUSE_S`."""


class FrozenTime:
    """A frozen clock driven by time-machine: ``now()``, ``shift(delta)``, ``move_to(t)``."""

    def __init__(self, traveller: time_machine.Traveller | Any) -> None:
        self._traveller = traveller

    def now(self) -> datetime:
        return datetime.now(UTC)

    def shift(self, delta: timedelta | float) -> datetime:
        self._traveller.shift(delta)
        return self.now()

    def move_to(self, instant: datetime) -> datetime:
        self._traveller.move_to(instant)
        return self.now()


@pytest.fixture
def frozen() -> Iterator[FrozenTime]:
    """Freeze the wall clock at :data:`T0` (tick=False); move it with shift/move_to."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield FrozenTime(traveller)


THOROUGH = os.environ.get("HEXERACT_THOROUGH", "") not in ("", "0")
"""``HEXERACT_THOROUGH=1``: the property tests run :func:`examples`' long count."""


def examples(n: int) -> int:
    """A property test's Hypothesis ``max_examples``: ``n``, enough to find what it looks
    for in the regular run, or four times as many under :data:`THOROUGH`."""
    return 4 * n if THOROUGH else n


StoreFactory = Callable[[Path], ScheduleStore]


def _memory(tmp_path: Path) -> ScheduleStore:
    return InMemoryScheduleStore()


STORE_FACTORIES: dict[str, StoreFactory] = {"memory": _memory}
"""Every store the contract suite runs on; each store module adds its factory here."""


def _sqlite(tmp_path: Path) -> ScheduleStore:
    return SqliteScheduleStore.open(tmp_path / "contract.db")


def _sqlite3(tmp_path: Path) -> ScheduleStore:
    return SqliteScheduleStore.open(tmp_path / "contract.db", driver="sqlite3")


STORE_FACTORIES["sqlite"] = _sqlite
STORE_FACTORIES["sqlite3"] = _sqlite3  # the same store on the standard library's sqlite3


def _postgres_factory() -> StoreFactory | None:
    try:
        from tests.pg import postgres_store_factory
    except ImportError:
        return None
    return postgres_store_factory()


_pg = _postgres_factory()
if _pg is not None:
    STORE_FACTORIES["postgres"] = _pg


def _mysql_factory() -> StoreFactory | None:
    try:
        from tests.mysql import mysql_store_factory
    except ImportError:
        return None
    return mysql_store_factory()


_my = _mysql_factory()
if _my is not None:
    STORE_FACTORIES["mysql"] = _my


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(
    request: pytest.FixtureRequest, tmp_path: Path, frozen: FrozenTime
) -> Iterator[ScheduleStore]:
    """Each store of :data:`STORE_FACTORIES`, fresh, on a frozen clock."""
    factory = STORE_FACTORIES[request.param]
    s = factory(tmp_path)
    try:
        yield s
    finally:
        s.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the selected tests' background runs (:mod:`tests.background`), except in
    a pytest-xdist worker: it collects every test but runs only those it is sent, and
    the other worker already overlaps their waiting."""
    if session.config.option.collectonly or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    from tests import background

    modules = {getattr(item, "module", None) for item in session.items} - {None}
    background.start(background.offered(modules, session.items))


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests import background

    background.finish()
