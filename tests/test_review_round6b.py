"""Review round 6b: today's faster paths checked against what they replaced (instant
text, payload text, PostgreSQL's payload numbers, durations on the command line), on
every store where a store is involved."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexeract_lite import EnsureResult, SchedulerControl, ScheduleStore, name_id
from hexeract_lite._time import format_now, format_ts, to_utc_ms
from hexeract_lite.errors import InvalidConfiguration, InvalidMessage
from hexeract_lite.message import encode_payload
from hexeract_lite.store.postgres.codec import jsonb_text

from .conftest import FrozenTime

# --- 4. format_ts / format_now against the %-formatting they replaced ----------------


def _old_format_ts(value: datetime) -> str:
    """``format_ts`` as it was before the day-prefix cache (210cdd1)."""
    if value.tzinfo is not UTC and value.utcoffset() != timedelta(0):
        raise ValueError(f"format_ts needs a UTC datetime, got {value!r}")
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031 - the old text
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond // 1000,
    )


def _outcome(fn: Any, *args: Any) -> tuple[str, str]:
    try:
        return "ok", fn(*args)
    except Exception as exc:
        return type(exc).__name__, str(exc)


_UTC_LIKE = [UTC, timezone(timedelta(0)), ZoneInfo("UTC"), ZoneInfo("Europe/London")]
_ZONES = [*_UTC_LIKE, None, timezone(timedelta(hours=5, minutes=30)), ZoneInfo("America/New_York")]

instants = st.datetimes(
    min_value=datetime(1, 1, 1),
    max_value=datetime(9999, 12, 31, 23, 59, 59, 999999),
)


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_ts_is_the_old_text_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    assert _outcome(format_ts, value) == _outcome(_old_format_ts, value)


@settings(max_examples=2000, deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_now_is_the_old_text_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    old = _outcome(lambda v: _old_format_ts(to_utc_ms(v, "clock.now()")), value)
    assert _outcome(format_now, value) == old


@pytest.mark.parametrize("value", [None, "2030-01-01T00:00:00Z", 5, datetime(2030, 1, 1)])
def test_format_now_refuses_what_to_utc_ms_refuses(value: object) -> None:
    with pytest.raises(InvalidConfiguration) as got:
        format_now(value)
    with pytest.raises(InvalidConfiguration) as want:
        to_utc_ms(value, "clock.now()")
    assert str(got.value) == str(want.value)


def test_the_day_cache_across_many_days_and_threads() -> None:
    """Far more days than the cache holds, from several threads at once (it is
    cleared while others read it): every text is the old one."""
    start = datetime(1999, 12, 25, 23, 59, 59, 999999, tzinfo=UTC)
    days = [start + timedelta(days=d, microseconds=d * 7919) for d in range(0, 4000, 3)]
    bad: list[datetime] = []

    def work(offset: int) -> None:
        for _ in range(3):
            for value in days[offset::4] + days[::-7]:
                if format_ts(value) != _old_format_ts(value):
                    bad.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert bad == []


# --- 4. encode_payload against json.dumps with the old arguments ---------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


def _old_encode(payload: Any) -> tuple[str, str]:
    try:
        return "ok", json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        return "refused", str(exc)


def _new_encode(payload: Any) -> tuple[str, str]:
    try:
        return "ok", encode_payload(payload)
    except InvalidMessage as exc:
        cause = exc.__cause__ or exc.__context__
        assert cause is not None, "the encoder's error is chained"
        assert str(cause) in str(exc) or "not JSON" in str(exc)
        return "refused", str(cause)


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(json_values)
def test_encode_payload_is_json_dumps_with_the_old_arguments(payload: Any) -> None:
    assert _new_encode(payload) == _old_encode(payload)


@pytest.mark.parametrize(
    "payload",
    [
        math.nan,
        {"x": [math.inf]},
        -math.inf,
        {1.5: "float key"},
        {(1, 2): "tuple key"},
        {"s": {1, 2}},
        b"bytes",
        {"é\u2028\ud7ff": "\U0001f600"},
    ],
    ids=["nan", "nested-inf", "-inf", "float-key", "tuple-key", "set", "bytes", "unicode"],
)
def test_encode_payload_refuses_and_names_as_json_dumps_did(payload: Any) -> None:
    assert _new_encode(payload) == _old_encode(payload)


# --- 5. the payload text PostgreSQL's JSONB is sent -----------------------------------


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(json_values)
def test_jsonb_text_is_the_same_json_value(payload: Any) -> None:
    """Whatever the payload, the text bound for JSONB decodes to the payload (floats
    stay floats, ints ints, strings unchanged), and a payload without an exponent-form
    number is sent as it is."""
    try:
        text = encode_payload(payload)
    except InvalidMessage:
        return
    sent = jsonb_text(text)
    assert repr(json.loads(sent)) == repr(json.loads(text))
    if "e+" not in text and "E" not in text and "e" not in text:
        assert sent == text


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr here")


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        (10**5000, "<int that repr() cannot show>"),
        ({"n": [10**5000]}, "<dict that repr() cannot show>"),
        ([_BadRepr()], "<list that repr() cannot show>"),
    ],
    ids=["huge-int", "nested-huge-int", "object-whose-repr-raises"],
)
def test_a_payload_whose_repr_raises_is_refused_as_invalid_message(
    payload: Any, shown: str
) -> None:
    """The error message's ``repr`` of the payload raised in its place: a bare
    ValueError ('Exceeds the limit (4300 digits)') or the object's own exception
    escaped instead of InvalidMessage."""
    with pytest.raises(InvalidMessage, match="payload is not JSON-serialisable") as info:
        encode_payload(payload)
    assert shown in str(info.value)


# --- 5. negative zero: JSONB's numeric has none -----------------------------------------


def test_ensure_of_a_payload_with_negative_zero_is_unchanged_on_every_store(
    store: ScheduleStore, frozen: FrozenTime
) -> None:
    """PostgreSQL stores ``-0.0`` as ``0.0`` (numeric has no negative zero), so ensure
    compared ``-0.0`` with ``0.0`` as text and said UPDATED, a write at every start (the
    fault the exponent-form floats had); update in place wrote it again each time."""
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
    """jsonb_text rewrote the payload recursively (two frames a level): a float written
    with an exponent a few hundred levels down, which the payload's own encoding takes,
    hit the recursion limit and was sent as it was, so PostgreSQL gave back the int."""
    from hexeract_lite import ScheduledMessage, Target

    payload: Any = {"f": 1e20, "s": "1e+20"}
    for _ in range(600):
        payload = [payload]
    msg = ScheduledMessage.delay(Target.mediator(), frozen.now(), "t.x", payload)
    store.insert(msg, 5)
    [occ] = store.claim_due(frozen.now(), 10, timedelta(seconds=30))
    inner = occ.message.payload
    for _ in range(600):
        [inner] = inner
    assert repr(inner) == repr({"f": 1e20, "s": "1e+20"})


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        ('{"a":1e+20}', '{"a":100000000000000000000.0}'),
        ('["1e+20",1E20,-2.5e+16]', '["1e+20",100000000000000000000.0,-25000000000000000.0]'),
        ('{"k\\"1e+5":"x\\\\",  "v": 1.5e3}', '{"k\\"1e+5":"x\\\\",  "v": 1500.0}'),
        ("[1e-7,100000000000000000000,0.5]", "[1e-7,100000000000000000000,0.5]"),
        ('{"a1e+5": 5}', '{"a1e+5": 5}'),
        ("[1e400]", "[1e400]"),
        ("[0.000001e+1, 0e5]", "[1e-05, 0.0]"),
        ('["\u2028\\n\\\\\\"1e+9", 2e+0]', '["\u2028\\n\\\\\\"1e+9", 2.0]'),
    ],
)
def test_jsonb_text_rewrites_only_exponent_form_numbers(text: str, sent: str) -> None:
    assert jsonb_text(text) == sent
    assert json.loads(sent) == json.loads(text) or text == "[1e400]"


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
