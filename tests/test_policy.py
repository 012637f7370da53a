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
from hexeract_lite.trigger import CronExpression, Trigger

from .conftest import STORE_FACTORIES, T0, FrozenTime, examples
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
    arguments: dict[str, Any] = data.draw(policies, label="policy")
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
    max_examples=examples(15),
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


# -- declare, update, inspect, the CLI --------------------------------------------------


def _snap(store: ScheduleStore, sid: uuid.UUID) -> ScheduleSnapshot:
    snap = store.inspect(sid)
    assert isinstance(snap, ScheduleSnapshot)
    return snap


def test_ensure_compares_the_policy_and_update_changes_it_keeping_the_count(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    args: dict[str, Any] = {"cron": "0 * * * *", "event_type": "tick", "max_firings": 3}
    assert str(control.ensure("app.tick", **args)) == "created"
    assert str(control.ensure("app.tick", **args)) == "unchanged"
    sid = control.id_of("app.tick")
    frozen.move_to(T0 + timedelta(hours=1))
    SchedulerWorker(store, lambda message: None).run_once()
    assert _snap(store, sid).firings == 1
    assert str(control.ensure("app.tick", **{**args, "max_firings": 5})) == "updated"
    snap = _snap(store, sid)
    assert snap.policy == SchedulePolicy(max_firings=5) and snap.firings_left == 4
    assert str(control.ensure("app.tick", **{**args, "max_firings": 5})) == "unchanged"
    assert control.update("app.tick", jitter=timedelta(minutes=20), catch_up="skip")
    snap = _snap(store, sid)
    assert snap.policy == SchedulePolicy(
        max_firings=5, jitter=timedelta(minutes=20), catch_up="skip"
    )
    assert snap.occurrence_at == T0 + timedelta(hours=2)
    assert snap.scheduled_for == snap.occurrence_at + snap.jitter_offset
    assert not control.update("app.tick", catch_up="skip"), "the same value: unchanged"
    assert control.update("app.tick", max_firings=None, jitter=None, catch_up=None)
    snap = _snap(store, sid)
    assert snap.policy is None and snap.firings == 1
    assert snap.scheduled_for == T0 + timedelta(hours=2), "no jitter any more"
    with pytest.raises(InvalidArgument, match="max_firings must be"):
        control.update("app.tick", max_firings=0)
    assert _snap(store, sid).policy is None, "nothing written"


def test_the_cli_adds_ensures_updates_and_inspects_a_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], frozen: FrozenTime
) -> None:
    from hexeract_lite.cli import main

    db = str(tmp_path / "cli.db")

    def cli(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["scheduler", *argv, "--conn", db])
        return code, capsys.readouterr().out

    code, _ = cli(
        "ensure", "--name", "app.report", "--cron", "0 9 * * *", "--event-type", "report",
        "--end-at", "2026-03-05T12:00:00Z", "--max-firings", "10", "--jitter", "15m",
        "--catch-up", "all", "--catch-up-limit", "7",
    )  # fmt: skip
    assert code == 0
    code, text = cli("inspect", "--name", "app.report")
    assert code == 0
    assert "end" in text and "2026-03-05T12:00:00.000Z" in text
    assert "0 of at most 10 (10 left)" in text
    assert "up to 15m (this firing: +" in text
    assert "all (at most 7)" in text
    code, out = cli("inspect", "--name", "app.report", "--format", "json")
    data = __import__("json").loads(out)
    assert data["max_firings"] == 10 and data["firings_left"] == 10
    assert data["jitter_ms"] == 900_000 and data["catch_up"] == "all"
    assert data["catch_up_limit"] == 7
    assert data["occurrence_id"] == str(
        OccurrenceId.derive(uuid.UUID(data["schedule_id"]), datetime(2026, 3, 2, 9, tzinfo=UTC))
    ), "the rule's instant, not the jittered one"
    assert cli("update", "--name", "app.report", "--max-firings", "2", "--catch-up", "skip")[0] == 0
    code, text = cli("inspect", "--name", "app.report")
    assert "0 of at most 2 (2 left)" in text and "skip" in text
    assert len(cli("next", "app.report")[1].splitlines()) == 2, "two firings left"
    cleared = ("--max-firings", "none", "--end-at", "NONE", "--jitter", "none")
    assert cli("update", "--name", "app.report", *cleared, "--misfire-grace", "none")[0] == 0
    data = __import__("json").loads(cli("inspect", "--name", "app.report", "--format", "json")[1])
    assert (data["max_firings"], data["end_at"], data["jitter_ms"]) == (None, None, None)
    assert data["catch_up"] == "skip", "what was not given is kept"
    assert cli("update", "--name", "app.report", "--max-firings", "nine")[0] == 2
    code, _ = cli("add", "--in", "5m", "--event-type", "once", "--max-firings", "2")
    assert code == 2, "a one-shot takes no policy"
    code, _ = cli("add", "--cron", "0 9 * * *", "--event-type", "e", "--max-firings", "none")
    assert code == 2, "none is update's only"


# -- the reference -----------------------------------------------------------------------

VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"


@pytest.mark.skipif(
    not (VECTORS / "reference_sqlite_statements.tsv").exists(), reason="no shared vectors"
)
def test_the_reference_claims_a_policy_row_and_cannot_read_its_rule(tmp_path: Path) -> None:
    """A row with a policy, claimed by the reference's own claim statement, carries a rule
    text no cron parser reads (as a zoned or interval row does), so the reference
    refuses it instead of firing it past its end, beyond its count or off its jitter;
    a row without a policy keeps the plain text the reference reads."""
    import apsw
    from cronsim import CronSim, CronSimError

    from hexeract_lite.errors import InvalidTrigger
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    lines = (VECTORS / "reference_sqlite_statements.tsv").read_text().splitlines()
    sql = dict(line.split("\t", 1) for line in lines if line.strip())
    past = datetime(2000, 1, 1, tzinfo=UTC)
    db = tmp_path / "shared.db"
    with SqliteScheduleStore.open(db) as store:
        plain = ScheduledMessage.cron(Target.outbox(), "0 9 * * *", past, "plain", {})
        store.insert(plain, 3)
        kinds: list[dict[str, Any]] = [
            {"max_firings": 2},
            {"end_at": past + timedelta(days=3)},
            {"jitter": timedelta(minutes=5)},
            {"catch_up": "skip"},
        ]
        for arguments in kinds:
            store.insert(
                ScheduledMessage.cron(Target.outbox(), "0 9 * * *", past, "p", {}, **arguments), 3
            )
    conn = apsw.Connection(str(db))
    claimed: list[Any] = conn.execute(sql["claim"], ("+30 seconds", 10)).fetchall()
    conn.close()
    assert len(claimed) == 5, "the reference's claim reads every row"
    assert sorted(row[4] for row in claimed) == ["0 9 * * *", *["POLICY 0 9 * * *"] * 4]
    for row in claimed:
        if row[4] == "0 9 * * *":
            CronSim(row[4], datetime(2026, 1, 1))  # the reference reads the plain row
            continue
        with pytest.raises((CronSimError, ValueError)):
            CronSim(row[4], datetime(2026, 1, 1))
        with pytest.raises(InvalidTrigger):
            CronExpression.parse(row[4])


def test_a_resumed_jittered_schedule_realigns_to_a_jittered_firing(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    control = SchedulerControl(store)
    control.ensure("app.j", cron="0 * * * *", event_type="j", jitter=timedelta(minutes=30))
    sid = control.id_of("app.j")
    control.pause(sid)
    frozen.move_to(T0 + timedelta(hours=5, minutes=40))
    assert control.resume(sid)
    snap = _snap(store, sid)
    rule = Trigger.cron("0 * * * *")
    policy = SchedulePolicy.of(jitter=timedelta(minutes=30))
    assert snap.occurrence_at == T0 + timedelta(hours=6)
    assert snap.jitter_offset == jitter_offset(policy, rule, sid, snap.occurrence_at)
    assert snap.scheduled_for == snap.occurrence_at + snap.jitter_offset
    assert control.upcoming(sid, count=1) == [snap.scheduled_for]


def test_an_unknown_stored_catch_up_is_a_malformed_row_never_read_as_latest(
    tmp_path: Path,
) -> None:
    """Another tool wrote catch_up = 'every': the listing shows the row as malformed,
    naming the column, and a worker dead-letters it without dispatching it."""
    import apsw

    from hexeract_lite import SchedulerWorker
    from hexeract_lite.snapshot import MalformedSchedule, ScheduleStatus
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    db = tmp_path / "odd.db"
    past = datetime.now(UTC) - timedelta(hours=2)
    msg = ScheduledMessage.cron(
        Target.outbox(), "0 * * * *", past, "p", {}, catch_up="skip", name="odd.catch"
    )
    with SqliteScheduleStore.open(db) as store:
        store.insert(msg, 3)
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE scheduled_messages SET catch_up = 'every'")
    conn.close()
    with SqliteScheduleStore.open(db) as store:
        [listed] = store.list_schedules()
        assert isinstance(listed, MalformedSchedule) and "catch_up" in listed.reason
        seen: list[object] = []
        SchedulerWorker(store, seen.append).run_once()
        assert seen == []
        [after] = store.list_schedules(status="dead-lettered")
        assert after.status is ScheduleStatus.DEAD_LETTERED
