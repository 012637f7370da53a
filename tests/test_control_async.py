"""SchedulerControl.schedule_async / schedule_many_async: the store call off the loop."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hexeract_lite import (
    DuplicateSchedule,
    ScheduledMessage,
    SchedulerControl,
    SqliteScheduleStore,
    Target,
)
from hexeract_lite.store.base import ScheduleStore

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _message(n: int = 0) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), AT, "reminder.due", {"n": n})


def test_schedule_async_stores_the_message_on_another_thread(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "s.db") as store:
        threads: list[str] = []
        insert = store.insert

        def spy(message: ScheduledMessage, max_attempts: int) -> None:
            threads.append(threading.current_thread().name)
            insert(message, max_attempts)

        store.insert = spy  # type: ignore[method-assign,assignment]
        control = SchedulerControl(store)
        message = _message()

        async def main() -> None:
            assert await control.schedule_async(message, max_attempts=3) == message.schedule_id

        asyncio.run(main())
        assert threads and threads[0] != threading.main_thread().name
        snap = control.inspect(message.schedule_id)
        assert (snap.status.value, snap.max_attempts) == ("pending", 3)


def test_schedule_async_raises_what_schedule_raises(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "s.db") as store:
        control = SchedulerControl(store)
        message = _message()
        control.schedule(message)
        with pytest.raises(DuplicateSchedule):
            asyncio.run(control.schedule_async(message))


def test_schedule_many_async_is_all_or_nothing(tmp_path: Path) -> None:
    with SqliteScheduleStore.open(tmp_path / "s.db") as store:
        control = SchedulerControl(store)
        first, second = _message(1), _message(2)
        ids = asyncio.run(control.schedule_many_async([first, second]))
        assert ids == [first.schedule_id, second.schedule_id]
        with pytest.raises(DuplicateSchedule):
            asyncio.run(control.schedule_many_async([_message(3), first]))
        assert len(store.list_pending()) == 2
        assert isinstance(store, ScheduleStore)
