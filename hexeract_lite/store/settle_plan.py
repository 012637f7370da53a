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

__all__ = ["PlannedSettlement", "settle_plan"]

_MS = timedelta(milliseconds=1)

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
    """The statements a batch needs, in batch order, one per item that can apply.

    ``checked`` is what :func:`~hexeract_lite.store.base.check_settlements` returned;
    ``now`` is the store's one reading of its clock for the batch (None for a store
    whose SQL computes instants from the database's clock instead). Each item's
    parameters:

    - every kind: ``id`` (``encode_id(schedule_id)``) and ``lease``
      (``encode_lease(lease)``); an item whose ``encode_lease`` is None is fenced out
      (no stored lease can equal it) and left out of the plan: it gets False;
    - ``delivered``: ``now`` and ``counted`` (the firing counts: ``firings`` goes up by
      one); ``dead_lettered``: ``now`` and ``error`` (``now`` only when it is given);
    - ``reschedule``: ``next``, ``counted`` and ``offset`` (the next firing's
      ``jitter_offset_ms``, None for none);
    - ``failed``: ``error``, ``until`` (``encode_instant(now + retry_in)``, when
      ``now`` is given) and ``retry_in`` (``encode_retry_in(retry_in)``, when given);
    - ``snoozed``: ``until`` and ``retry_in``, as ``failed``;
    - ``cancelled``: ``now``;
    - ``released``: nothing more.

    Every ``failed`` item's deadline is computed first, fenced out or not, so a
    ``retry_in`` past the year 9999 raises
    :class:`~hexeract_lite.errors.InvalidConfiguration` before anything is written.
    """
    deadlines: dict[int, datetime] = {}
    if now is not None:
        for index, item in enumerate(checked):
            if item.kind is SettlementKind.FAILED or item.kind is SettlementKind.SNOOZED:
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
        if kind is SettlementKind.DELIVERED:
            if now is not None:
                params["now"] = now_value
            params["counted"] = item.counted
        elif kind is SettlementKind.RESCHEDULE:
            assert item.next is not None
            params["next"] = encode_instant(item.next)
            params["counted"] = item.counted
            params["offset"] = None if item.offset is None else item.offset // _MS
        elif kind is SettlementKind.FAILED:
            assert item.retry_in is not None
            params["error"] = item.error
            if now is not None:
                params["until"] = encode_instant(deadlines[index])
            if encode_retry_in is not None:
                params["retry_in"] = encode_retry_in(item.retry_in)
        elif kind is SettlementKind.DEAD_LETTERED:
            if now is not None:
                params["now"] = now_value
            params["error"] = item.error
        elif kind is SettlementKind.SNOOZED:
            assert item.retry_in is not None
            if now is not None:
                params["until"] = encode_instant(deadlines[index])
            if encode_retry_in is not None:
                params["retry_in"] = encode_retry_in(item.retry_in)
        elif kind is SettlementKind.CANCELLED and now is not None:
            params["now"] = now_value
        plan.append((index, kind, params))
    return plan
