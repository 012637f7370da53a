"""What the console shows of the past: the hourly chart's counts and a schedule's runs.

These two functions are the console's only source for history, so that a run log can
replace what they read without touching a page:

- :func:`hourly_counts` gives, for each of the hours from ``since`` to ``now``, how many
  one-shot schedules were delivered and how many schedules were dead-lettered in it. A
  row keeps only its last outcome, so this counts rows by the hour they ended in: a
  recurring schedule's firings and the failed attempts before a retry leave no trace
  in the table and are not counted. On SQLite both counts come from one read of the
  ``delivered_at`` and ``dead_lettered_at`` indexes over the window; on other stores
  the dead letters come from the newest :data:`DEAD_LETTER_CAP` of
  ``list_dead_letter`` and deliveries are not known (``delivered`` is None).
- :func:`runs_for` gives a schedule's recent runs, newest first. Without a run log the
  table holds none: it returns an empty list and :data:`RUNS_UNAVAILABLE` says why.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import attrs

from .._time import format_ts, parse_ts
from ..errors import StoreError

if TYPE_CHECKING:
    from ..store.base import ScheduleStore

__all__ = [
    "DEAD_LETTER_CAP",
    "RUNS_UNAVAILABLE",
    "HourlyCounts",
    "hourly_counts",
    "runs_for",
]

HOUR = timedelta(hours=1)
_END_COLUMNS = ("delivered_at", "dead_lettered_at")

DEAD_LETTER_CAP = 1000
"""How many of the newest dead letters a store without an hourly query is read for."""

RUNS_UNAVAILABLE = (
    "This store keeps no run log: a schedule's row holds only its last attempt"
    " (see its attempts and last error above)."
)
"""What the schedule page says in place of its runs while :func:`runs_for` has none."""


@attrs.frozen(kw_only=True)
class HourlyCounts:
    """Counts per hour: ``hours[i]`` starts the hour ``delivered[i]`` and
    ``failed[i]`` count; ``delivered`` is None when the store cannot tell;
    ``capped`` when ``failed`` was read from a bounded page that may miss older ones."""

    hours: list[datetime]
    delivered: list[int] | None
    failed: list[int]
    capped: bool = False
    source: str = ""
    """One sentence on what the counts are, for the chart's caption."""


def _hour_of(instant: datetime) -> datetime:
    return instant.replace(minute=0, second=0, microsecond=0)


def hourly_counts(store: ScheduleStore, since: datetime, now: datetime) -> HourlyCounts:
    """Deliveries and dead letters per hour from the hour of ``since`` to the hour of
    ``now`` (aware UTC instants), oldest first (see the module docstring for what is
    counted)."""
    start = _hour_of(since)
    hours = []
    at = start
    while at <= now:
        hours.append(at)
        at += HOUR
    index = {h: i for i, h in enumerate(hours)}
    delivered = [0] * len(hours)
    failed = [0] * len(hours)
    read = _sqlite_reader(store)
    per_column: list[list[tuple[str, int]]] | None = None
    if read is not None:
        try:
            per_column = [read(column, format_ts(start)) for column in _END_COLUMNS]
        except StoreError:  # an older table without these indexes: read as other stores
            per_column = None
    if read is not None and per_column is not None:
        for rows, counts in zip(per_column, (delivered, failed), strict=True):
            for hour, n in rows:
                slot = index.get(parse_ts(f"{hour}:00:00.000Z"))
                if slot is not None:
                    counts[slot] += n
        return HourlyCounts(
            hours=hours,
            delivered=delivered,
            failed=failed,
            source="one-shot schedules delivered and schedules dead-lettered, by the hour"
            " their row ended in",
        )
    capped = False
    newest = store.list_dead_letter(DEAD_LETTER_CAP)
    for row in newest:
        ended = getattr(row, "dead_lettered_at", None)
        if ended is None:
            continue
        if ended < start:
            break
        slot = index.get(_hour_of(ended))
        if slot is not None:
            failed[slot] += 1
    else:
        capped = len(newest) >= DEAD_LETTER_CAP
    return HourlyCounts(
        hours=hours,
        delivered=None,
        failed=failed,
        capped=capped,
        source="schedules dead-lettered, by the hour their row ended in"
        " (deliveries are not known on this store without a run log)",
    )


def _sqlite_reader(store: ScheduleStore) -> _Reader | None:
    """For a SQLite store, a function counting rows per hour of one end column from
    an instant on, on that column's partial index; None for other stores.

    The store offers no such query: this reads through its read connection. The run
    log replaces it."""
    from ..store.sqlite import SqliteScheduleStore

    if not isinstance(store, SqliteScheduleStore):
        return None
    table = store.table
    index = {
        "delivered_at": f"idx_{table}_delivered",
        "dead_lettered_at": f"idx_{table}_dead_letter",
    }

    def read(column: str, start: str) -> list[tuple[str, int]]:
        sql = (
            f"SELECT substr({column}, 1, 13), count(*) FROM {table} INDEXED BY {index[column]}"
            f" WHERE {column} IS NOT NULL AND {column} >= :start GROUP BY 1"
        )
        return [(str(h), int(n)) for h, n in store._read("history", sql, {"start": start})]

    return read


if TYPE_CHECKING:
    from collections.abc import Callable

    _Reader = Callable[[str, str], list[tuple[str, int]]]


def runs_for(store: ScheduleStore, schedule_id: uuid.UUID, limit: int = 50) -> list[object]:
    """The schedule's last ``limit`` runs, newest first. Without a run log there are
    none: an empty list (the page shows :data:`RUNS_UNAVAILABLE`)."""
    return []
