"""Schedule policies (end_at, max_firings, jitter, catch_up): checked at the boundary,
proven against a hand-written oracle on every store across the DST suite's offset
changes, with ``upcoming`` saying beforehand what the worker then fires, and refused
loudly by a reader that knows no policies (the reference's own statements)."""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexeract_lite import (
    InvalidArgument,
    OccurrenceId,
    ScheduledMessage,
    SchedulerControl,
    SchedulerWorker,
    ScheduleSnapshot,
    ScheduleStatus,
    ScheduleStore,
    Target,
)
from hexeract_lite.policy import SchedulePolicy, jitter_offset
from hexeract_lite.trigger import Trigger

from .conftest import STORE_FACTORIES, T0, FrozenTime
from .test_dst import instant, minute_windows, oracle

MS = timedelta(milliseconds=1)
RULES = (
    "*/10 0,1 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "15 1,2,3 * * *",
    "0 1-3 * * *",
    "*/30 * * * *",
    "* 2 * * *",
)


# -- the boundary -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"jitter": timedelta(seconds=-1)}, "jitter must not be negative"),
        ({"jitter": timedelta(microseconds=1500)}, "whole number of milliseconds"),
        ({"jitter": 5}, "jitter must be a timedelta"),
        ({"max_firings": 0}, "max_firings must be an integer from 1"),
        ({"max_firings": -3}, "got -3"),
        ({"max_firings": True}, "got True"),
        ({"max_firings": "3"}, "got '3'"),
        ({"end_at": datetime(2026, 3, 1, 12)}, "end_at must be a timezone-aware"),
        ({"catch_up": "never"}, "catch_up must be 'latest', 'skip' or 'all', got 'never'"),
        ({"catch_up_limit": 5}, "catch_up_limit goes with catch_up='all'"),
        ({"catch_up": "all", "catch_up_limit": 0}, "catch_up_limit must be an integer"),
    ],
)
def test_bad_policy_values_are_refused_naming_them(
    arguments: dict[str, Any], needle: str, frozen: FrozenTime
) -> None:
    from hexeract_lite import InMemoryScheduleStore

    store = InMemoryScheduleStore()
    control = SchedulerControl(store)
    with pytest.raises(InvalidArgument, match=re.escape(needle)):
        control.ensure("app.tick", cron="0 * * * *", event_type="tick", **arguments)
    with pytest.raises(InvalidArgument, match=r"must|goes with"):
        ScheduledMessage.cron(Target.outbox(), "0 * * * *", None, "tick", {}, **arguments)
    assert len(store) == 0, "nothing written"


def test_a_one_shot_or_an_end_before_the_first_firing_is_refused(frozen: FrozenTime) -> None:
    from hexeract_lite import InMemoryScheduleStore

    store = InMemoryScheduleStore()
    control = SchedulerControl(store)
    with pytest.raises(InvalidArgument, match="go with cron= or every=, not at="):
        control.ensure("app.once", at=T0, event_type="once", max_firings=2)
    with pytest.raises(InvalidArgument, match="is before the first firing"):
        control.ensure("app.tick", cron="0 * * * *", event_type="t", end_at=T0 - timedelta(hours=1))
    with pytest.raises(InvalidArgument, match="with a recurring schedule"):
        import attrs

        once = ScheduledMessage.delay(Target.outbox(), T0, "once", {})
        store.insert(attrs.evolve(once, policy=SchedulePolicy(max_firings=1)), 3)
    assert len(store) == 0


@given(
    st.uuids(),
    st.integers(0, 2**40),
    st.integers(1, 10**9),
    st.sampled_from(["*/5 * * * *", "0 9 * * *", "*/2 * * * * *"]),
)
def test_jitter_is_derived_from_the_occurrence_id_within_its_bounds(
    sid: uuid.UUID, at_ms: int, jitter_ms: int, rule: str
) -> None:
    trigger = Trigger.cron(rule, tz="Europe/Paris")
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=at_ms)
    at = trigger.next_after(start)
    assert at is not None
    nxt = trigger.next_after(at)
    assert nxt is not None
    policy = SchedulePolicy.of(jitter=timedelta(milliseconds=jitter_ms))
    offset = jitter_offset(policy, trigger, sid, at)
    span = min(jitter_ms, (nxt - at) // MS)
    digest = OccurrenceId.derive(sid, at).as_uuid().bytes
    assert offset == timedelta(milliseconds=int.from_bytes(digest[:6], "big") % span)
    assert timedelta(0) <= offset < timedelta(milliseconds=jitter_ms)
    assert at + offset < nxt, "never reaches the next firing"


# -- the oracle -----------------------------------------------------------------------


def _hand_jitter(
    sid: uuid.UUID, fires: list[datetime], index: int, jitter: timedelta | None
) -> timedelta:
    """The jitter of ``fires[index]`` by the rule as the policy states it, from the
    oracle's own next instant."""
    if jitter is None:
        return timedelta(0)
    span = min(jitter, fires[index + 1] - fires[index]) // MS
    if span <= 1:
        return timedelta(0)
    digest = OccurrenceId.derive(sid, fires[index]).as_uuid().bytes
    return timedelta(milliseconds=int.from_bytes(digest[:6], "big") % span)


def expected_firings(
    sid: uuid.UUID,
    fires: list[datetime],
    policy: SchedulePolicy,
    grace: timedelta | None,
    outage_until: datetime | None,
) -> list[tuple[datetime, datetime]]:
    """What a worker that sleeps until ``outage_until`` then runs at every due instant
    delivers, as ``(the clock when it fired, the rule's instant)``, for the firings
    before the oracle's last instant (whose jitter needs the instant after it)."""
    dues = [f + _hand_jitter(sid, fires, i, policy.jitter) for i, f in enumerate(fires[:-1])]
    end = len(dues)
    if policy.end_at is not None:
        end = sum(1 for d in dues if d <= policy.end_at)
    fired: list[tuple[datetime, datetime]] = []
    k = 0
    if outage_until is not None and dues and dues[0] <= outage_until:
        now = outage_until
        overdue = [i for i in range(end) if dues[i] <= now]
        fresh = [i for i in overdue if grace is None or now - dues[i] <= grace]
        if policy.catch_up == "latest":
            if fresh and fresh[0] == 0:
                fired.append((now, fires[0]))
        elif policy.catch_up == "skip":
            superseded = len(overdue) > 1
            if fresh and fresh[0] == 0 and not superseded:
                fired.append((now, fires[0]))
        else:
            fired += [(now, fires[i]) for i in fresh[-policy.catch_up_limit :]]
        k = next((i for i in range(len(dues)) if dues[i] > now), len(dues))
    fired += [(dues[i], fires[i]) for i in range(k, end)]
    if policy.max_firings is not None:
        fired = fired[: policy.max_firings]
    return fired


class Clocked:
    """A sink that records when each message arrived and for which instant."""

    def __init__(self, frozen: FrozenTime) -> None:
        self.frozen = frozen
        self.got: list[tuple[datetime, datetime]] = []

    def dispatch(self, message: ScheduledMessage) -> None:
        self.got.append((self.frozen.now(), message.scheduled_for))


def drive(
    store: ScheduleStore, frozen: FrozenTime, sid: uuid.UUID, horizon: datetime
) -> list[tuple[datetime, datetime]]:
    """A worker that cycles now, then at every instant the schedule is due, until its
    firing held is at ``horizon`` (or it completes)."""
    sink = Clocked(frozen)
    worker = SchedulerWorker(store, sink)
    for _ in range(400):
        worker.run_once()
        snap = store.inspect(sid)
        assert isinstance(snap, ScheduleSnapshot)
        if snap.status is not ScheduleStatus.PENDING or snap.occurrence_at >= horizon:
            break
        if snap.scheduled_for > frozen.now():
            frozen.move_to(snap.scheduled_for)
    else:
        raise AssertionError("the schedule never settled")
    return sink.got


policies = st.fixed_dictionaries(
    {
        "jitter": st.one_of(st.none(), st.integers(1, 3 * 3_600_000).map(lambda ms: ms * MS)),
        "max_firings": st.one_of(st.none(), st.integers(1, 8)),
        "catch_up": st.sampled_from(["latest", "skip", "all"]),
        "catch_up_limit": st.one_of(st.none(), st.integers(1, 5)),
    }
)


def _run_case(
    name: str,
    frozen: FrozenTime,
    data: st.DataObject,
) -> int:
    w = data.draw(st.sampled_from(minute_windows()), label="window")
    rule = data.draw(st.sampled_from(RULES), label="rule")
    fires = [instant(u) for u in oracle(rule, w)]
    if len(fires) < 3:
        return 0
    arguments = data.draw(policies, label="policy")
    if arguments["catch_up"] != "all":
        arguments["catch_up_limit"] = None
    end_index = data.draw(st.one_of(st.none(), st.integers(0, len(fires) - 2)), label="end")
    if end_index is not None:
        arguments["end_at"] = (
            fires[end_index] + data.draw(st.integers(0, 20), label="+m") * 60 * MS * 1000
        )
    grace = data.draw(st.one_of(st.none(), st.integers(5, 120).map(lambda m: m * 60_000 * MS)))
    outage = data.draw(st.one_of(st.none(), st.integers(0, len(fires) - 2)), label="outage")
    sid = data.draw(st.uuids(version=4), label="schedule id")
    policy = SchedulePolicy.of(**arguments) or SchedulePolicy()
    frozen.move_to(instant(w.start))
    try:
        msg = ScheduledMessage.cron(
            Target.outbox(),
            rule,
            fires[0],
            "tick",
            {},
            tz=w.change.zone,
            schedule_id=sid,
            misfire_grace=grace,
            **arguments,
        )
    except InvalidArgument as exc:  # the end is before the first (jittered) firing
        assert "before the first firing" in str(exc)
        first_due = fires[0] + _hand_jitter(sid, fires, 0, policy.jitter)
        assert policy.end_at is not None and first_due > policy.end_at
        return 0
    outage_until = None
    if outage is not None:
        late = data.draw(st.integers(0, 50), label="+min") * 60_000 * MS
        outage_until = min(fires[outage] + late, fires[-1] - MS)  # the oracle sees no further
    want = expected_firings(sid, fires, policy, grace, outage_until)
    folder = Path(tempfile.mkdtemp())
    store = STORE_FACTORIES[name](folder)
    try:
        store.insert(msg, 3)
        control = SchedulerControl(store)
        if outage_until is not None:
            frozen.move_to(outage_until)
        said = control.upcoming(sid, count=10_000, until=fires[-1] - MS)
        got = drive(store, frozen, sid, fires[-1])
        got = [g for g in got if g[1] < fires[-1]]
        assert got == want, (rule, w.change, policy, grace, outage_until)
        # upcoming said beforehand when each would be due (an overdue one: its due)
        dues = {f: f + _hand_jitter(sid, fires, i, policy.jitter) for i, f in enumerate(fires[:-1])}
        assert said == [dues[f] for _, f in want], (rule, w.change, policy, grace)
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)
    return len(want)


@pytest.mark.parametrize("name", sorted(STORE_FACTORIES))
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_worker_fires_the_oracle_s_firings_across_the_dst_changes(
    name: str, frozen: FrozenTime, data: st.DataObject
) -> None:
    """On every store, on a frozen clock, around the offset changes of the DST suite:
    the firings a worker delivers (when, and for which rule instant) are the oracle's
    (the rule's instants, with the end, the count, the jitter and the catch-up applied
    by hand), and ``upcoming`` said them beforehand."""
    _run_case(name, frozen, data)
