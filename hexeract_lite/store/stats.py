"""StoreStats: what ``store.stats()`` and ``hexeract scheduler stats`` report."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import attrs

from .._time import format_ts
from ..snapshot import ScheduleStatus
from .record import ScheduleRecord

__all__ = ["StoreStats", "stats_of_records"]


@attrs.frozen(kw_only=True)
class StoreStats:
    """A store's counts at ``at`` (the store's clock): rows by status (``pending``
    including those due, in flight and in backoff); ``due``, pending, unclaimed and due,
    with ``oldest_due_lag``; ``in_flight`` and ``in_backoff`` (leased rows without and
    with a past failure); ``next_wakeup``; the SQLite ``file_bytes`` and ``wal_bytes``.
    """

    at: datetime
    pending: int
    paused: int
    delivered: int
    cancelled: int
    dead_lettered: int
    due: int
    in_flight: int
    in_backoff: int
    oldest_due_lag: timedelta | None
    next_wakeup: datetime | None
    file_bytes: int | None = None
    wal_bytes: int | None = None

    @property
    def total(self) -> int:
        """Every row, whatever its status."""
        return self.pending + self.paused + self.delivered + self.cancelled + self.dead_lettered

    def as_json(self) -> dict[str, object]:
        """The stats as JSON values (instants as text, durations in seconds)."""
        lag = self.oldest_due_lag
        return {
            "at": format_ts(self.at),
            "counts": {
                "pending": self.pending,
                "paused": self.paused,
                "delivered": self.delivered,
                "cancelled": self.cancelled,
                "dead-lettered": self.dead_lettered,
                "total": self.total,
            },
            "due": self.due,
            "in_flight": self.in_flight,
            "in_backoff": self.in_backoff,
            "oldest_due_lag_seconds": None if lag is None else lag.total_seconds(),
            "next_wakeup": None if self.next_wakeup is None else format_ts(self.next_wakeup),
            "file_bytes": self.file_bytes,
            "wal_bytes": self.wal_bytes,
        }


def stats_of_records(
    records: Iterable[ScheduleRecord], now: datetime, next_wakeup: datetime | None
) -> StoreStats:
    """The stats of ``records`` at ``now``, row by row (the definition SQL stores follow)."""
    by_status = dict.fromkeys(ScheduleStatus, 0)
    due = in_flight = in_backoff = 0
    oldest: datetime | None = None
    for row in records:
        status = row.status()
        by_status[status] += 1
        if status is not ScheduleStatus.PENDING:
            continue
        if row.live_lease(now) is not None:
            if row.last_error is None:
                in_flight += 1
            else:
                in_backoff += 1
        elif row.scheduled_for <= now:
            due += 1
            if oldest is None or row.scheduled_for < oldest:
                oldest = row.scheduled_for
    counts: dict[str, Any] = {status.name.lower(): n for status, n in by_status.items()}
    return StoreStats(
        at=now,
        **counts,
        due=due,
        in_flight=in_flight,
        in_backoff=in_backoff,
        oldest_due_lag=None if oldest is None else now - oldest,
        next_wakeup=next_wakeup,
    )
