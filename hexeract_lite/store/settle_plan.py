"""The settle plan: a checked batch of settlements as the parameters each item writes,
the same in every SQL dialect but for the encoders a store passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..settlement import Settlement, SettlementKind
from .checks import retry_deadline

__all__ = ["HELD_KINDS", "PlannedSettlement", "settle_plan"]

_MS = timedelta(milliseconds=1)

HELD_KINDS = frozenset({SettlementKind.FAILED, SettlementKind.SNOOZED})
_AT_NOW = frozenset(
    {SettlementKind.DELIVERED, SettlementKind.DEAD_LETTERED, SettlementKind.CANCELLED}
)

PlannedSettlement = tuple[int, SettlementKind, dict[str, Any]]
"""``(index in the batch, kind, parameters)``: one statement to run."""


def settle_plan(
    checked: Sequence[Settlement],
    now: datetime | None,
    *,
    encode_id: Callable[[uuid.UUID], Any],
    encode_lease: Callable[[datetime], Any],
    encode_instant: Callable[[datetime], Any],
    encode_retry_in: Callable[[timedelta], Any] | None = None,
) -> list[PlannedSettlement]:
    """Each item's parameters in batch order (``id``, ``lease``, then what its kind
    writes), leaving out an item whose lease ``encode_lease`` maps to None. ``now``: the
    batch's clock reading (None: the database's). Every retry deadline is computed
    first, so one past the year 9999 raises before anything is written."""
    deadlines: dict[int, datetime] = {}
    if now is not None:
        for index, item in enumerate(checked):
            if item.kind in HELD_KINDS:
                assert item.retry_in is not None
                deadlines[index] = retry_deadline(now, item.retry_in)
    now_value = None if now is None else encode_instant(now)
    plan: list[PlannedSettlement] = []
    lease: object = None
    token: Any = None
    for index, item in enumerate(checked):
        if item.lease is not lease:  # a batch's items share the claim's lease
            lease = item.lease
            token = encode_lease(item.lease)
        if token is None:
            continue  # no lease this store hands out: fenced out
        params: dict[str, Any] = {"id": encode_id(item.schedule_id), "lease": token}
        kind = item.kind
        if now is not None and kind in _AT_NOW:
            params["now"] = now_value
        if kind is SettlementKind.DELIVERED or kind is SettlementKind.RESCHEDULE:
            params["counted"] = item.counted
        if kind is SettlementKind.RESCHEDULE:
            assert item.next is not None
            params["next"] = encode_instant(item.next)
            params["offset"] = None if item.offset is None else item.offset // _MS
        if kind is SettlementKind.FAILED or kind is SettlementKind.DEAD_LETTERED:
            params["error"] = item.error
        if kind in HELD_KINDS:
            assert item.retry_in is not None
            if now is not None:
                params["until"] = encode_instant(deadlines[index])
            if encode_retry_in is not None:
                params["retry_in"] = encode_retry_in(item.retry_in)
        plan.append((index, kind, params))
    return plan
