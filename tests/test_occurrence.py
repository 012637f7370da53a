"""OccurrenceId.derive equals hexeract's rule bit for bit (REFERENCE.md, Identity)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexeract_lite import OccurrenceId
from hexeract_lite.occurrence import OCCURRENCE_NAMESPACE

SID = uuid.UUID("0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b")


def reference_rule(schedule_id: uuid.UUID, sign: int, offset_ns: int) -> uuid.UUID:
    """The rule written out independently of the implementation."""
    name = schedule_id.bytes + bytes([sign]) + offset_ns.to_bytes(16, "big")
    raw = bytearray(
        hashlib.sha1(bytes.fromhex("6b9d1c2e7a444f8e9c102d3b4c5d6e7f") + name).digest()[:16]
    )
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(raw))


# Vectors computed once from the rule above and pinned, so a change to either side fails.
VECTORS = [
    (datetime(1970, 1, 1, tzinfo=UTC), 1, 0),
    (datetime(2026, 3, 1, 12, 0, tzinfo=UTC), 1, 1_772_366_400_000_000_000),
    (datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC), 0, 1_000_000),
    (datetime(1900, 1, 1, tzinfo=UTC), 0, 2_208_988_800_000_000_000),
]


def test_namespace_is_the_references() -> None:
    assert OCCURRENCE_NAMESPACE.bytes == bytes(
        [
            0x6B,
            0x9D,
            0x1C,
            0x2E,
            0x7A,
            0x44,
            0x4F,
            0x8E,
            0x9C,
            0x10,
            0x2D,
            0x3B,
            0x4C,
            0x5D,
            0x6E,
            0x7F,
        ]
    )


@pytest.mark.parametrize(("instant", "sign", "offset"), VECTORS)
def test_derive_matches_the_rule(instant: datetime, sign: int, offset: int) -> None:
    got = OccurrenceId.derive(SID, instant)
    assert got.as_uuid() == reference_rule(SID, sign, offset)
    assert got.as_uuid().version == 5
    assert got.as_uuid().variant == uuid.RFC_4122


PINNED = [
    "64bd19b3-6324-5a17-a23d-c4676a23f6f5",
    "ff6581c2-1302-5a0f-8534-802354efd463",
    "74205260-ebb2-5159-b572-2f476055ee55",
    "e4ac6e49-b4af-580f-8578-938411068c92",
]


@pytest.mark.parametrize(("vector", "text"), list(zip(VECTORS, PINNED, strict=True)))
def test_pinned_values(vector: tuple[datetime, int, int], text: str) -> None:
    """The ids of VECTORS, computed once from the rule and pinned as text."""
    assert str(OccurrenceId.derive(SID, vector[0])) == text
    assert repr(OccurrenceId.derive(SID, vector[0])) == f"OccurrenceId('{text}')"


def test_same_firing_same_id_other_instant_other_id() -> None:
    t = datetime(2026, 3, 1, 12, tzinfo=UTC)
    a = OccurrenceId.derive(SID, t)
    b = OccurrenceId.derive(SID, t.astimezone(timezone(timedelta(hours=-5))))
    assert a == b and hash(a) == hash(b)
    assert a != OccurrenceId.derive(SID, t + timedelta(milliseconds=1))
    assert a != OccurrenceId.derive(uuid.uuid4(), t)
    assert sorted([a, b]) == [a, b]


def test_naive_instant_is_rejected() -> None:
    with pytest.raises(ValueError, match="naive"):
        OccurrenceId.derive(SID, datetime(2026, 1, 1))


@given(
    st.uuids(),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.just(UTC),
    ),
)
def test_derive_agrees_with_the_rule_everywhere(sid: uuid.UUID, instant: datetime) -> None:
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    ns = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
    expected = reference_rule(sid, 1 if ns >= 0 else 0, abs(ns))
    assert OccurrenceId.derive(sid, instant).as_uuid() == expected
