"""Deprecated: the SQLite store's export and import, now methods of the store.

Kept, as two one-line functions, only for :mod:`hexeract_lite.migrate`'s fallback
until it calls :meth:`SqliteScheduleStore.export_records` and
:meth:`SqliteScheduleStore.import_records` directly; delete it then. It imports the
store, never the other way round.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from .record import ScheduleRecord
from .sqlite import SqliteScheduleStore

__all__ = ["export_records", "import_records"]


def export_records(
    store: SqliteScheduleStore, after: uuid.UUID | None, limit: int
) -> list[ScheduleRecord]:
    """``store.export_records(after, limit)``."""
    return store.export_records(after, limit)


def import_records(store: SqliteScheduleStore, records: Sequence[ScheduleRecord]) -> int:
    """``store.import_records(records)``."""
    return store.import_records(records)
