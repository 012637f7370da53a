"""settle_plan: a checked batch as the parameters each statement binds, without a store."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hexeract_lite import InvalidConfiguration
from hexeract_lite.settlement import Settlement, SettlementKind
from hexeract_lite.store.checks import check_settlements
from hexeract_lite.store.settle_plan import PlannedSettlement, settle_plan

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LEASE = NOW + timedelta(seconds=30)
A, B, C, D, E = (uuid.UUID(int=n) for n in range(1, 6))


def _lease(lease: datetime) -> str | None:
    return f"lease:{lease.isoformat()}"


def _plan(
    batch: list[Settlement],
    now: datetime | None,
    *,
    encode_lease: Callable[[datetime], Any] = _lease,
    encode_retry_in: Callable[[timedelta], Any] | None = None,
) -> list[PlannedSettlement]:
    """settle_plan with readable encoders: ``id:<int>``, ``lease:<iso>``, ``at:<iso>``."""
    return settle_plan(
        batch,
        now,
        encode_id=lambda sid: f"id:{sid.int}",
        encode_lease=encode_lease,
        encode_instant=lambda instant: f"at:{instant.isoformat()}",
        encode_retry_in=encode_retry_in,
    )


def test_each_kind_binds_its_parameters_in_batch_order() -> None:
    nxt = NOW + timedelta(minutes=1)
    batch = check_settlements(
        [
            Settlement.delivered(A, LEASE),
            Settlement.reschedule(B, nxt, LEASE, offset=timedelta(seconds=2), counted=True),
            Settlement.failed(C, timedelta(seconds=5), "boom", LEASE),
            Settlement.dead_lettered(D, "poison", LEASE),
            Settlement.released(E, LEASE),
        ]
    )
    plan = _plan(batch, NOW)
    lease = f"lease:{LEASE.isoformat()}"
    at_now = f"at:{NOW.isoformat()}"
    assert plan == [
        (
            0,
            SettlementKind.DELIVERED,
            {"id": "id:1", "lease": lease, "now": at_now, "counted": False},
        ),
        (
            1,
            SettlementKind.RESCHEDULE,
            {
                "id": "id:2",
                "lease": lease,
                "next": f"at:{nxt.isoformat()}",
                "counted": True,
                "offset": 2000,
            },
        ),
        (
            2,
            SettlementKind.FAILED,
            {
                "id": "id:3",
                "lease": lease,
                "error": "boom",
                "until": f"at:{(NOW + timedelta(seconds=5)).isoformat()}",
            },
        ),
        (
            3,
            SettlementKind.DEAD_LETTERED,
            {"id": "id:4", "lease": lease, "now": at_now, "error": "poison"},
        ),
        (4, SettlementKind.RELEASED, {"id": "id:5", "lease": lease}),
    ]


def test_an_item_whose_lease_no_stored_lease_can_equal_is_left_out() -> None:
    naive = datetime(2026, 3, 1, 12, 0, 30)
    batch = check_settlements([Settlement.delivered(A, naive), Settlement.delivered(B, LEASE)])
    plan = _plan(batch, NOW, encode_lease=lambda lease: None if lease.tzinfo is None else "ok")
    assert [index for index, _, _ in plan] == [1]


def test_without_now_the_database_clock_binds_nothing_of_the_kind() -> None:
    """A store whose SQL computes instants itself passes now=None (and may bind the delay
    with encode_retry_in)."""
    batch = check_settlements(
        [
            Settlement.delivered(A, LEASE),
            Settlement.failed(B, timedelta(milliseconds=1500), "x", LEASE),
        ]
    )
    plan = _plan(batch, None, encode_retry_in=lambda delay: delay // timedelta(milliseconds=1))
    assert plan[0][2] == {"id": "id:1", "lease": f"lease:{LEASE.isoformat()}", "counted": False}
    assert plan[1][2]["retry_in"] == 1500 and "until" not in plan[1][2]


def test_a_deadline_past_9999_raises_before_anything_is_planned() -> None:
    """Even for an item that would be fenced out: bad input is refused whole."""
    late = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    batch = check_settlements(
        [
            Settlement.delivered(A, LEASE),
            Settlement.failed(B, timedelta(hours=2), "x", datetime(2026, 3, 1)),
        ]
    )
    with pytest.raises(InvalidConfiguration, match="retry_in") as info:
        _plan(batch, late, encode_lease=lambda lease: lease.tzinfo and "ok")
    assert "9999" in str(info.value) and "seconds=7200" in str(info.value)


def test_the_lease_of_a_batch_is_encoded_once() -> None:
    calls: list[datetime] = []

    def encode_lease(lease: datetime) -> str:
        calls.append(lease)
        return "ok"

    batch = check_settlements([Settlement.delivered(sid, LEASE) for sid in (A, B, C)])
    _plan(batch, NOW, encode_lease=encode_lease)
    assert calls == [LEASE]
