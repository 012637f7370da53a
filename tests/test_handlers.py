"""EventRouterSink: handlers by event type (exact names and globs, decorator or mapping,
sync and async), an unknown event type a failed dispatch naming it; through the worker
and through ``hexeract scheduler worker --sink``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from hexeract_lite import DispatchError, InvalidArgument, ScheduledMessage, ScheduleStore, Target
from hexeract_lite.cli.commands.worker import load_sink
from hexeract_lite.handlers import EventRouterSink
from hexeract_lite.snapshot import ScheduleSnapshot
from hexeract_lite.worker import CycleReport, SchedulerWorker, SchedulerWorkerConfig

from .conftest import T0, FrozenTime


def msg(event_type: str) -> ScheduledMessage:
    return ScheduledMessage.delay(Target.mediator(), T0, event_type, {"e": event_type})


def test_exact_names_win_then_globs_in_registration_order() -> None:
    seen: list[tuple[str, str]] = []
    router = EventRouterSink({"reminders.daily": lambda m: seen.append(("exact", m.event_type))})

    @router.on("reminders.*")
    def any_reminder(m: ScheduledMessage) -> None:
        seen.append(("glob", m.event_type))

    router.add("*", lambda m: seen.append(("all", m.event_type)))
    for event_type in ("reminders.daily", "reminders.weekly.monday", "backup"):
        assert router.dispatch(msg(event_type)) is None
    assert seen == [
        ("exact", "reminders.daily"),
        ("glob", "reminders.weekly.monday"),
        ("all", "backup"),
    ]
    assert router.handler_for("reminders.x") is any_reminder


def test_an_unknown_event_type_is_a_failed_dispatch_naming_it() -> None:
    router = EventRouterSink({"a": lambda m: None})
    with pytest.raises(DispatchError, match="no handler for event type 'b'"):
        router.dispatch(msg("b"))


@pytest.mark.parametrize(
    ("pattern", "handler", "match"),
    [
        ("", lambda m: None, "non-empty"),
        ("x", 42, "not callable"),
        ("a", lambda m: None, "already"),
    ],
)
def test_bad_registrations_are_refused(pattern: str, handler: Any, match: str) -> None:
    router = EventRouterSink({"a": lambda m: None})
    with pytest.raises(InvalidArgument, match=match):
        router.add(pattern, handler)
    with pytest.raises(InvalidArgument, match="mapping"):
        EventRouterSink([("a", print)])  # type: ignore[arg-type]


def test_an_async_handler_returns_its_awaitable() -> None:
    seen: list[str] = []
    router = EventRouterSink()

    @router.on("job.*")
    async def job(m: ScheduledMessage) -> None:
        seen.append(m.event_type)

    pending = router.dispatch(msg("job.one"))
    assert pending is not None
    asyncio.run(pending)  # type: ignore[arg-type]
    assert seen == ["job.one"]


def test_through_the_worker_sync_async_and_unknown(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    seen: list[str] = []
    router = EventRouterSink()

    @router.on("sync.job")
    def sync_job(m: ScheduledMessage) -> None:
        seen.append(m.event_type)

    @router.on("async.*")
    async def async_job(m: ScheduledMessage) -> None:
        seen.append(m.event_type)

    store.insert_many([msg("sync.job"), msg("async.one"), msg("nobody")], 3)
    report = SchedulerWorker(store, router, SchedulerWorkerConfig(jitter=False)).run_once()
    assert report == CycleReport(claimed=3, delivered=2, retried=1)
    assert sorted(seen) == ["async.one", "sync.job"]
    [pending] = store.list_pending()
    assert isinstance(pending, ScheduleSnapshot)
    assert (
        pending.last_error is not None
        and "no handler for event type 'nobody'" in pending.last_error
    )


def test_a_router_of_async_handlers_runs_them_on_the_loop_of_run_async() -> None:
    """Every handler async: under ``run_async`` they run on the worker's own loop, and
    one past ``dispatch_timeout`` is cancelled there (not left running on a thread)."""
    from datetime import UTC, datetime, timedelta

    from hexeract_lite import InMemoryScheduleStore

    router = EventRouterSink()
    seen: list[object] = []

    @router.on("quick")
    async def quick(m: ScheduledMessage) -> None:
        seen.append(asyncio.get_running_loop())

    @router.on("slow")
    async def slow(m: ScheduledMessage) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    assert router.is_async
    store = InMemoryScheduleStore()
    due = datetime.now(UTC) - timedelta(seconds=1)
    store.insert_many(
        [ScheduledMessage.delay(Target.mediator(), due, e, {}) for e in ("quick", "slow")], 3
    )
    config = SchedulerWorkerConfig(
        dispatch_timeout=timedelta(milliseconds=300), poll_interval=timedelta(milliseconds=20)
    )

    async def main() -> object:
        stop = asyncio.Event()
        task = asyncio.create_task(SchedulerWorker(store, router, config).run_async(stop))
        for _ in range(500):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await task
        return asyncio.get_running_loop()

    loop = asyncio.run(main())
    assert sorted(seen, key=str) == sorted([loop, "cancelled"], key=str)


def test_a_router_with_a_sync_handler_is_not_async() -> None:
    router = EventRouterSink()
    assert not router.is_async, "no handler yet"

    async def job(m: ScheduledMessage) -> None: ...

    router.add("a", job)
    router.add("b", lambda m: None)
    assert not router.is_async, "a sync handler among them: it runs on a dispatch thread"


def test_usable_from_the_worker_commands_sink_option(tmp_path: Path) -> None:
    """``hexeract scheduler worker --sink app_router:router`` loads the router as it is."""
    (tmp_path / "app_router_13.py").write_text(
        "from hexeract_lite import EventRouterSink\n"
        "router = EventRouterSink()\n"
        "@router.on('reminders.*')\n"
        "def remind(message):\n"
        "    return None\n"
    )
    try:
        sink = load_sink("app_router_13:router", str(tmp_path))
    finally:
        sys.modules.pop("app_router_13", None)
    assert isinstance(sink, EventRouterSink)
    assert sink.dispatch(msg("reminders.daily")) is None
    with pytest.raises(DispatchError, match="'other'"):
        sink.dispatch(msg("other"))
