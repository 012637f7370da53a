"""Sinks: CallableSink, BusSink, InProcessBus topic patterns, TargetRouterSink."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import (
    DispatchError,
    InMemoryScheduleStore,
    InvalidArgument,
    LeasedOccurrence,
    ScheduledMessage,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.settle import DispatchResult
from hexeract_lite.sinks import (
    BusMessage,
    BusSink,
    CallableSink,
    InProcessBus,
    OccurrenceSink,
    ScheduleSink,
    TargetRouterSink,
    is_async_sink,
    topic_matches,
)
from hexeract_lite.worker import CycleReport, SchedulerWorker, SchedulerWorkerConfig

from .conftest import T0, FrozenTime


def message(target: Target, payload: Any = None) -> ScheduledMessage:
    return ScheduledMessage.delay(target, T0, "reminder.due", payload or {"text": "stretch"})


# -- CallableSink ------------------------------------------------------------------------


def test_callable_sink_calls_the_function_and_knows_sync_from_async() -> None:
    got: list[ScheduledMessage] = []
    sink = CallableSink(got.append)
    msg = message(Target.outbox())
    assert sink.dispatch(msg) is None and got == [msg]
    assert sink.is_async is False and not is_async_sink(sink)

    async def handler(m: ScheduledMessage) -> None:
        got.append(m)

    asink = CallableSink(handler)
    assert asink.is_async is True and is_async_sink(asink)
    asyncio.run(asink.dispatch(msg))  # type: ignore[arg-type]
    assert got == [msg, msg]

    class AsyncCallable:
        async def __call__(self, m: ScheduledMessage) -> None:
            pass

    assert CallableSink(AsyncCallable()).is_async is True
    assert isinstance(sink, ScheduleSink)
    with pytest.raises(InvalidArgument):
        CallableSink(42)  # type: ignore[arg-type]


def test_a_class_with_async_dispatch_is_an_async_sink() -> None:
    class Mine:
        async def dispatch(self, message: ScheduledMessage) -> None:
            pass

    class Plain:
        def dispatch(self, message: ScheduledMessage) -> None:
            pass

    assert is_async_sink(Mine()) and not is_async_sink(Plain())


def test_an_occurrence_sink_is_handed_occurrences_even_with_an_async_dispatch() -> None:
    """Under ``run_async()`` too: its ``dispatch`` is never awaited in place of
    ``dispatch_occurrence``, which settles the occurrence itself."""
    calls: list[str] = []

    class Mine(OccurrenceSink):
        async def dispatch(self, message: ScheduledMessage) -> None:  # type: ignore[override]
            calls.append("dispatch")

        def dispatch_occurrence(self, occurrence: LeasedOccurrence) -> DispatchResult:
            calls.append("dispatch_occurrence")
            return DispatchResult.failed(RuntimeError("settled by the sink"))

    assert not is_async_sink(Mine())
    store = InMemoryScheduleStore()
    store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "e", {}), 1)
    worker = SchedulerWorker(store, Mine())

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run_async(stop))
        for _ in range(500):
            if calls:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    assert calls == ["dispatch_occurrence"]


# -- BusSink -----------------------------------------------------------------------------


class RecordingTransport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, uuid.UUID, str, Any]] = []

    def publish_raw(
        self, routing_key: str, message_id: uuid.UUID, message_type: str, payload: Any
    ) -> None:
        self.calls.append((routing_key, message_id, message_type, payload))


def test_bus_sink_stamps_the_occurrence_id_as_message_id() -> None:
    transport = RecordingTransport()
    msg = message(Target.bus("reminders.once"), {"text": "hi", "n": [1, 2]})
    assert BusSink(transport).dispatch(msg) is None
    [(key, message_id, message_type, payload)] = transport.calls
    assert key == "reminders.once"
    assert message_id == msg.occurrence_id().as_uuid()
    assert isinstance(message_id, uuid.UUID)
    assert message_type == "reminder.due"
    assert payload == {"text": "hi", "n": [1, 2]}


@pytest.mark.parametrize("target", [Target.outbox(), Target.mediator()])
def test_bus_sink_refuses_a_non_bus_target(target: Target) -> None:
    transport = RecordingTransport()
    with pytest.raises(DispatchError, match=f"targets {target.kind}"):
        BusSink(transport).dispatch(message(target))
    assert transport.calls == []


def test_bus_sink_needs_a_transport() -> None:
    with pytest.raises(InvalidArgument, match="publish_raw"):
        BusSink(object())  # type: ignore[arg-type]


def test_bus_sink_with_an_async_transport_is_async() -> None:
    class AsyncTransport:
        def __init__(self) -> None:
            self.ids: list[uuid.UUID] = []

        async def publish_raw(
            self, routing_key: str, message_id: uuid.UUID, message_type: str, payload: Any
        ) -> None:
            self.ids.append(message_id)

    transport = AsyncTransport()
    sink = BusSink(transport)
    assert sink.is_async
    msg = message(Target.bus("a"))
    asyncio.run(sink.dispatch(msg))  # type: ignore[arg-type]
    assert transport.ids == [msg.occurrence_id().as_uuid()]


# -- InProcessBus ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("orders.created", "orders.created", True),
        ("orders.created", "orders.updated", False),
        ("orders.created", "orders.created.eu", False),
        ("orders.*", "orders.created", True),
        ("orders.*", "orders", False),
        ("orders.*", "orders.eu.created", False),
        ("*.created", "orders.created", True),
        ("*", "orders", True),
        ("*", "orders.created", False),
        ("orders.#", "orders", True),
        ("orders.#", "orders.created", True),
        ("orders.#", "orders.eu.created", True),
        ("orders.#", "payments.created", False),
        ("#", "anything.at.all", True),
        ("#", "x", True),
        ("#.created", "created", True),
        ("#.created", "orders.eu.created", True),
        ("#.created", "orders.eu.updated", False),
        ("orders.#.created", "orders.created", True),
        ("orders.#.created", "orders.eu.west.created", True),
        ("orders.*.created", "orders.created", False),
        ("*.*", "a.b", True),
        ("#.#", "a.b.c", True),
        ("a.#.b.*", "a.x.b.y", True),
        ("a.#.b.*", "a.b.y.z", False),
    ],
)
def test_topic_patterns(pattern: str, key: str, matches: bool) -> None:
    assert topic_matches(pattern, key) is matches


@pytest.mark.parametrize("pattern", ["", "orders.*created", "a.b#", 42])
def test_bad_patterns_are_rejected(pattern: Any) -> None:
    with pytest.raises(InvalidArgument, match="pattern"):
        InProcessBus().subscribe(pattern, lambda m: None)


def test_bus_delivers_to_every_matching_handler_in_order() -> None:
    bus = InProcessBus()
    seen: list[tuple[str, BusMessage]] = []
    bus.subscribe("reminders.#", lambda m: seen.append(("all", m)))
    bus.subscribe("reminders.once", lambda m: seen.append(("once", m)))
    bus.subscribe("other.*", lambda m: seen.append(("other", m)))
    mid = uuid.uuid4()
    assert bus.publish_raw("reminders.once", mid, "t", {"a": 1}) is None
    assert [name for name, _ in seen] == ["all", "once"]
    assert seen[0][1] == BusMessage(
        message_id=mid, message_type="t", routing_key="reminders.once", payload={"a": 1}
    )


def test_unsubscribe() -> None:
    bus = InProcessBus(drop_unrouted=True)
    seen: list[BusMessage] = []
    unsubscribe = bus.subscribe("a", seen.append)
    bus.publish_raw("a", uuid.uuid4(), "t", None)
    unsubscribe()
    unsubscribe()
    bus.publish_raw("a", uuid.uuid4(), "t", None)
    assert len(seen) == 1 and bus.dropped == 1


def test_unrouted_publish_fails_unless_told_to_drop() -> None:
    with pytest.raises(DispatchError, match=r"no subscriber for routing key 'nobody\.home'"):
        InProcessBus().publish_raw("nobody.home", uuid.uuid4(), "t", None)
    bus = InProcessBus(drop_unrouted=True)
    assert bus.publish_raw("nobody.home", uuid.uuid4(), "t", None) is None
    assert bus.dropped == 1


def test_a_raising_handler_makes_publish_raise_after_the_others_ran() -> None:
    bus = InProcessBus()
    seen: list[str] = []

    def bad(m: BusMessage) -> None:
        raise ValueError("handler broke")

    bus.subscribe("k", bad)
    bus.subscribe("k", lambda m: seen.append("good"))
    with pytest.raises(ValueError, match="handler broke"):
        bus.publish_raw("k", uuid.uuid4(), "t", None)
    assert seen == ["good"]
    bus.subscribe("#", bad)
    with pytest.raises(DispatchError, match="2 bus handlers failed") as info:
        bus.publish_raw("k", uuid.uuid4(), "t", None)
    assert isinstance(info.value.__cause__, ValueError)


def test_a_handler_returning_a_value_is_a_failure() -> None:
    bus = InProcessBus()
    bus.subscribe("k", lambda m: True)  # type: ignore[arg-type,return-value]
    with pytest.raises(DispatchError, match="returned True"):
        bus.publish_raw("k", uuid.uuid4(), "t", None)


def test_an_async_handler_resolving_to_a_value_is_a_failure_naming_the_handler() -> None:
    bus = InProcessBus()

    async def counts_instead(m: BusMessage) -> int:
        return 3

    bus.subscribe("k", counts_instead)  # type: ignore[arg-type]
    pending = bus.publish_raw("k", uuid.uuid4(), "t", None)
    assert pending is not None
    with pytest.raises(DispatchError, match="bus handler <function test_an_async_") as info:
        asyncio.run(pending)  # type: ignore[arg-type]
    assert "returned 3" in str(info.value) and "coroutine" not in str(info.value)


def test_async_handlers_are_awaited_through_the_returned_awaitable() -> None:
    bus = InProcessBus()
    seen: list[str] = []

    async def ahandler(m: BusMessage) -> None:
        await asyncio.sleep(0)
        seen.append("async")

    bus.subscribe("k", ahandler)
    bus.subscribe("k", lambda m: seen.append("sync"))
    pending = bus.publish_raw("k", uuid.uuid4(), "t", None)
    assert pending is not None and seen == ["sync"]
    asyncio.run(pending)  # type: ignore[arg-type]
    assert seen == ["sync", "async"]


def test_a_sync_failure_closes_the_async_handlers_coroutines() -> None:
    bus = InProcessBus()

    async def ahandler(m: BusMessage) -> None:
        raise AssertionError("never runs")

    def bad(m: BusMessage) -> None:
        raise KeyError("x")

    bus.subscribe("k", ahandler)
    bus.subscribe("k", bad)
    with pytest.raises(KeyError):  # and no "coroutine was never awaited" warning
        bus.publish_raw("k", uuid.uuid4(), "t", None)


# -- the bus through the worker ------------------------------------------------------------


def test_a_bus_handler_failure_is_retried_and_dedup_works_on_the_message_id(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    bus = InProcessBus()
    processed: dict[uuid.UUID, int] = {}
    deliveries: list[uuid.UUID] = []
    fail_next = [True]

    def handler(m: BusMessage) -> None:
        deliveries.append(m.message_id)
        if m.message_id in processed:
            return  # a redelivery: already handled
        if fail_next[0]:
            fail_next[0] = False
            raise ConnectionError("flaky")
        processed[m.message_id] = processed.get(m.message_id, 0) + 1

    bus.subscribe("reminders.*", handler)
    msg = message(Target.bus("reminders.once"))
    store.insert(msg, 3)
    worker = SchedulerWorker(store, BusSink(bus), SchedulerWorkerConfig(jitter=False))
    assert worker.run_once() == CycleReport(claimed=1, retried=1)
    frozen.shift(timedelta(seconds=2))
    assert worker.run_once() == CycleReport(claimed=1, delivered=1)
    oid = msg.occurrence_id().as_uuid()
    assert deliveries == [oid, oid]
    assert processed == {oid: 1}
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DELIVERED


def test_an_unrouted_bus_message_is_not_lost(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = message(Target.bus("nobody.listens"))
    store.insert(msg, 2)
    worker = SchedulerWorker(store, BusSink(InProcessBus()))
    assert worker.run_once().retried == 1
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.last_error is not None
    assert snap.last_error.startswith("DispatchError: no subscriber for routing key")


# -- TargetRouterSink ----------------------------------------------------------------------


def test_router_sends_each_target_kind_to_its_sink() -> None:
    got: dict[str, list[ScheduledMessage]] = {"mediator": [], "outbox": [], "bus": []}
    router = TargetRouterSink(
        mediator=got["mediator"].append,
        outbox=CallableSink(got["outbox"].append),
        bus=got["bus"].append,
    )
    for target in (Target.mediator(), Target.outbox(), Target.bus("x.y")):
        router.dispatch(message(target))
    assert {k: [m.target.kind for m in v] for k, v in got.items()} == {
        "mediator": ["mediator"],
        "outbox": ["outbox"],
        "bus": ["bus"],
    }


def test_router_without_a_sink_for_a_target_fails_the_dispatch() -> None:
    router = TargetRouterSink(outbox=lambda m: None)
    with pytest.raises(DispatchError, match="no sink for target bus:x"):
        router.dispatch(message(Target.bus("x")))
    with pytest.raises(InvalidArgument, match="mediator"):
        TargetRouterSink(mediator=42)  # type: ignore[arg-type]


def test_router_with_bus_and_async_sinks_through_the_worker(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    bus = InProcessBus()
    on_bus: list[BusMessage] = []
    bus.subscribe("#", on_bus.append)
    mediated: list[ScheduledMessage] = []

    async def mediator(m: ScheduledMessage) -> None:
        mediated.append(m)

    to_bus = message(Target.bus("a.b"))
    to_mediator = message(Target.mediator())
    to_outbox = message(Target.outbox())
    store.insert_many([to_bus, to_mediator, to_outbox], 3)
    router = TargetRouterSink(mediator=CallableSink(mediator), bus=BusSink(bus))
    report = SchedulerWorker(store, router).run_once()
    assert report == CycleReport(claimed=3, delivered=2, retried=1)
    assert [m.message_id for m in on_bus] == [to_bus.occurrence_id().as_uuid()]
    assert [m.schedule_id for m in mediated] == [to_mediator.schedule_id]
    snap = store.inspect(to_outbox.schedule_id)
    assert snap is not None and snap.last_error is not None and "no sink" in snap.last_error


def test_each_bus_handler_gets_its_own_copy_of_the_payload() -> None:
    bus = InProcessBus()
    seen: list[Any] = []

    def greedy(m: BusMessage) -> None:
        m.payload["items"].append("added by the first handler")
        m.payload["new"] = True

    async def later(m: BusMessage) -> None:
        seen.append(m.payload)

    bus.subscribe("k", greedy)
    bus.subscribe("k", lambda m: seen.append(m.payload))
    bus.subscribe("k", later)
    published = {"items": [1, 2]}
    pending = bus.publish_raw("k", uuid.uuid4(), "t", published)
    asyncio.run(pending)  # type: ignore[arg-type]
    assert seen == [{"items": [1, 2]}, {"items": [1, 2]}]
    assert seen[0] is not seen[1]
    assert published == {"items": [1, 2]}  # nor does the publisher see it
