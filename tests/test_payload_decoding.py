"""A stored payload read back (``store.record.load_payload``) decodes exactly as
``json.loads`` does: the same value, or the same error, for any text; except the values
that are not JSON (NaN, the infinities, a number beyond a float), which it refuses."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexeract_lite import (
    EnsureResult,
    InMemoryScheduleStore,
    ScheduledMessage,
    SchedulerControl,
    ScheduleStore,
    Target,
    name_id,
)
from hexeract_lite.settle import SUCCEEDED, DispatchResult, ResultKind
from hexeract_lite.store.postgres.codec import jsonb_text
from hexeract_lite.store.record import load_payload

from .conftest import FrozenTime

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _outcome(call: object, text: object) -> tuple[str, object]:
    try:
        value = call(text)  # type: ignore[operator]
    except Exception as exc:
        return type(exc).__name__, str(exc)
    if not _finite(value):
        return "ValueError", "not JSON"
    return "value", value


def _kind(outcome: tuple[str, object]) -> tuple[str, object]:
    return (
        (outcome[0], "not JSON")
        if outcome[0] == "ValueError"
        and ("not JSON" in str(outcome[1]) or "beyond the range" in str(outcome[1]))
        else outcome
    )


@given(_json_values, st.sampled_from(["", " ", "\n", "\t "]), st.sampled_from(["", " ", "\n"]))
def test_a_json_value_with_or_without_whitespace_decodes_as_json_loads(
    value: object, before: str, after: str
) -> None:
    text = before + json.dumps(value, separators=(",", ":")) + after
    assert _outcome(load_payload, text) == _outcome(json.loads, text)


@given(st.text(max_size=40))
def test_any_text_decodes_or_fails_as_json_loads(text: str) -> None:
    assert _kind(_outcome(load_payload, text)) == _kind(_outcome(json.loads, text))


@pytest.mark.parametrize(
    "text",
    ['{"a":1} x', '{"a":1}{"b":2}', "\ufeff{}", "[1,", "", "  ", '"\\ud800"', "1e308"],
)
def test_odd_payloads_decode_or_fail_as_json_loads(text: str) -> None:
    assert _outcome(load_payload, text) == _outcome(json.loads, text)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"a":NaN}', "NaN is not JSON"),
        ("Infinity", "Infinity is not JSON"),
        (" [-Infinity] ", "-Infinity is not JSON"),
        ('{"a":1e999}', "the number 1e999 is beyond the range of a float"),
        ("[-1" + "0" * 400 + ".5]", "beyond the range of a float"),
    ],
)
def test_values_that_are_not_json_are_refused(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        load_payload(text)


def test_bytes_decode_as_json_loads() -> None:
    assert load_payload(b'{"a": [1, 2]}') == {"a": [1, 2]}  # type: ignore[arg-type]


def test_a_dispatch_result_with_its_duration_keeps_its_kind_and_error() -> None:
    timed = SUCCEEDED.took(0.25)
    assert (type(timed), timed.kind, timed.error, timed.duration) == (
        DispatchResult,
        ResultKind.SUCCEEDED,
        None,
        0.25,
    )
    failed = DispatchResult.failed("boom").took(1.5)
    assert (failed.kind, failed.error, failed.duration) == (ResultKind.FAILED, "boom", 1.5)


LEASE = timedelta(seconds=30)


BIG_FLOATS = {
    "a": 1e20,
    "b": 1.23456789012345e25,
    "c": [1.7976931348623157e308, -2e16],
    "d": 1e-7,
    "e": {"n": 10**20, "text": "1e+20"},
}


def test_a_payloads_floats_come_back_as_written_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """The README promises JSON payloads delivered as given, on every store: floats stay floats
    and ints ints, even where PostgreSQL's JSONB numeric would drop the fraction of a float
    written with an exponent (``1e20``)."""
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", BIG_FLOATS)
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert occ.message.payload == BIG_FLOATS
    assert repr(occ.message.payload) == repr(BIG_FLOATS), "floats stay floats, ints ints"
    snap = store.inspect(msg.schedule_id)
    assert snap is not None and snap.payload_json == msg.payload_json


def test_ensure_of_a_payload_with_big_floats_is_unchanged_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """ensure of a payload with exponent-form floats, declared again, is UNCHANGED: what the
    store reads back compares equal, no write at every start."""
    control = SchedulerControl(store)
    args = {"cron": "@daily", "event_type": "t.x", "payload": BIG_FLOATS}
    assert control.ensure("app.big", **args) is EnsureResult.CREATED  # type: ignore[arg-type]
    assert control.ensure("app.big", **args) is EnsureResult.UNCHANGED  # type: ignore[arg-type]
    control.update("app.big", payload={"x": 3e30})
    [occ] = store.claim_due(frozen.shift(timedelta(days=1)), 10, LEASE)
    assert repr(occ.message.payload) == repr({"x": 3e30})


def test_a_migrated_payloads_floats_stay_floats(store: ScheduleStore, frozen: FrozenTime) -> None:
    source = InMemoryScheduleStore()
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", BIG_FLOATS)
    source.insert(msg, 5)
    store.import_records(source.export_records(None, 10))
    [occ] = store.claim_due(frozen.now(), 10, LEASE)
    assert repr(occ.message.payload) == repr(BIG_FLOATS)


def test_ensure_of_a_payload_with_negative_zero_is_unchanged_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """PostgreSQL's numeric has no negative zero (``-0.0`` is stored as ``0.0``): ensure and
    update of a payload holding ``-0.0`` still find it unchanged when declared again."""
    control = SchedulerControl(store)
    args: dict[str, Any] = {"cron": "@daily", "event_type": "t.x", "payload": {"z": -0.0}}
    assert control.ensure("app.zero", **args) is EnsureResult.CREATED
    assert control.ensure("app.zero", **args) is EnsureResult.UNCHANGED
    assert control.update("app.zero", payload={"z": [-0.0]})
    assert not control.update("app.zero", payload={"z": [-0.0]})
    snap = control.inspect(name_id("app.zero"))
    assert snap is not None and json.loads(snap.payload_json) == {"z": [0.0]}


def test_a_deeply_nested_payloads_big_floats_stay_floats_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """A float written with an exponent hundreds of levels deep in a payload (which the
    payload's own encoding takes) still comes back a float: no depth limit of the JSONB
    rewrite sends it unchanged."""
    from hexeract_lite import InvalidMessage, ScheduledMessage, Target

    levels = 600
    if any(c.__name__ == "MysqlScheduleStore" for c in type(store).__mro__):
        # MariaDB's JSON stops at 32 levels: deeper is refused, naming the depth
        deep: Any = {"f": 1e20}
        for _ in range(40):
            deep = [deep]
        too_deep = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", deep)
        with pytest.raises(InvalidMessage, match="nests 41 levels deep"):
            store.insert(too_deep, 5)
        assert store.inspect(too_deep.schedule_id) is None
        levels = 30
    payload: Any = {"f": 1e20, "s": "1e+20"}
    for _ in range(levels):
        payload = [payload]
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", payload)
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, timedelta(seconds=30))
    inner = occ.message.payload
    for _ in range(levels):
        [inner] = inner
    assert repr(inner) == repr({"f": 1e20, "s": "1e+20"})


def _typed(value: Any) -> Any:
    """A JSON value as comparable data: types kept (1 is not 1.0), object keys in
    order, negative zero as zero (PostgreSQL's numeric has none)."""
    if isinstance(value, float):
        return ("float", value.hex() if value else "0x0.0p+0")
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return (type(value).__name__, value)
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return sorted((key, _typed(item)) for key, item in value.items())


finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e16, -2e16, 1.7976931348623157e308, 5e-324, 1e-7, 123456789.0])
    | st.text(alphabet=st.sampled_from('ae+-1.0E"\\ \u00e9\u2028x'), max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def pg_store() -> Any:
    from tests.pg import open_scratch_store, server

    if server()[0] is None:
        pytest.skip("no PostgreSQL server")
    store = open_scratch_store()
    yield store
    store.close()


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.lists(finite_json, min_size=1, max_size=15))
def test_postgres_gives_back_every_payload_as_written(pg_store: Any, payloads: list[Any]) -> None:
    """Through the real server: every JSON value (floats of any exponent, ints as big
    as floats, strings full of digits and exponents, nesting) comes back the same
    value of the same types."""
    from hexeract_lite import ScheduledMessage, Target

    at = datetime(2030, 1, 1, tzinfo=UTC)
    messages = [ScheduledMessage.delay(Target.mediator(), at, "t.x", p) for p in payloads]
    pg_store.insert_many(messages, 5)
    for message, payload in zip(messages, payloads, strict=True):
        snap = pg_store.inspect(message.schedule_id)
        assert snap is not None
        assert _typed(json.loads(snap.payload_json)) == _typed(payload)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(finite_json, st.sampled_from([None, 0, 2]), st.booleans())
def test_jsonb_text_reads_any_layout_of_json(
    payload: Any, indent: int | None, escaped: bool
) -> None:
    """An imported row's payload text may be laid out otherwise (spaces, newlines,
    escaped non-ASCII): only its exponent-form numbers change."""
    text = json.dumps(payload, indent=indent, ensure_ascii=escaped)
    sent = jsonb_text(text)
    assert repr(json.loads(sent)) == repr(json.loads(text))
