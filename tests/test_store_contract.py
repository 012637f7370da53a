"""The store contract (hexeract_lite.store.base), run against every store.

Each test names the rule it checks. The suite never looks inside a store: only the
contract's methods and their results.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from hexeract_lite import (
    DuplicateSchedule,
    InMemoryScheduleStore,
    InvalidArgument,
    InvalidConfiguration,
    LeasedOccurrence,
    NotReplayable,
    ScheduledMessage,
    ScheduleNotFound,
    SchedulerControl,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.settlement import Settlement, SettlementKind
from hexeract_lite.store import SWEEP_ERROR
from hexeract_lite.store.base import SWEEP_KEPT
from tests.conftest import STORE_FACTORIES

from .conftest import T0, FrozenTime

LEASE = timedelta(seconds=30)
S = timedelta(seconds=1)


def one_shot(
    at: datetime = T0, *, event_type: str = "reminder", payload: object = None
) -> ScheduledMessage:
    return ScheduledMessage.delay(
        Target.mediator(), at, event_type, {"n": 1} if payload is None else payload
    )


def every_minute(first: datetime = T0) -> ScheduledMessage:
    return ScheduledMessage.cron(Target.bus("reminders.tick"), "* * * * *", first, "tick", [1, 2])


def status(store: ScheduleStore, sid: uuid.UUID) -> ScheduleStatus:
    snap = store.inspect(sid)
    assert snap is not None
    return snap.status


# -- insert ------------------------------------------------------------------


def test_insert_then_inspect_round_trips_every_field(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = ScheduledMessage.delay(Target.bus("a.b"), T0 + 5 * S, "ev", {"x": [1, "é", None, 2.5]})
    store.insert(msg, 3)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.schedule_id == msg.schedule_id
    assert snap.status is ScheduleStatus.PENDING
    assert snap.scheduled_for == T0 + 5 * S
    assert snap.attempts == 0 and snap.max_attempts == 3
    assert snap.trigger == msg.trigger
    assert snap.target == Target.bus("a.b")
    assert snap.event_type == "ev"
    assert snap.last_error is None and snap.leased_until is None
    assert snap.created_at == T0
    assert snap.delivered_at is None and snap.cancelled_at is None and snap.dead_lettered_at is None
    assert snap.payload_json == msg.payload_json


def test_a_store_opened_for_writing_says_it_is_not_readonly(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    assert store.readonly is False


def test_a_store_opened_readonly_says_so(tmp_path: Path, frozen: FrozenTime) -> None:
    from hexeract_lite import open_store

    open_store(str(tmp_path / "ro.db")).close()
    with open_store(str(tmp_path / "ro.db"), readonly=True) as store:
        assert store.readonly is True


def test_an_insert_reads_the_clock_once(
    store: ScheduleStore, frozen: FrozenTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Placement and ``created_at`` come from one reading, for one message or a batch."""
    cron, batch = every_minute(), [one_shot(), one_shot()]
    reads: list[datetime] = []
    clock_type = type(store.clock)
    read = clock_type.now

    def counted(self: object) -> datetime:
        reads.append(read(self))  # type: ignore[arg-type]
        return reads[-1]

    monkeypatch.setattr(clock_type, "now", counted)
    store.insert(cron, 3)
    assert len(reads) == 1
    reads.clear()
    store.insert_many(batch, 3)
    assert len(reads) == 1


def test_inspect_unknown_is_none(store: ScheduleStore, frozen: FrozenTime) -> None:
    assert store.inspect(uuid.uuid4()) is None


def test_insert_existing_id_is_an_error_and_changes_nothing(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    twin = ScheduledMessage.delay(Target.outbox(), T0 + S, "other", 1, schedule_id=msg.schedule_id)
    with pytest.raises(DuplicateSchedule) as info:
        store.insert(twin, 5)
    assert info.value.schedule_id == msg.schedule_id
    assert str(info.value) == f"schedule {msg.schedule_id} already exists"
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.max_attempts == 3 and snap.event_type == "reminder"
    named = ScheduledMessage.delay(Target.outbox(), T0 + S, "e", {}, name="app.daily")
    store.insert(named, 1)
    for insert in (store.insert, lambda m, n: store.insert_many([one_shot(), m], n)):
        with pytest.raises(DuplicateSchedule) as info:
            insert(named, 1)
        assert info.value.name == "app.daily", "named: a name is what the user gave"
        assert str(info.value) == (
            f"a schedule named 'app.daily' already exists (id {named.schedule_id})"
        )


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_max_attempts_must_be_at_least_one(
    store: ScheduleStore, frozen: FrozenTime, bad: object
) -> None:
    msg = one_shot()
    with pytest.raises(InvalidConfiguration, match="max_attempts"):
        store.insert(msg, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="max_attempts"):
        store.insert_many([msg], bad)  # type: ignore[arg-type]
    assert store.inspect(msg.schedule_id) is None


def test_insert_many_inserts_all(store: ScheduleStore, frozen: FrozenTime) -> None:
    msgs = [one_shot(T0 + i * S) for i in range(20)]
    store.insert_many(msgs, 2)
    assert [s.schedule_id for s in store.list_pending(100)] == [m.schedule_id for m in msgs]


def test_insert_many_is_all_or_nothing(store: ScheduleStore, frozen: FrozenTime) -> None:
    existing = one_shot()
    store.insert(existing, 1)
    fresh = [one_shot(T0 + i * S) for i in range(5)]
    with pytest.raises(DuplicateSchedule):
        store.insert_many([*fresh, existing], 3)
    for m in fresh:
        assert store.inspect(m.schedule_id) is None
    dup_in_batch = one_shot()
    with pytest.raises(DuplicateSchedule):
        store.insert_many([dup_in_batch, one_shot(), dup_in_batch], 3)
    assert store.inspect(dup_in_batch.schedule_id) is None
    assert len(store.list_pending(100)) == 1


def test_insert_many_empty_is_a_no_op(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.insert_many([], 3)
    assert store.list_pending() == []


# -- claim ---------------------------------------------------------------------


def test_claim_returns_only_due_rows_oldest_first(store: ScheduleStore, frozen: FrozenTime) -> None:
    late = one_shot(T0 - 1 * S)
    early = one_shot(T0 - 10 * S)
    exact = one_shot(T0)
    future = one_shot(T0 + 1 * S)
    store.insert_many([late, future, exact, early], 3)
    claimed = store.claim_due(frozen.now(), 10, LEASE)
    assert [c.message.schedule_id for c in claimed] == [
        early.schedule_id,
        late.schedule_id,
        exact.schedule_id,
    ]


def test_claim_ties_break_by_schedule_id(store: ScheduleStore, frozen: FrozenTime) -> None:
    msgs = [one_shot(T0) for _ in range(8)]
    store.insert_many(msgs, 3)
    claimed = store.claim_due(frozen.now(), 10, LEASE)
    assert [c.message.schedule_id for c in claimed] == sorted(m.schedule_id for m in msgs)


def test_claim_orders_a_jittered_row_by_when_it_is_due(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A jittered firing is due at its rule's instant plus its offset, and a claim orders
    it by that: after a plain row of the same rule instant, though its id is smaller."""
    first = T0 - timedelta(minutes=2)
    small, large = uuid.UUID(int=1), uuid.UUID(int=2**128 - 1)
    rule = "* * * * *"
    jittered = ScheduledMessage.cron(
        Target.outbox(), rule, first, "jittered", 1, schedule_id=small, jitter=timedelta(seconds=30)
    )
    plain = ScheduledMessage.cron(Target.outbox(), rule, first, "plain", 1, schedule_id=large)
    store.insert_many([jittered, plain], 3)
    snaps = [store.inspect(small), store.inspect(large)]
    assert snaps[0] is not None and snaps[1] is not None
    assert snaps[0].scheduled_for > snaps[1].scheduled_for == first, "a positive offset"
    claimed = store.claim_due(frozen.now(), 10, LEASE)
    assert [c.message.event_type for c in claimed] == ["plain", "jittered"]


def test_claim_respects_batch_size(store: ScheduleStore, frozen: FrozenTime) -> None:
    store.insert_many([one_shot(T0 - i * S) for i in range(5)], 3)
    assert len(store.claim_due(frozen.now(), 2, LEASE)) == 2
    assert len(store.claim_due(frozen.now(), 2, LEASE)) == 2
    assert len(store.claim_due(frozen.now(), 2, LEASE)) == 1
    assert store.claim_due(frozen.now(), 2, LEASE) == []


def test_claim_advances_attempts_and_stamps_the_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.attempts == 1 and occ.max_attempts == 3
    assert occ.leased_until == T0 + LEASE
    assert occ.message == msg
    assert occ.occurrence_id() == msg.occurrence_id()
    assert not occ.is_exhausted()
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.attempts == 1 and snap.leased_until == T0 + LEASE
    assert snap.status is ScheduleStatus.PENDING


def test_claim_uses_the_now_it_is_given(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot(T0 + 60 * S)
    store.insert(msg, 3)
    assert store.claim_due(T0, 10, LEASE) == []
    [occ] = store.claim_due(T0 + 60 * S, 10, LEASE)
    assert occ.leased_until == T0 + 60 * S + LEASE


def test_live_lease_hides_the_occurrence_until_it_expires(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 5)
    first = store.claim_due(frozen.now(), 10, LEASE)
    assert len(first) == 1
    frozen.shift(LEASE - timedelta(milliseconds=1))
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    frozen.shift(timedelta(milliseconds=1))  # leased_until <= now: expired
    [again] = store.claim_due(frozen.now(), 10, LEASE)
    assert again.occurrence_id() == first[0].occurrence_id()
    assert again.attempts == 2, "a reclaim after expiry counts against the budget"
    assert again.leased_until == frozen.now() + LEASE


def test_exhausted_rows_are_not_claimed(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 2)
    for expected in (1, 2):
        [occ] = store.claim_due(frozen.now(), 10, LEASE)
        assert occ.attempts == expected
        frozen.shift(LEASE)
    assert occ.is_exhausted()
    assert store.claim_due(frozen.now(), 10, LEASE) == []


@pytest.mark.parametrize(
    ("batch_size", "lease"),
    [(0, LEASE), (-1, LEASE), (1, timedelta(0)), (1, -S), (True, LEASE)],
)
def test_claim_rejects_bad_arguments(
    store: ScheduleStore, frozen: FrozenTime, batch_size: int, lease: timedelta
) -> None:
    store.insert(one_shot(), 3)
    with pytest.raises(InvalidConfiguration):
        store.claim_due(frozen.now(), batch_size, lease)
    snap = store.list_pending()[0]
    assert isinstance(snap, ScheduleSnapshot)
    assert snap.attempts == 0 and snap.leased_until is None


def test_claim_rejects_a_naive_now(store: ScheduleStore, frozen: FrozenTime) -> None:
    with pytest.raises(InvalidArgument, match="naive"):
        store.claim_due(datetime(2026, 3, 1, 12), 1, LEASE)


# -- fenced acknowledgements ---------------------------------------------------


def test_mark_delivered(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    frozen.shift(2 * S)
    assert store.mark_delivered(msg.schedule_id, occ.leased_until) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.DELIVERED
    assert snap.delivered_at == T0 + 2 * S and snap.leased_until is None
    frozen.shift(LEASE * 2)
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    assert store.list_pending() == []


def _claim_then_steal(
    store: ScheduleStore, frozen: FrozenTime
) -> tuple[uuid.UUID, datetime, datetime]:
    """A worker claims, its lease expires, another worker reclaims: the first is a zombie."""
    msg = every_minute()
    store.insert(msg, 5)
    [stale] = store.claim_due(frozen.now(), 10, LEASE)
    frozen.shift(LEASE)
    [fresh] = store.claim_due(frozen.now(), 10, LEASE)
    assert fresh.leased_until != stale.leased_until
    return msg.schedule_id, stale.leased_until, fresh.leased_until


@pytest.mark.parametrize("ack", ["delivered", "reschedule", "failed", "dead_lettered"])
def test_every_ack_with_a_stale_lease_returns_false_and_changes_nothing(
    store: ScheduleStore, frozen: FrozenTime, ack: str
) -> None:
    sid, stale, fresh = _claim_then_steal(store, frozen)
    before = store.inspect(sid)
    if ack == "delivered":
        result = store.mark_delivered(sid, stale)
    elif ack == "reschedule":
        result = store.reschedule(sid, T0 + timedelta(hours=1), stale)
    elif ack == "failed":
        result = store.mark_failed(sid, 10 * S, "boom", stale)
    else:
        result = store.mark_dead_lettered(sid, "boom", stale)
    assert result is False
    assert store.inspect(sid) == before
    # the owner of the fresh lease still can acknowledge
    assert store.mark_delivered(sid, fresh) is True


@pytest.mark.parametrize("ack", ["delivered", "reschedule", "failed", "dead_lettered"])
def test_acks_on_unknown_ids_return_false(
    store: ScheduleStore, frozen: FrozenTime, ack: str
) -> None:
    sid = uuid.uuid4()
    calls = {
        "delivered": lambda: store.mark_delivered(sid, T0),
        "reschedule": lambda: store.reschedule(sid, T0, T0),
        "failed": lambda: store.mark_failed(sid, S, "x", T0),
        "dead_lettered": lambda: store.mark_dead_lettered(sid, "x", T0),
    }
    assert calls[ack]() is False


def test_acks_on_a_terminal_row_return_false(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    store.cancel(msg.schedule_id)
    assert store.mark_delivered(msg.schedule_id, occ.leased_until) is False
    assert store.mark_failed(msg.schedule_id, S, "x", occ.leased_until) is False
    assert status(store, msg.schedule_id) is ScheduleStatus.CANCELLED


def test_ack_with_an_unclaimed_row_returns_false(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    assert store.mark_delivered(msg.schedule_id, T0 + LEASE) is False
    assert status(store, msg.schedule_id) is ScheduleStatus.PENDING


def test_reschedule_resets_attempts_error_and_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.mark_failed(msg.schedule_id, timedelta(0), "first failure", occ.leased_until)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.attempts == 2
    nxt = T0 + timedelta(minutes=1)
    assert store.reschedule(msg.schedule_id, nxt, occ.leased_until) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.scheduled_for == nxt and snap.attempts == 0
    assert snap.last_error is None and snap.leased_until is None
    assert snap.status is ScheduleStatus.PENDING
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    frozen.move_to(nxt)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.message.scheduled_for == nxt and occ.attempts == 1
    assert occ.occurrence_id() != msg.occurrence_id()


def test_mark_failed_keeps_attempts_and_pushes_the_lease_out(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    frozen.shift(3 * S)
    assert store.mark_failed(msg.schedule_id, 10 * S, "ValueError: nope", occ.leased_until) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.attempts == 1
    assert snap.leased_until == T0 + 13 * S
    assert snap.last_error == "ValueError: nope"
    assert snap.status is ScheduleStatus.PENDING
    frozen.shift(10 * S - timedelta(milliseconds=1))
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    frozen.shift(timedelta(milliseconds=1))
    [again] = store.claim_due(frozen.now(), 10, LEASE)
    assert again.attempts == 2
    assert again.occurrence_id() == occ.occurrence_id()


def test_mark_failed_rejects_a_negative_delay(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    with pytest.raises(InvalidConfiguration, match="retry_in"):
        store.mark_failed(msg.schedule_id, -S, "x", occ.leased_until)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == occ.leased_until and snap.last_error is None


def test_mark_failed_refuses_a_retry_past_the_year_9999_naming_it(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """``timedelta.max`` is InvalidConfiguration naming retry_in, never a raw
    OverflowError."""
    msg = one_shot()
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    version = store.changes.version()
    with pytest.raises(InvalidConfiguration, match="retry_in") as info:
        store.mark_failed(msg.schedule_id, timedelta.max, "x", occ.leased_until)
    assert "days=999999999" in str(info.value), "names the value"
    with pytest.raises(InvalidConfiguration, match="retry_in"):
        store.settle(
            [
                Settlement.delivered(msg.schedule_id, occ.leased_until),
                Settlement.failed(msg.schedule_id, timedelta.max, "x", occ.leased_until),
            ]
        )
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == occ.leased_until and snap.last_error is None
    assert snap.status is ScheduleStatus.PENDING, "nothing written"
    assert store.changes.version() == version


def test_mark_dead_lettered(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.is_exhausted()
    frozen.shift(S)
    assert store.mark_dead_lettered(msg.schedule_id, "RuntimeError: poison", occ.leased_until)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.DEAD_LETTERED
    assert snap.dead_lettered_at == T0 + S
    assert snap.last_error == "RuntimeError: poison" and snap.leased_until is None
    frozen.shift(timedelta(days=1))
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    assert store.dead_letter_exhausted() == 0


# -- settle: a batch of acknowledgements -------------------------------------------


def _twins(
    store: ScheduleStore, frozen: FrozenTime, roles: list[str]
) -> dict[str, tuple[LeasedOccurrence, ...]]:
    """For each role, two schedules alike but for their ids, both claimed: one set is
    settled as a batch, the other through the single methods, to compare the results."""
    msgs: dict[str, tuple[ScheduledMessage, ScheduledMessage]] = {}
    for i, role in enumerate(roles):
        if role.startswith("reschedule"):
            pair = (every_minute(T0 - i * S), every_minute(T0 - i * S))
        else:
            pair = (one_shot(T0 - i * S), one_shot(T0 - i * S))
        msgs[role] = pair
        store.insert_many(list(pair), 3)
    claimed = {o.message.schedule_id: o for o in store.claim_due(frozen.now(), 100, LEASE)}
    assert len(claimed) == 2 * len(roles)
    return {role: (claimed[a.schedule_id], claimed[b.schedule_id]) for role, (a, b) in msgs.items()}


def _single(store: ScheduleStore, item: Settlement) -> bool:
    kind = item.kind
    if kind is SettlementKind.DELIVERED:
        return store.mark_delivered(item.schedule_id, item.lease)
    if kind is SettlementKind.RESCHEDULE:
        assert item.next is not None
        return store.reschedule(item.schedule_id, item.next, item.lease)
    if kind is SettlementKind.FAILED:
        assert item.retry_in is not None and item.error is not None
        return store.mark_failed(item.schedule_id, item.retry_in, item.error, item.lease)
    assert item.error is not None
    return store.mark_dead_lettered(item.schedule_id, item.error, item.lease)


def _settlement(role: str, occ: LeasedOccurrence) -> Settlement:
    sid, lease = occ.message.schedule_id, occ.leased_until
    if role.endswith("-stale"):
        lease = lease + timedelta(milliseconds=1)  # not the lease the row carries
    elif role.endswith("-naive"):
        lease = lease.replace(tzinfo=None)  # no stored lease can equal it
    if role.startswith("delivered") or role == "terminal":
        return Settlement.delivered(sid, lease)
    if role.startswith("reschedule"):
        return Settlement.reschedule(sid, T0 + timedelta(hours=1), lease)
    if role.startswith("failed"):
        return Settlement.failed(sid, 10 * S, "ValueError: nope", lease)
    return Settlement.dead_lettered(sid, "RuntimeError: poison", lease)


def _without_id(snap: ScheduleSnapshot | None) -> ScheduleSnapshot:
    assert snap is not None
    return attrs.evolve(snap, schedule_id=uuid.UUID(int=0))


def test_settle_applies_each_item_like_the_single_methods(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A mixed batch, fresh and stale leases interleaved (stale ones first, so that a
    fenced-out item is seen not to stop the rest): the same bools, in order, and the
    same rows as the single methods give."""
    roles = [
        "delivered-stale",
        "delivered",
        "failed-stale",
        "reschedule",
        "failed",
        "reschedule-stale",
        "dead_lettered",
        "dead_lettered-stale",
        "delivered-naive",
        "terminal",
        "failed-2",
    ]
    pairs = _twins(store, frozen, roles)
    for occ in pairs["terminal"]:
        store.cancel(occ.message.schedule_id)
    frozen.shift(2 * S)
    batch = [_settlement(role, pairs[role][0]) for role in roles]
    unknown = Settlement.failed(uuid.uuid4(), S, "x", T0 + LEASE)
    results = store.settle([*batch, unknown])
    singles = [_single(store, _settlement(role, pairs[role][1])) for role in roles]
    expected = [not role.endswith(("-stale", "-naive")) and role != "terminal" for role in roles]
    assert results == [*expected, False]
    assert singles == expected
    for role in roles:
        batched, single = pairs[role]
        assert _without_id(store.inspect(batched.message.schedule_id)) == _without_id(
            store.inspect(single.message.schedule_id)
        ), role
    failed = store.inspect(pairs["failed"][0].message.schedule_id)
    assert failed is not None and failed.leased_until == T0 + 12 * S, "now + retry_in"
    delivered = store.inspect(pairs["delivered"][0].message.schedule_id)
    assert delivered is not None and delivered.delivered_at == T0 + 2 * S
    assert store.inspect(unknown.schedule_id) is None


def test_settle_items_apply_in_order(store: ScheduleStore, frozen: FrozenTime) -> None:
    """A second item for the same occurrence is fenced out by the first (which consumed
    the lease), as two single calls would be."""
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    sid, lease = msg.schedule_id, occ.leased_until
    results = store.settle(
        [Settlement.failed(sid, 5 * S, "first", lease), Settlement.delivered(sid, lease)]
    )
    assert results == [True, False]
    snap = store.inspect(sid)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.last_error == "first" and snap.leased_until == T0 + 5 * S


def test_settle_of_an_empty_batch_is_a_no_op(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    assert len(store.claim_due(frozen.now(), 10, LEASE)) == 1
    before = store.inspect(msg.schedule_id)
    version = store.changes.version()
    assert store.settle([]) == []
    assert store.settle(()) == []
    assert store.inspect(msg.schedule_id) == before
    assert store.changes.version() == version


BAD_SETTLEMENTS: dict[str, tuple[Any, type[Exception]]] = {
    "negative retry_in": (
        lambda sid, at: Settlement.failed(sid, -S, "x", at),
        InvalidConfiguration,
    ),
    "no retry_in": (lambda sid, at: Settlement.failed(sid, None, "x", at), InvalidConfiguration),  # type: ignore[arg-type]
    "id not a UUID": (lambda sid, at: Settlement.delivered(str(sid), at), InvalidArgument),  # type: ignore[arg-type]
    "naive next": (
        lambda sid, at: Settlement.reschedule(sid, datetime(2026, 3, 2), at),
        InvalidArgument,
    ),
    "no next": (lambda sid, at: Settlement.reschedule(sid, None, at), InvalidArgument),  # type: ignore[arg-type]
    "unknown kind": (lambda sid, at: Settlement("bogus", sid, at), InvalidArgument),  # type: ignore[arg-type]
    "no error text": (lambda sid, at: Settlement.dead_lettered(sid, None, at), InvalidArgument),  # type: ignore[arg-type]
    "not a Settlement": (lambda sid, at: (sid, at), InvalidArgument),
}


@pytest.mark.parametrize("case", sorted(BAD_SETTLEMENTS))
def test_settle_rejects_a_bad_item_before_writing_anything(
    store: ScheduleStore, frozen: FrozenTime, case: str
) -> None:
    bad, error = BAD_SETTLEMENTS[case]
    first, second = one_shot(T0 - S), one_shot()
    store.insert_many([first, second], 3)
    occs = store.claim_due(frozen.now(), 10, LEASE)
    before = [store.inspect(o.message.schedule_id) for o in occs]
    version = store.changes.version()
    good = [Settlement.failed(o.message.schedule_id, S, "x", o.leased_until) for o in occs]
    with pytest.raises(error):
        store.settle([good[0], bad(second.schedule_id, occs[1].leased_until), good[1]])
    assert [store.inspect(o.message.schedule_id) for o in occs] == before
    assert store.changes.version() == version
    assert store.settle(good) == [True, True], "the leases are untouched"


def test_settle_notifies_changes_once_when_work_may_have_become_claimable(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msgs = [one_shot(T0 - i * S) for i in range(4)]
    store.insert_many(msgs, 3)
    occs = store.claim_due(frozen.now(), 10, LEASE)
    version = store.changes.version()
    delivered = [Settlement.delivered(o.message.schedule_id, o.leased_until) for o in occs[:2]]
    assert store.settle(delivered) == [True, True]
    assert store.changes.version() == version, "a delivery frees nothing to claim"
    retried = [Settlement.failed(o.message.schedule_id, S, "x", o.leased_until) for o in occs[2:]]
    assert store.settle(retried) == [True, True]
    assert store.changes.version() == version + 1, "once for the batch, after the commit"


class _SinglesOnly(ScheduleStore):
    """A store that only has the single acknowledgements (an in-memory store behind
    it): ``settle`` is the contract's default implementation."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = InMemoryScheduleStore()
        self.changes = self.inner.changes
        self.calls: list[str] = []

    def mark_delivered(self, schedule_id: uuid.UUID, lease: datetime) -> bool:
        self.calls.append("mark_delivered")
        return self.inner.mark_delivered(schedule_id, lease)

    def mark_failed(
        self, schedule_id: uuid.UUID, retry_in: timedelta, error: str, lease: datetime
    ) -> bool:
        self.calls.append("mark_failed")
        return self.inner.mark_failed(schedule_id, retry_in, error, lease)


for _name in ScheduleStore.__abstractmethods__ - {"mark_delivered", "mark_failed"}:
    setattr(
        _SinglesOnly,
        _name,
        lambda self, *args, _name=_name, **kwargs: getattr(self.inner, _name)(*args, **kwargs),
    )
_SinglesOnly.__abstractmethods__ = frozenset()


def test_the_default_settle_calls_the_single_methods_in_order(frozen: FrozenTime) -> None:
    store = _SinglesOnly()  # type: ignore[abstract]
    msgs = [one_shot(T0 - S), one_shot()]
    store.insert_many(msgs, 3)
    first, second = store.claim_due(frozen.now(), 10, LEASE)
    with pytest.raises(InvalidConfiguration):
        store.settle(
            [
                Settlement.delivered(msgs[0].schedule_id, first.leased_until),
                Settlement.failed(msgs[1].schedule_id, -S, "x", second.leased_until),
            ]
        )
    assert store.calls == [], "checked before anything is written"
    results = store.settle(
        [
            Settlement.failed(msgs[1].schedule_id, S, "x", second.leased_until),
            Settlement.delivered(msgs[0].schedule_id, first.leased_until + S),
            Settlement.delivered(msgs[0].schedule_id, first.leased_until),
        ]
    )
    assert results == [True, False, True]
    assert store.calls == ["mark_failed", "mark_delivered", "mark_delivered"]
    assert status(store, msgs[0].schedule_id) is ScheduleStatus.DELIVERED


@pytest.mark.parametrize(
    "make",
    [
        lambda sid, lease: Settlement.released(sid, lease),
        lambda sid, lease: Settlement.snoozed(sid, S, lease),
        lambda sid, lease: Settlement.cancelled(sid, lease),
    ],
    ids=["released", "snoozed", "cancelled"],
)
def test_the_default_settle_refuses_a_kind_without_a_single_method(
    frozen: FrozenTime, make: Callable[[uuid.UUID, datetime], Settlement]
) -> None:
    """Never dead-lettered by mistake: the whole batch is refused, naming the kind."""
    store = _SinglesOnly()  # type: ignore[abstract]
    msgs = [one_shot(T0 - S), one_shot()]
    store.insert_many(msgs, 3)
    first, second = store.claim_due(frozen.now(), 10, LEASE)
    item = make(msgs[1].schedule_id, second.leased_until)
    batch = [Settlement.delivered(msgs[0].schedule_id, first.leased_until), item]
    with pytest.raises(NotImplementedError, match=f"a {item.kind.value} settlement"):
        store.settle(batch)
    assert store.calls == [], "refused before anything is written"
    assert status(store, msgs[1].schedule_id) is ScheduleStatus.PENDING


# -- settle_and_claim ------------------------------------------------------------


def _delivered(occs: list[LeasedOccurrence]) -> list[Settlement]:
    return [Settlement.delivered(o.message.schedule_id, o.leased_until) for o in occs]


def test_settle_and_claim_settles_then_claims_like_the_two_calls(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msgs = [one_shot(T0 - i * S) for i in range(5)]
    store.insert_many(msgs, 3)
    first = store.claim_due(frozen.now(), 2, LEASE)
    frozen.shift(S)
    results, second = store.settle_and_claim(_delivered(first), frozen.now(), 2, LEASE)
    assert results == [True, True]
    assert [o.message.schedule_id for o in first] == [msgs[4].schedule_id, msgs[3].schedule_id]
    assert [o.message.schedule_id for o in second] == [msgs[2].schedule_id, msgs[1].schedule_id]
    assert all(o.leased_until == T0 + S + LEASE and o.attempts == 1 for o in second)
    for o in first:
        snap = store.inspect(o.message.schedule_id)
        assert snap is not None and snap.status is ScheduleStatus.DELIVERED
        assert snap.delivered_at == T0 + S and snap.leased_until is None
    results, third = store.settle_and_claim([], frozen.now(), 10, LEASE)
    assert results == [] and [o.message.schedule_id for o in third] == [msgs[0].schedule_id]


def test_settle_and_claim_can_claim_what_its_settlements_freed(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """The settlements apply first: an occurrence released (or retried at once) is
    claimable by the claim of the same call, with the attempt given back."""
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    version = store.changes.version()
    release = Settlement.released(msg.schedule_id, occ.leased_until)
    results, [again] = store.settle_and_claim([release], frozen.now(), 10, LEASE)
    assert results == [True]
    assert again.message.schedule_id == msg.schedule_id and again.attempts == 1
    assert store.changes.version() == version + 1, "a waking settlement notifies, once"


def test_settle_and_claim_fences_each_settlement_on_its_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A settlement whose lease is gone (cancelled, or claimed again after the lease
    ran out) is answered False and changes nothing; the others and the claim go on."""
    expired, fine, cancelled, waiting = (one_shot(T0 - i * S) for i in (3, 2, 1, 0))
    store.insert_many([cancelled, expired, fine], 3)
    occs = {o.message.schedule_id: o for o in store.claim_due(frozen.now(), 10, LEASE)}
    store.cancel(cancelled.schedule_id)
    frozen.shift(LEASE)
    [reclaimed] = store.claim_due(frozen.now(), 1, LEASE)  # the oldest lapsed lease
    assert reclaimed.message.schedule_id == expired.schedule_id
    store.insert(waiting, 3)
    stale = _delivered([occs[cancelled.schedule_id], occs[expired.schedule_id]])
    results, claimed = store.settle_and_claim(
        [*stale, *_delivered([occs[fine.schedule_id]])], frozen.now(), 10, LEASE
    )
    assert results == [False, False, True]
    assert [o.message.schedule_id for o in claimed] == [waiting.schedule_id]
    assert status(store, cancelled.schedule_id) is ScheduleStatus.CANCELLED
    snap = store.inspect(expired.schedule_id)
    assert snap is not None and snap.leased_until == reclaimed.leased_until, "still claimed"
    assert status(store, fine.schedule_id) is ScheduleStatus.DELIVERED


@pytest.mark.parametrize("bad", ["settlement", "batch_size", "lease"])
def test_settle_and_claim_checks_everything_before_writing(
    store: ScheduleStore, frozen: FrozenTime, bad: str
) -> None:
    msgs = [one_shot(T0 - S), one_shot()]
    store.insert_many(msgs, 3)
    [occ] = store.claim_due(frozen.now(), 1, LEASE)
    good = Settlement.delivered(occ.message.schedule_id, occ.leased_until)
    items: list[Any] = [good, Settlement.failed(occ.message.schedule_id, -S, "x", occ.leased_until)]
    args: dict[str, Any] = {"batch_size": 10, "lease": LEASE}
    if bad != "settlement":
        items = [good]
        args[bad] = 0 if bad == "batch_size" else timedelta(0)
    with pytest.raises((InvalidConfiguration, InvalidArgument)):
        store.settle_and_claim(items, frozen.now(), args["batch_size"], args["lease"])
    assert store.settle([good]) == [True], "the lease was untouched"
    assert status(store, msgs[1].schedule_id) is ScheduleStatus.PENDING
    snap = store.inspect(msgs[1].schedule_id)
    assert snap is not None and snap.attempts == 0, "nothing was claimed"


def test_the_default_settle_and_claim_settles_then_claims(frozen: FrozenTime) -> None:
    store = _SinglesOnly()  # type: ignore[abstract]
    assert not store.fuses_settle_and_claim
    msgs = [one_shot(T0 - S), one_shot()]
    store.insert_many(msgs, 3)
    [occ] = store.claim_due(frozen.now(), 1, LEASE)
    results, [nxt] = store.settle_and_claim(_delivered([occ]), frozen.now(), 10, LEASE)
    assert results == [True] and nxt.message.schedule_id == msgs[1].schedule_id
    assert store.calls == ["mark_delivered"]
    assert status(store, msgs[0].schedule_id) is ScheduleStatus.DELIVERED


# -- the sweep -------------------------------------------------------------------


def test_sweep_dead_letters_exhausted_rows_without_a_live_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    crashed = one_shot()
    store.insert(crashed, 1)
    store.claim_due(frozen.now(), 10, LEASE)  # the worker dies on its last attempt
    assert store.dead_letter_exhausted() == 0, "the lease is still live"
    frozen.shift(LEASE)
    assert store.dead_letter_exhausted() == 1
    snap = store.inspect(crashed.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.DEAD_LETTERED
    assert snap.last_error == SWEEP_ERROR
    assert snap.dead_lettered_at == T0 + LEASE and snap.leased_until is None
    assert store.dead_letter_exhausted() == 0


def test_sweep_keeps_the_last_error_when_the_budget_was_lowered_in_backoff(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A schedule in retry backoff whose max_attempts is lowered to the attempts made is
    swept, and its last_error still tells the handler's error and traceback."""
    from hexeract_lite.store.changes import Change

    msg = one_shot()
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    real = "ValueError: the handler's own error\ntraceback\n  File handler.py, line 3"
    assert store.settle([Settlement.failed(msg.schedule_id, 10 * S, real, occ.leased_until)])
    assert store.update_schedule(msg.schedule_id, Change(max_attempts=1))
    frozen.shift(10 * S)
    assert store.dead_letter_exhausted() == 1
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.DEAD_LETTERED
    assert snap.last_error is not None
    first, rest = snap.last_error.split("\n", 1)
    assert first == SWEEP_KEPT.rstrip("\n") and rest == real
    assert "crashed worker" not in first.split("(")[0]


def test_sweep_leaves_rows_with_budget_paused_and_terminal_rows(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    with_budget = one_shot()
    paused = one_shot()
    delivered = one_shot()
    store.insert_many([with_budget, paused, delivered], 1)
    store.insert(one_shot(T0 + timedelta(hours=1)), 1)
    claims = {c.message.schedule_id: c for c in store.claim_due(frozen.now(), 10, LEASE)}
    store.mark_delivered(delivered.schedule_id, claims[delivered.schedule_id].leased_until)
    store.set_paused(paused.schedule_id, True)
    frozen.shift(LEASE)
    assert store.dead_letter_exhausted() == 1  # only with_budget: it was exhausted (1 of 1)
    assert status(store, with_budget.schedule_id) is ScheduleStatus.DEAD_LETTERED
    assert status(store, paused.schedule_id) is ScheduleStatus.PAUSED
    assert status(store, delivered.schedule_id) is ScheduleStatus.DELIVERED


# -- cancel / pause / resume -----------------------------------------------------


def test_cancel(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    store.claim_due(frozen.now(), 10, LEASE)
    frozen.shift(S)
    assert store.cancel(msg.schedule_id) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.CANCELLED
    assert snap.cancelled_at == T0 + S and snap.leased_until is None
    frozen.shift(LEASE)
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    assert store.list_pending() == []


def test_cancel_is_a_no_op_on_a_terminal_schedule(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    store.mark_delivered(msg.schedule_id, occ.leased_until)
    before = store.inspect(msg.schedule_id)
    frozen.shift(S)
    assert store.cancel(msg.schedule_id) is False
    assert store.inspect(msg.schedule_id) == before


def test_control_on_unknown_ids_raises_not_found(store: ScheduleStore, frozen: FrozenTime) -> None:
    sid = uuid.uuid4()
    for call in (
        lambda: store.cancel(sid),
        lambda: store.set_paused(sid, True),
        lambda: store.resume(sid),
        lambda: store.replay(sid),
    ):
        with pytest.raises(ScheduleNotFound) as info:
            call()
        assert info.value.schedule_id == sid
        assert str(sid) in str(info.value)


def test_a_schedule_id_must_be_a_uuid(store: ScheduleStore, frozen: FrozenTime) -> None:
    with pytest.raises(InvalidArgument, match="not-a-uuid"):
        store.cancel("not-a-uuid")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.inspect("not-a-uuid")  # type: ignore[arg-type]


def test_paused_schedules_are_not_claimed(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    assert store.set_paused(msg.schedule_id, True) is True
    assert store.set_paused(msg.schedule_id, True) is False
    assert status(store, msg.schedule_id) is ScheduleStatus.PAUSED
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    assert store.resume(msg.schedule_id) is True
    assert status(store, msg.schedule_id) is ScheduleStatus.PENDING
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.message.scheduled_for == T0, "a one-shot keeps its instant (fires now)"


def test_pause_is_a_no_op_on_terminal_rows(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    store.cancel(msg.schedule_id)
    assert store.set_paused(msg.schedule_id, True) is False
    assert status(store, msg.schedule_id) is ScheduleStatus.CANCELLED
    assert store.resume(msg.schedule_id) is False


def test_resume_of_a_schedule_that_is_not_paused_is_a_no_op(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute(T0 - timedelta(hours=1))
    store.insert(msg, 3)
    before = store.inspect(msg.schedule_id)
    assert store.resume(msg.schedule_id) is False
    assert store.inspect(msg.schedule_id) == before


def test_resume_realigns_a_past_due_paused_cron_without_catch_up(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute(T0)
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    store.mark_failed(msg.schedule_id, S, "flaky", occ.leased_until)
    store.set_paused(msg.schedule_id, True)
    frozen.shift(timedelta(minutes=10, seconds=30))
    assert store.resume(msg.schedule_id) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.PENDING
    assert snap.scheduled_for == T0 + timedelta(minutes=11), "the first instant after now"
    assert snap.attempts == 0 and snap.last_error is None and snap.leased_until is None
    assert store.claim_due(frozen.now(), 10, LEASE) == [], "no catch-up for a pause"


def test_resume_keeps_a_future_paused_cron_instant(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute(T0 + timedelta(minutes=5))
    store.insert(msg, 3)
    store.set_paused(msg.schedule_id, True)
    frozen.shift(timedelta(minutes=1))
    assert store.resume(msg.schedule_id) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == T0 + timedelta(minutes=5)


def test_resume_with_an_explicit_next(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    store.set_paused(msg.schedule_id, True)
    target = T0 + timedelta(hours=2)
    assert store.resume(msg.schedule_id, target) is True
    snap = store.inspect(msg.schedule_id)
    assert (
        snap is not None and snap.scheduled_for == target and snap.status is ScheduleStatus.PENDING
    )


def test_set_paused_false_only_clears_the_flag(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = every_minute(T0)
    store.insert(msg, 3)
    store.set_paused(msg.schedule_id, True)
    frozen.shift(timedelta(minutes=5))
    assert store.set_paused(msg.schedule_id, False) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.scheduled_for == T0 and snap.status is ScheduleStatus.PENDING


@pytest.mark.parametrize("flag", ["false", 0, 1, None])
def test_set_paused_refuses_a_flag_that_is_not_a_bool(
    store: ScheduleStore, frozen: FrozenTime, flag: object
) -> None:
    msg = every_minute(T0)
    store.insert(msg, 3)
    with pytest.raises(InvalidArgument, match=f"paused must be True or False, got {flag!r}"):
        store.set_paused(msg.schedule_id, flag)  # type: ignore[arg-type]
    assert status(store, msg.schedule_id) is ScheduleStatus.PENDING


def test_abort_requests_refuse_an_id_that_is_not_a_uuid(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    with pytest.raises(InvalidArgument, match="'not-a-uuid'"):
        store.abort_requests([uuid.uuid4(), "not-a-uuid"])  # type: ignore[list-item]


RESUMES: dict[str, tuple[Callable[[], ScheduledMessage], datetime | None]] = {
    # the realignment: a cron schedule resumed after its instant has passed
    "cron realigned": (lambda: every_minute(T0), None),
    # the realignment to an explicit instant
    "explicit next": (lambda: one_shot(), T0 + timedelta(hours=1)),
    # the flag alone: a one-shot schedule resumed without an instant
    "flag only": (lambda: one_shot(), None),
}


@pytest.mark.parametrize("ack", ["failed", "success"])
@pytest.mark.parametrize("path", sorted(RESUMES))
def test_pause_then_resume_keep_the_live_lease_so_the_dispatch_in_flight_acks(
    store: ScheduleStore, frozen: FrozenTime, path: str, ack: str
) -> None:
    """A control operation never clears a live lease. A pause and a resume
    while a worker dispatches must not fence its acknowledgement out: a failure still
    records its error and retry, a success still applies."""
    make, explicit = RESUMES[path]
    msg = make()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.set_paused(msg.schedule_id, True) is True
    frozen.shift(10 * S)  # past the cron instant: the realignment path
    assert store.resume(msg.schedule_id, explicit) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.leased_until == occ.leased_until, "the live lease stays"
    if path == "cron realigned":
        assert snap.scheduled_for == T0 + timedelta(minutes=1) and snap.attempts == 0
    if ack == "failed":
        assert store.mark_failed(msg.schedule_id, 5 * S, "boom", occ.leased_until) is True
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.last_error == "boom"
        assert snap.leased_until == frozen.now() + 5 * S, "the retry is scheduled"
    elif msg.trigger.kind == "cron":
        nxt = T0 + timedelta(minutes=2)
        assert store.reschedule(msg.schedule_id, nxt, occ.leased_until) is True
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.scheduled_for == nxt and snap.leased_until is None
    else:
        assert store.mark_delivered(msg.schedule_id, occ.leased_until) is True
        assert status(store, msg.schedule_id) is ScheduleStatus.DELIVERED


def test_resume_settles_a_change_made_during_the_lease_never_firing_it_late(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A firing failed (its retry's backoff holds the lease), then a reschedule (kept for
    the lease's end), a pause and a resume: the resume goes to the change while it is
    ahead, and to the rule once its instant passed during the pause; no later
    acknowledgement takes the change again and fires back in time."""
    ahead, passed = every_minute(T0), every_minute(T0)
    for msg in (ahead, passed):
        store.insert(msg, 3)
    for occ in store.claim_due(frozen.now(), 10, LEASE):
        assert store.mark_failed(occ.message.schedule_id, 10 * LEASE, "down", occ.leased_until)
    changes = {ahead.schedule_id: T0 + 3 * LEASE, passed.schedule_id: T0 + 2 * S}
    for sid, at in changes.items():
        assert SchedulerControl(store).reschedule(sid, at)
        assert store.set_paused(sid, True)
        assert store.inspect(sid).next_after_lease == at  # type: ignore[union-attr]
    frozen.shift(5 * S)
    for sid in changes:
        assert store.resume(sid) is True
    got = {sid: store.inspect(sid) for sid in changes}
    assert got[ahead.schedule_id].scheduled_for == T0 + 3 * LEASE  # type: ignore[union-attr]
    assert got[passed.schedule_id].scheduled_for == T0 + timedelta(minutes=1)  # type: ignore[union-attr]
    assert all(s is not None and s.next_after_lease is None for s in got.values())


def test_resume_clears_a_lease_that_is_no_longer_live(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute(T0)
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    store.set_paused(msg.schedule_id, True)
    frozen.shift(LEASE)  # the lease ends: leased_until <= now
    assert store.resume(msg.schedule_id) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until is None
    assert store.mark_failed(msg.schedule_id, S, "late", occ.leased_until) is False


def test_cancel_ends_a_live_lease_and_fences_the_dispatch_in_flight_out(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.cancel(msg.schedule_id) is True
    assert store.mark_failed(msg.schedule_id, S, "boom", occ.leased_until) is False
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.CANCELLED
    assert snap.leased_until is None and snap.last_error is None


def test_a_lease_holder_can_still_ack_a_paused_schedule(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    store.set_paused(msg.schedule_id, True)
    assert store.mark_delivered(msg.schedule_id, occ.leased_until) is True
    assert status(store, msg.schedule_id) is ScheduleStatus.DELIVERED


# -- replay --------------------------------------------------------------------


def _dead_letter(store: ScheduleStore, frozen: FrozenTime, msg: ScheduledMessage) -> None:
    store.insert(msg, 1)
    claimed = store.claim_due(frozen.now(), 10, LEASE)
    [occ] = [c for c in claimed if c.message.schedule_id == msg.schedule_id]
    assert store.mark_dead_lettered(msg.schedule_id, "boom", occ.leased_until)


def test_replay_resets_a_dead_lettered_schedule(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot(T0 - timedelta(hours=1))
    _dead_letter(store, frozen, msg)
    frozen.shift(timedelta(minutes=5))
    store.replay(msg.schedule_id)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.status is ScheduleStatus.PENDING
    assert snap.scheduled_for == frozen.now()
    assert snap.attempts == 0 and snap.last_error is None and snap.leased_until is None
    assert snap.dead_lettered_at is None
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.attempts == 1 and occ.message.scheduled_for == frozen.now()
    assert store.mark_delivered(msg.schedule_id, occ.leased_until)
    assert status(store, msg.schedule_id) is ScheduleStatus.DELIVERED


def test_both_replays_forget_a_change_made_during_the_dead_lettered_lease(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A reschedule made while the last attempt was leased waits for that lease's end;
    the attempt dead-letters instead. Replaying one and replaying all make the same
    fresh firing: its acknowledgement goes where the worker says, not to the old change."""
    one, many = every_minute(T0), every_minute(T0)
    stale = T0 + timedelta(hours=5)
    for msg in (one, many):
        store.insert(msg, 1)
    for occ in store.claim_due(frozen.now(), 10, LEASE):
        sid = occ.message.schedule_id
        assert SchedulerControl(store).reschedule(sid, stale)
        assert store.mark_dead_lettered(sid, "boom", occ.leased_until)
        assert store.inspect(sid).next_after_lease == stale  # type: ignore[union-attr]
    frozen.shift(timedelta(minutes=5))
    store.replay(one.schedule_id)
    assert store.replay_dead_letters([many.schedule_id]) == 1
    rule = frozen.now() + timedelta(minutes=1)
    for occ in store.claim_due(frozen.now(), 10, LEASE):
        assert store.reschedule(occ.message.schedule_id, rule, occ.leased_until)
    for msg in (one, many):
        snap = store.inspect(msg.schedule_id)
        assert snap is not None and snap.next_after_lease is None
        assert (snap.status, snap.scheduled_for) == (ScheduleStatus.PENDING, rule)


def test_replay_clears_the_paused_flag(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    _dead_letter(store, frozen, msg)
    store.replay(msg.schedule_id)
    assert status(store, msg.schedule_id) is ScheduleStatus.PENDING


@pytest.mark.parametrize("state", ["pending", "paused", "delivered", "cancelled"])
def test_replay_of_anything_but_a_dead_letter_is_not_replayable(
    store: ScheduleStore, frozen: FrozenTime, state: str
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    if state == "paused":
        store.set_paused(msg.schedule_id, True)
    elif state == "delivered":
        [occ] = store.claim_due(frozen.now(), 10, LEASE)
        store.mark_delivered(msg.schedule_id, occ.leased_until)
    elif state == "cancelled":
        store.cancel(msg.schedule_id)
    before = store.inspect(msg.schedule_id)
    with pytest.raises(NotReplayable) as info:
        store.replay(msg.schedule_id)
    assert info.value.schedule_id == msg.schedule_id
    assert info.value.status == ScheduleStatus(state)
    assert f"is {state}" in str(info.value)
    assert store.inspect(msg.schedule_id) == before


# -- status and listings -----------------------------------------------------------


def test_status_derivation(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 1)
    assert status(store, msg.schedule_id) is ScheduleStatus.PENDING
    store.set_paused(msg.schedule_id, True)
    assert status(store, msg.schedule_id) is ScheduleStatus.PAUSED
    store.cancel(msg.schedule_id)
    assert status(store, msg.schedule_id) is ScheduleStatus.CANCELLED, "terminal wins over paused"
    assert [s.value for s in ScheduleStatus] == [
        "pending",
        "paused",
        "delivered",
        "cancelled",
        "dead-lettered",
    ]


def test_list_pending_shows_pending_and_paused_soonest_first(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    a = one_shot(T0 + 3 * S)
    b = one_shot(T0 + 1 * S)
    c = one_shot(T0 + 2 * S)
    gone = one_shot(T0)
    store.insert_many([a, b, c, gone], 3)
    store.set_paused(c.schedule_id, True)
    store.cancel(gone.schedule_id)
    listed = store.list_pending()
    assert [s.schedule_id for s in listed] == [b.schedule_id, c.schedule_id, a.schedule_id]
    assert [s.status for s in listed] == [
        ScheduleStatus.PENDING,
        ScheduleStatus.PAUSED,
        ScheduleStatus.PENDING,
    ]
    assert [s.schedule_id for s in store.list_pending(2)] == [b.schedule_id, c.schedule_id]


def test_list_dead_letter_most_recent_first(store: ScheduleStore, frozen: FrozenTime) -> None:
    msgs = [one_shot(T0 - i * S) for i in range(3)]
    for m in msgs:
        _dead_letter(store, frozen, m)
        frozen.shift(S)
    listed = store.list_dead_letter()
    assert [s.schedule_id for s in listed] == [m.schedule_id for m in reversed(msgs)]
    assert all(
        isinstance(s, ScheduleSnapshot)
        and s.status is ScheduleStatus.DEAD_LETTERED
        and s.last_error == "boom"
        for s in listed
    )
    assert len(store.list_dead_letter(limit=1)) == 1
    assert store.list_pending() == []


@pytest.mark.parametrize("bad", [0, -5, True])
def test_listing_limits_must_be_positive(
    store: ScheduleStore, frozen: FrozenTime, bad: int
) -> None:
    with pytest.raises(InvalidConfiguration, match="limit"):
        store.list_pending(bad)
    with pytest.raises(InvalidConfiguration, match="limit"):
        store.list_dead_letter(bad)


def test_instants_are_stored_at_millisecond_precision(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    odd = datetime(2026, 3, 1, 11, 59, 59, 123_987, tzinfo=timezone(timedelta(hours=2)))
    msg = one_shot(odd)
    # a requested instant rounds up to the millisecond: never early
    assert msg.scheduled_for == datetime(2026, 3, 1, 9, 59, 59, 124_000, tzinfo=UTC)
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.occurrence_id() == msg.occurrence_id()
    assert occ.message.scheduled_for.tzinfo is not None


def test_pre_epoch_instants_round_trip(store: ScheduleStore, frozen: FrozenTime) -> None:
    old = datetime(1969, 7, 20, 20, 17, 40, 500_000, tzinfo=UTC)
    msg = one_shot(old)
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.message.scheduled_for == old
    assert occ.occurrence_id() == msg.occurrence_id()


# -- wake-up hints -----------------------------------------------------------------


def test_next_wakeup_follows_due_instants_and_leases(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    assert store.next_wakeup() is None
    later = one_shot(T0 + 50 * S)
    soon = one_shot(T0 + 5 * S)
    store.insert_many([later, soon], 3)
    assert store.next_wakeup() == T0 + 5 * S
    frozen.shift(5 * S)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.next_wakeup() == min(T0 + 50 * S, occ.leased_until)
    store.mark_failed(soon.schedule_id, 2 * S, "x", occ.leased_until)
    assert store.next_wakeup() == T0 + 7 * S, "the retry deadline"
    store.set_paused(later.schedule_id, True)
    store.cancel(soon.schedule_id)
    assert store.next_wakeup() is None, "paused and terminal rows never wake a worker"


def test_changes_are_signalled(store: ScheduleStore, frozen: FrozenTime) -> None:
    version = store.changes.version()
    assert store.changes.wait(version, 0) is False
    store.insert(one_shot(), 3)
    assert store.changes.version() != version
    assert store.changes.wait(version, 0) is True


# -- boundaries --------------------------------------------------------------------


def test_insert_many_reads_a_generator_whole(store: ScheduleStore, frozen: FrozenTime) -> None:
    msgs = [one_shot(T0 + i * S) for i in range(3)]
    store.insert_many((m for m in msgs), 3)  # type: ignore[arg-type]
    assert [s.schedule_id for s in store.list_pending()] == [m.schedule_id for m in msgs]


def test_counts_beyond_int32_are_refused_naming_the_value(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    with pytest.raises(InvalidConfiguration, match=str(2**31)):
        store.insert(msg, 2**31)
    assert store.inspect(msg.schedule_id) is None
    store.insert(msg, 2**31 - 1)
    with pytest.raises(InvalidConfiguration, match="batch_size"):
        store.claim_due(frozen.now(), 2**63, LEASE)
    with pytest.raises(InvalidConfiguration, match="9999"):
        store.claim_due(frozen.now(), 1, timedelta(days=3_000_000))
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.attempts == 0 and snap.leased_until is None


def test_a_hand_built_bad_message_never_reaches_the_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    import attrs

    good = one_shot()
    bad = attrs.evolve(one_shot(), payload_json="not json")
    naive = attrs.evolve(one_shot(), scheduled_for=datetime(2026, 3, 1, 12))
    with pytest.raises(InvalidArgument, match="not JSON"):
        store.insert(bad, 3)
    with pytest.raises(InvalidArgument, match="scheduled_for"):
        store.insert_many([good, naive], 3)
    assert store.list_pending() == []


def test_released_gives_back_the_claims_attempt(store: ScheduleStore, frozen: FrozenTime) -> None:
    """A stopping worker releases what it never dispatched: the attempt the claim spent
    comes back, the lease is cleared, the error of an earlier failure stays."""
    msg = one_shot()
    store.insert(msg, 3)
    [first] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.mark_failed(msg.schedule_id, timedelta(0), "boom", first.leased_until)
    [second] = store.claim_due(frozen.now(), 10, LEASE)
    assert second.attempts == 2
    assert store.settle([Settlement.released(msg.schedule_id, second.leased_until)]) == [True]
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.attempts == 1 and snap.leased_until is None and snap.last_error == "boom"
    assert snap.scheduled_for == T0 and snap.status is ScheduleStatus.PENDING
    assert store.settle([Settlement.released(msg.schedule_id, second.leased_until)]) == [False]
    [again] = store.claim_due(frozen.now(), 10, LEASE)
    assert again.attempts == 2 and again.occurrence_id() == first.occurrence_id()


def test_extend_lease_moves_the_lease_and_becomes_the_fencing_token(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A heartbeat's extension is fenced like an acknowledgement: it applies while the
    row carries the lease, the new ``leased_until`` is then the only token that
    settles, and the claim's own lease is fenced out."""
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    until = occ.leased_until + timedelta(minutes=5)
    assert store.extend_lease(msg.schedule_id, occ.leased_until, until) is True
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == until and snap.attempts == 1
    frozen.shift(LEASE + S)  # past the claim's lease, within the extension
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    assert store.extend_lease(msg.schedule_id, occ.leased_until, until + S) is False
    assert store.settle([Settlement.delivered(msg.schedule_id, occ.leased_until)]) == [False]
    assert store.settle([Settlement.delivered(msg.schedule_id, until)]) == [True]
    assert store.extend_lease(msg.schedule_id, until, until + S) is False  # terminal now


def test_extend_lease_is_fenced_out_once_another_claim_took_the_occurrence(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A lease that ran out and was claimed again cannot be extended by the old owner."""
    msg = one_shot()
    store.insert(msg, 3)
    [old] = store.claim_due(frozen.now(), 10, LEASE)
    frozen.shift(LEASE + S)
    [new] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.extend_lease(msg.schedule_id, old.leased_until, new.leased_until + LEASE) is False
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == new.leased_until
    assert store.extend_lease(uuid.uuid4(), new.leased_until, new.leased_until + S) is False


def test_extend_lease_rejects_a_bad_until_before_writing(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    for bad in (occ.leased_until, occ.leased_until - S, occ.leased_until.replace(tzinfo=None), 5):
        with pytest.raises(InvalidArgument, match="until"):
            store.extend_lease(msg.schedule_id, occ.leased_until, bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        store.extend_lease("nope", occ.leased_until, occ.leased_until + S)  # type: ignore[arg-type]
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.leased_until == occ.leased_until


def test_a_snooze_keeps_attempts_unchanged_and_counts_the_snooze(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A snoozed settlement gives the claim's attempt back (``attempts`` as before the
    claim), counts one more snooze, holds the occurrence (same id, ``scheduled_for``
    and ``last_error``) until now + delay, and is fenced like the others; the next
    occurrence of a recurring schedule starts with no snoozes."""
    msg = every_minute()
    store.insert(msg, 3)
    [first] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.mark_failed(msg.schedule_id, timedelta(0), "boom", first.leased_until)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.attempts == 2 and occ.snoozes == 0
    snooze = Settlement.snoozed(msg.schedule_id, timedelta(minutes=5), occ.leased_until)
    assert store.settle([snooze]) == [True]
    snap = store.inspect(msg.schedule_id)
    assert snap is not None
    assert snap.attempts == 1 and snap.snoozes == 1 and snap.last_error == "boom"
    assert snap.scheduled_for == T0 and snap.leased_until == frozen.now() + timedelta(minutes=5)
    assert store.settle([snooze]) == [False]  # the lease it carried is gone
    assert store.claim_due(frozen.now(), 10, LEASE) == []
    frozen.shift(timedelta(minutes=5))
    [again] = store.claim_due(frozen.now(), 10, LEASE)
    assert again.attempts == 2 and again.snoozes == 1
    assert again.occurrence_id() == occ.occurrence_id()
    nxt = T0 + timedelta(minutes=6)
    assert store.settle([Settlement.reschedule(msg.schedule_id, nxt, again.leased_until)])
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.snoozes == 0 and snap.attempts == 0


def test_a_firing_moved_during_its_lease_starts_with_no_snoozes(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A snoozed recurring firing moved while in flight: its delivered acknowledgement
    moves it to the new instant (next_after_lease), a new firing, with no snoozes."""
    msg = every_minute()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.settle([Settlement.snoozed(msg.schedule_id, S, occ.leased_until)]) == [True]
    frozen.shift(2 * S)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    later = frozen.now() + timedelta(hours=1)
    assert store.move(msg.schedule_id, later)
    assert store.mark_delivered(msg.schedule_id, occ.leased_until)
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.status is ScheduleStatus.PENDING
    assert snap.scheduled_for == later and snap.snoozes == 0


def test_a_snooze_needs_a_delay(store: ScheduleStore, frozen: FrozenTime) -> None:
    msg = one_shot()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    bad = Settlement(SettlementKind.SNOOZED, msg.schedule_id, occ.leased_until)
    with pytest.raises(InvalidConfiguration, match="retry_in"):
        store.settle([bad])
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.attempts == 1 and snap.snoozes == 0


def test_a_cancelled_settlement_cancels_the_schedule_fenced(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    msg = every_minute()
    store.insert(msg, 3)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.settle([Settlement.cancelled(msg.schedule_id, occ.leased_until + S)]) == [False]
    assert store.settle([Settlement.cancelled(msg.schedule_id, occ.leased_until)]) == [True]
    assert status(store, msg.schedule_id) is ScheduleStatus.CANCELLED
    assert store.claim_due(frozen.now() + timedelta(hours=1), 10, LEASE) == []


def test_an_abort_request_is_stored_while_leased_and_cleared_by_the_next_claim(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """``request_abort`` stores the request only on a leased live row (False, nothing
    written, otherwise); ``abort_requests`` reads it; the next claim clears it."""
    msg, idle = one_shot(), one_shot(T0 + timedelta(hours=1))
    store.insert_many([msg, idle], 3)
    assert store.request_abort(msg.schedule_id, "abort") is False  # not in flight
    assert store.abort_requests([msg.schedule_id]) == {}
    [_claimed] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.request_abort(msg.schedule_id, "cancel") is True
    assert store.abort_requests([msg.schedule_id, idle.schedule_id]) == {msg.schedule_id: "cancel"}
    assert store.request_abort(idle.schedule_id, "abort") is False
    with pytest.raises(InvalidArgument, match="abort"):
        store.request_abort(msg.schedule_id, "stop")
    with pytest.raises(ScheduleNotFound):
        store.request_abort(uuid.uuid4(), "abort")
    frozen.shift(LEASE + S)  # the worker died: the lease runs out, another claims it
    [again] = store.claim_due(frozen.now(), 10, LEASE)
    assert store.abort_requests([msg.schedule_id]) == {}
    assert store.settle([Settlement.delivered(msg.schedule_id, again.leased_until)]) == [True]
    assert store.request_abort(msg.schedule_id, "abort") is False  # terminal


def _message() -> ScheduledMessage:
    return ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "a.b", {"n": 1})


@pytest.mark.parametrize("method", ["insert", "insert_many"])
def test_the_memory_store_refuses_a_connection_on_insert_as_on_ensure(method: str) -> None:
    """The in-memory store refuses ``connection=`` on insert and insert_many as on ensure
    (InvalidArgument, not a bare TypeError), writing nothing; ``connection=None`` is the
    usual insert."""
    store = InMemoryScheduleStore()
    message = _message()
    arg: object = message if method == "insert" else [message]
    with pytest.raises(
        InvalidArgument, match="cannot write inside an application's transaction"
    ) as err:
        getattr(store, method)(arg, 3, connection=object())
    assert "the SQLite, PostgreSQL and MySQL stores" in str(err.value)  # every one that can
    assert store.inspect(message.schedule_id) is None
    getattr(store, method)(arg, 3, connection=None)  # None: the usual insert
    assert store.inspect(message.schedule_id) is not None


@pytest.mark.parametrize("store_name", sorted(STORE_FACTORIES))
@pytest.mark.parametrize("lease", [timedelta(microseconds=1), timedelta(microseconds=999)])
def test_a_lease_shorter_than_the_stored_millisecond_is_refused(
    store_name: str, lease: timedelta, tmp_path: Path
) -> None:
    """now + a lease under a millisecond, stored to the millisecond, would be now itself (a
    second claim at that instant would hand the occurrence out again with the same fencing
    token): refused on every store, nothing written."""
    store = STORE_FACTORIES[store_name](tmp_path)
    try:
        now = datetime(2026, 3, 1, 12, tzinfo=UTC)
        message = ScheduledMessage.delay(Target.outbox(), now, "a.b", None)
        store.insert(message, 5)
        with pytest.raises(InvalidConfiguration, match="lease must be at least 1 ms"):
            store.claim_due(now, 1, lease)
        snap = store.inspect(message.schedule_id)
        assert snap is not None and (snap.attempts, snap.leased_until) == (0, None)
        [claimed] = store.claim_due(now, 1, timedelta(milliseconds=1))
        assert claimed.leased_until == now + timedelta(milliseconds=1)
        assert store.claim_due(now, 1, timedelta(milliseconds=1)) == []
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["failed", "dead_lettered"])
def test_error_none_is_refused_like_settle_and_writes_nothing(
    store: ScheduleStore, frozen: FrozenTime, kind: str
) -> None:
    """``mark_failed`` and ``mark_dead_lettered`` with ``error=None`` are refused as ``settle``
    refuses their settlements, on every store, writing nothing; a non-str error is recorded
    as its text."""
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", {})
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    sid, lease = msg.schedule_id, occ.leased_until
    with pytest.raises(InvalidArgument, match="error=None"):
        if kind == "failed":
            store.mark_failed(sid, timedelta(seconds=1), None, lease)  # type: ignore[arg-type]
        else:
            store.mark_dead_lettered(sid, None, lease)  # type: ignore[arg-type]
    item = (
        Settlement.failed(sid, timedelta(seconds=1), None, lease)  # type: ignore[arg-type]
        if kind == "failed"
        else Settlement.dead_lettered(sid, None, lease)  # type: ignore[arg-type]
    )
    with pytest.raises(InvalidArgument, match="error=None"):
        store.settle([item])
    snap = store.inspect(sid)
    assert snap is not None and snap.last_error is None and snap.leased_until == lease
    assert snap.status is ScheduleStatus.PENDING
    # a non-str error is still recorded as its text
    assert store.mark_dead_lettered(sid, ValueError("boom"), lease)  # type: ignore[arg-type]
    snap = store.inspect(sid)
    assert snap is not None and snap.last_error == "boom"


def test_writers_take_turns_only_where_one_lock_serialises_them(store: ScheduleStore) -> None:
    """A draining worker pauses ``min_cycle_delay`` after a full batch for SQLite's file
    lock and the memory store's lock; row-locking servers need no pause."""
    one_lock = type(store).__name__ in {"InMemoryScheduleStore", "SqliteScheduleStore"}
    assert store.writers_take_turns is one_lock
