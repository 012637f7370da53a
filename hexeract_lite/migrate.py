"""Copying every schedule, with its state, from one store to another.

``hexeract scheduler migrate`` runs :func:`migrate`; an application can call it too::

    from hexeract_lite.migrate import migrate
    from hexeract_lite.store.postgres import PostgresScheduleStore
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    with (
        SqliteScheduleStore.open("/var/lib/app/scheduler.db", create=False) as source,
        PostgresScheduleStore.open("postgresql://app@db/app") as dest,
    ):
        report = migrate(source, dest)

Every row is copied, whatever its status, with every column as stored, so occurrence
ids (and a sink's deduplication) carry over; the run log is not copied. A schedule
whose id the destination already holds is skipped, never overwritten: running it again
copies only what is new, and a copy that stopped part-way resumes.

The source is read in pages of ``batch_size`` rows in id order, each page written in
one transaction. Stop the workers on the source first: a change made to a row after it
was copied is not carried over by a later run. A leased row keeps its lease in the
destination; unacknowledged there, it is delivered again once the lease expires.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs

from .errors import InvalidConfiguration, MigrationError
from .store.base import ScheduleStore

__all__ = ["DEFAULT_BATCH_SIZE", "MigrationError", "MigrationReport", "migrate"]

DEFAULT_BATCH_SIZE = 500
"""Rows per page read from the source and per transaction written to the destination."""


@attrs.frozen(kw_only=True)
class MigrationReport:
    """What :func:`migrate` did: ``read`` rows from the source, ``copied`` of them into
    the destination, ``skipped`` the rest (``read - copied``: the destination already
    held a schedule with that id)."""

    read: int
    copied: int

    @property
    def skipped(self) -> int:
        """Rows read but not copied: their id was already in the destination."""
        return self.read - self.copied

    def to_json_dict(self) -> dict[str, int]:
        """``{"read": ..., "copied": ..., "skipped": ...}``."""
        return {"read": self.read, "copied": self.copied, "skipped": self.skipped}


def migrate(
    source: ScheduleStore,
    dest: ScheduleStore,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Copy every schedule of ``source`` that ``dest`` does not hold yet, with its whole
    state; return the counts.

    Memory stays bounded by ``batch_size`` (>= 1) rows; ``progress`` is told the rows
    read after each page. A failure part-way: :class:`MigrationError` with the counts so
    far, the pages written staying written. A source without
    :meth:`~ScheduleStore.export_records`, a destination without
    :meth:`~ScheduleStore.import_records`, or a bad ``batch_size``:
    :class:`InvalidConfiguration`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidConfiguration(f"batch_size must be an integer >= 1, got {batch_size!r}")
    # Checked before the first page, so a store that cannot take part copies nothing.
    if not source.copies_records:
        raise InvalidConfiguration(f"cannot migrate from {source!r}: it has no export_records")
    if not dest.copies_records:
        raise InvalidConfiguration(f"cannot migrate to {dest!r}: it has no import_records")
    after: uuid.UUID | None = None
    read = copied = 0
    while True:
        try:
            page = source.export_records(after, batch_size)
            if page:
                copied += dest.import_records(page)
        except Exception as exc:
            report = MigrationReport(read=read, copied=copied)
            raise MigrationError(
                f"the copy stopped after {read} rows read, {copied} copied: {exc}"
                " (what was copied stays copied; run it again to resume)",
                report,
            ) from exc
        read += len(page)
        if progress is not None and page:
            progress(read)
        if len(page) < batch_size:
            return MigrationReport(read=read, copied=copied)
        after = page[-1].schedule_id
