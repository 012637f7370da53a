"""A stored payload read back (``store.record.load_payload``) decodes exactly as
``json.loads`` does: the same value, or the same error, for any text; except the values
that are not JSON (NaN, the infinities, a number beyond a float), which it refuses."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexeract_lite.settle import SUCCEEDED, DispatchResult, ResultKind
from hexeract_lite.store.record import load_payload

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
