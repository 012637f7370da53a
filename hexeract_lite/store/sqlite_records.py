"""SqliteScheduleStore's half of the export/import pair: copying rows in and out.

:meth:`ScheduleStore.export_records` and :meth:`ScheduleStore.import_records` for the
SQLite store, as functions taking the store. They run inside the store's own plumbing,
so they share its lock, its ``BEGIN IMMEDIATE`` transactions and its error mapping;
that plumbing is semi-private (``store._read``, ``store._write``, ``store._records``),
which is why this module sits beside :mod:`.sqlite`, in the same package.
:func:`hexeract_lite.migrate.migrate` calls these for a SQLite store until
``SqliteScheduleStore`` carries the two methods itself (they would delegate here).

Rows are written exactly as given: every column, timestamps as the reference's
``YYYY-MM-DDTHH:MM:SS.mmmZ`` text, the schedule id as its 16 raw bytes.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._time import format_ts
from ..errors import InvalidConfiguration, StoreError
from .base import check_export, check_records
from .record import ScheduleRecord
from .schema import REFERENCE_COLUMNS, validate_table_name

if TYPE_CHECKING:
    from .sqlite import SqliteScheduleStore

__all__ = ["export_records", "import_records"]

_MAX_INT64 = 2**63 - 1
_COLUMNS = ", ".join(name for name, _, _ in REFERENCE_COLUMNS)


class _Sql:
    """The three statements, for one validated table name."""

    def __init__(self, table: str) -> None:
        t = validate_table_name(table)
        # both read the primary key's index in order: no sort, O(limit) per page
        self.export_first = f"SELECT {_COLUMNS} FROM {t} ORDER BY schedule_id LIMIT :n"
        self.export_after = (
            f"SELECT {_COLUMNS} FROM {t} WHERE schedule_id > :after ORDER BY schedule_id LIMIT :n"
        )
        marks = ", ".join("?" for _ in REFERENCE_COLUMNS)
        self.import_row = (
            f"INSERT INTO {t} ({_COLUMNS}) VALUES ({marks}) ON CONFLICT (schedule_id) DO NOTHING"
        )


@functools.cache
def _sql(table: str) -> _Sql:
    return _Sql(table)


def _ts(value: datetime | None) -> str | None:
    return None if value is None else format_ts(value)


def _row(record: ScheduleRecord) -> tuple[Any, ...]:
    """A record as the values of one row, in :data:`REFERENCE_COLUMNS` order."""
    for name in ("attempts", "max_attempts"):
        if getattr(record, name) > _MAX_INT64:
            raise InvalidConfiguration(
                f"record {record.schedule_id}: {name} must be at most {_MAX_INT64} on SQLite,"
                f" got {getattr(record, name)}"
            )
    return (
        record.schedule_id.bytes,
        record.event_type,
        record.payload,
        record.trigger_kind,
        record.cron_expr,
        format_ts(record.scheduled_for),
        record.target_kind,
        record.target_routing_key,
        record.attempts,
        record.max_attempts,
        _ts(record.leased_until),
        1 if record.paused else 0,
        record.last_error,
        format_ts(record.created_at),
        _ts(record.delivered_at),
        _ts(record.cancelled_at),
        _ts(record.dead_lettered_at),
    )


def export_records(
    store: SqliteScheduleStore, after: uuid.UUID | None, limit: int
) -> list[ScheduleRecord]:
    """:meth:`ScheduleStore.export_records` on ``store``: up to ``limit`` rows after
    ``after`` in schedule id (byte) order, one read.

    A row that cannot be read as a record (a schedule id that is not 16 bytes, a
    timestamp that is not one) raises :class:`StoreError` naming it: a copy never
    silently leaves a row behind.
    """
    after = check_export(after, limit)
    sql = _sql(store.table)
    if after is None:
        rows = store._read("export_records", sql.export_first, {"n": limit})
    else:
        rows = store._read("export_records", sql.export_after, {"after": after.bytes, "n": limit})
    try:
        return store._records(rows)
    except StoreError:
        for row in rows:  # name the first row that does not read
            try:
                store._records([row])
            except StoreError as exc:
                raise StoreError(
                    f"cannot export the row with schedule_id {row[0]!r:.80} of {store.table}"
                    f" in {store.path}: {exc}"
                ) from exc
        raise


def import_records(store: SqliteScheduleStore, records: Sequence[ScheduleRecord]) -> int:
    """:meth:`ScheduleStore.import_records` on ``store``: the rows whose id is absent
    are inserted as given, in one ``BEGIN IMMEDIATE`` transaction; returns how many."""
    rows = [_row(record) for record in check_records(records)]
    if not rows:
        return 0
    with store._write("import_records") as cur:
        conn = cur.connection
        before = conn.total_changes()
        cur.executemany(_sql(store.table).import_row, rows)
        inserted = conn.total_changes() - before
    if inserted:
        store.changes.notify()
    return inserted
