"""What an insert writes: the stored text of instants and the row of each message."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexeract_lite import (
    InvalidConfiguration,
    ScheduledMessage,
    Target,
)
from hexeract_lite._time import format_now, format_ts, to_utc_ms
from hexeract_lite.clock import ManualClock
from hexeract_lite.errors import InvalidMessage
from hexeract_lite.message import encode_payload
from hexeract_lite.store.postgres.codec import jsonb_text
from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests.conftest import examples

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_format_ts_takes_a_zero_offset_zone_and_drops_the_sub_millisecond_part() -> None:
    value = datetime(7, 1, 2, 3, 4, 5, 999_999, tzinfo=timezone(timedelta(0)))
    assert format_ts(value) == "0007-01-02T03:04:05.999Z"
    assert format_ts(value.replace(tzinfo=ZoneInfo("UTC"))) == "0007-01-02T03:04:05.999Z"
    assert format_ts(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)) == (
        "9999-12-31T23:59:59.999Z"
    )


@pytest.mark.parametrize("value", [datetime(2026, 3, 1, 12), "2026-03-01", None])
def test_format_now_names_a_bad_clock_value(value: object) -> None:
    with pytest.raises(InvalidConfiguration, match=r"clock\.now\(\)"):
        format_now(value)


class _NaiveClock:
    def now(self) -> datetime:
        return datetime(2026, 3, 1, 12)


def _raw_rows(path: Path) -> list[tuple[object, ...]]:
    conn = apsw.Connection(str(path))
    try:
        return [
            tuple(row)
            for row in conn.execute(
                "SELECT schedule_id, event_type, payload, trigger_kind, cron_expr,"
                " scheduled_for, target_kind, target_routing_key, attempts, max_attempts,"
                " leased_until, paused, last_error, created_at, delivered_at, cancelled_at,"
                " dead_lettered_at, name, next_after_lease, misfire_grace_ms,"
                " typeof(schedule_id), typeof(misfire_grace_ms), typeof(paused)"
                " FROM scheduled_messages ORDER BY scheduled_for"
            )
        ]
    finally:
        conn.close()


def _messages() -> list[ScheduledMessage]:
    return [
        ScheduledMessage.delay(Target.outbox(), T + timedelta(microseconds=1), "e.one", {"a": 1}),
        ScheduledMessage.cron(
            Target.bus("orders.key"),
            "CRON_TZ=Europe/Paris 0 9 * * *",
            T + timedelta(seconds=1),
            "e.cron",
            [1, "é"],
            name="daily-report",
            misfire_grace=timedelta(seconds=90),
        ),
        ScheduledMessage.every(Target.mediator(), "90m", T + timedelta(seconds=2), "e.every", None),
    ]


def _expected(created: str) -> list[tuple[object, ...]]:
    one, cron, every = _messages()
    return [
        (one.schedule_id.bytes, "e.one", '{"a":1}', "delay", None, "2026-03-01T12:00:00.001Z",
         "outbox", None, 0, 4, None, 0, None, created, None, None, None, None, None, None,
         "blob", "null", "integer"),
        (cron.schedule_id.bytes, "e.cron", '[1,"é"]', "cron", "CRON_TZ=Europe/Paris 0 9 * * *",
         "2026-03-01T12:00:01.000Z", "bus", "orders.key", 0, 4, None, 0, None, created, None,
         None, None, "daily-report", None, 90_000, "blob", "integer", "integer"),
        (every.schedule_id.bytes, "e.every", "null", "interval",
         str(every.trigger.interval), "2026-03-01T12:00:02.000Z", "mediator", None, 0, 4, None,
         0, None, created, None, None, None, None, None, None, "blob", "null", "integer"),
    ]  # fmt: skip


@pytest.mark.parametrize("many", [False, True], ids=["insert", "insert_many"])
def test_insert_writes_the_reference_row_of_every_kind_of_message(
    tmp_path: Path, many: bool
) -> None:
    clock = ManualClock(T.replace(microsecond=456_789))
    path = tmp_path / "s.db"
    messages = _messages()
    with SqliteScheduleStore.open(path, clock=clock) as store:
        if many:
            store.insert_many(messages, 4)
        else:
            for m in messages:
                store.insert(m, 4)
    rows = _raw_rows(path)
    expected = _expected("2026-03-01T12:00:00.456Z")
    for row, want, m in zip(rows, expected, messages, strict=True):
        assert row == (m.schedule_id.bytes, *want[1:])  # ids are minted per message


@pytest.mark.parametrize("many", [False, True], ids=["insert", "insert_many"])
def test_a_clock_with_a_naive_now_fails_the_insert_and_writes_nothing(
    tmp_path: Path, many: bool
) -> None:
    path = tmp_path / "s.db"
    with SqliteScheduleStore.open(path, clock=_NaiveClock()) as store:
        message = _messages()[0]
        with pytest.raises(InvalidConfiguration, match=r"clock\.now\(\) must be .*naive"):
            if many:
                store.insert_many([message], 4)
            else:
                store.insert(message, 4)
    assert _raw_rows(path) == []


def test_a_change_wakes_a_waiting_thread_and_one_made_before_the_wait_is_seen() -> None:
    import threading
    import time

    from hexeract_lite.store.base import ChangeSignal

    signal = ChangeSignal()
    before = signal.version()
    signal.notify()  # nobody waits: recorded all the same
    assert signal.wait(before, 30.0) is True
    since = signal.version()
    woke: list[bool] = []
    waiting = threading.Thread(target=lambda: woke.append(signal.wait(since, 30.0)))
    waiting.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the thread is inside wait()
        with signal._mutex:
            if signal._waiting:
                break
        time.sleep(0.001)
    signal.notify()
    waiting.join(60)
    assert woke == [True]
    assert signal._waiting == 0


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


def _json_dumps(payload: Any) -> tuple[str, str]:
    try:
        return "ok", json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        return "refused", str(exc)


def _encode(payload: Any) -> tuple[str, str]:
    try:
        return "ok", encode_payload(payload)
    except InvalidMessage as exc:
        cause = exc.__cause__ or exc.__context__
        assert cause is not None, "the encoder's error is chained"
        assert str(cause) in str(exc) or "not JSON" in str(exc)
        return "refused", str(cause)


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(json_values)
def test_encode_payload_is_compact_strict_json_dumps(payload: Any) -> None:
    assert _encode(payload) == _json_dumps(payload)


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
def test_encode_payload_refuses_and_names_what_json_dumps_refuses(payload: Any) -> None:
    assert _encode(payload) == _json_dumps(payload)


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
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
    """A payload whose repr() raises (an int past the digit limit, an object's own __repr__) is
    refused as InvalidMessage like any payload that is not JSON, a placeholder shown for it."""
    with pytest.raises(InvalidMessage, match="payload is not JSON-serialisable") as info:
        encode_payload(payload)
    assert shown in str(info.value)


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


def _plain_format_ts(value: datetime) -> str:
    """``format_ts`` written plainly with %-formatting: what the day-prefix cached one must
    equal."""
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


@settings(max_examples=examples(500), deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_ts_is_the_plain_formatting_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    assert _outcome(format_ts, value) == _outcome(_plain_format_ts, value)


@settings(max_examples=examples(500), deadline=None, derandomize=True, database=None)
@given(instants, st.sampled_from(_ZONES))
def test_format_now_is_the_plain_formatting_for_every_instant(naive: datetime, zone: Any) -> None:
    value = naive if zone is None else naive.replace(tzinfo=zone)
    old = _outcome(lambda v: _plain_format_ts(to_utc_ms(v, "clock.now()")), value)
    assert _outcome(format_now, value) == old


@pytest.mark.parametrize("value", [None, "2030-01-01T00:00:00Z", 5, datetime(2030, 1, 1)])
def test_format_now_refuses_what_to_utc_ms_refuses(value: object) -> None:
    with pytest.raises(InvalidConfiguration) as got:
        format_now(value)
    with pytest.raises(InvalidConfiguration) as want:
        to_utc_ms(value, "clock.now()")
    assert str(got.value) == str(want.value)


def test_format_ts_is_right_across_many_days_and_threads() -> None:
    """Far more days than the day-prefix cache holds, from several threads at once (it is
    cleared while others read it): every text is the plain formatting's."""
    start = datetime(1999, 12, 25, 23, 59, 59, 999999, tzinfo=UTC)
    days = [start + timedelta(days=d, microseconds=d * 7919) for d in range(0, 4000, 3)]
    bad: list[datetime] = []

    def work(offset: int) -> None:
        for _ in range(3):
            for value in days[offset::4] + days[::-7]:
                if format_ts(value) != _plain_format_ts(value):
                    bad.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert bad == []
