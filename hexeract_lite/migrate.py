"""Copying every schedule, with its state, from one store to another.

``hexeract scheduler migrate`` runs :func:`migrate`; an application can call it too,
e.g. to move from the SQLite file to PostgreSQL when one machine is no longer enough::

    from hexeract_lite.migrate import migrate
    from hexeract_lite.store.postgres import PostgresScheduleStore
    from hexeract_lite.store.sqlite import SqliteScheduleStore

    with (
        SqliteScheduleStore.open("/var/lib/app/scheduler.db", create=False) as source,
        PostgresScheduleStore.open("postgresql://app@db/app") as dest,
    ):
        report = migrate(source, dest)

What is copied: every row, whatever its status (pending, paused, leased or in retry
backoff, delivered, cancelled, dead-lettered), every column as stored: attempts and
``max_attempts``, ``leased_until``, the paused flag, ``last_error``, ``created_at``,
``scheduled_for``, the terminal timestamps, trigger, target and payload. Occurrence
ids derive from the schedule id and ``scheduled_for``, both kept, so a sink's
deduplication keeps working across the move. The run log is not copied: the
destination's starts empty.

Idempotent: a schedule whose id the destination already holds is skipped and left as
it is, never overwritten; so running the copy again copies only what is new, and a copy
that stopped part-way (a lost connection) resumes where it was.

The source is read in pages of ``batch_size`` rows in schedule id order, each page
written to the destination in one transaction. Stop the workers on the source first:
pages are read one after another, and a change the source makes to a row after that
row was copied is not carried over by a later run (the row is skipped). A row leased at
the time of the copy keeps its lease in the destination; if its worker never
acknowledges there, the lease expires and the occurrence is delivered again
(at-least-once).
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
    """Copy every schedule of ``source`` that ``dest`` does not hold yet, with its
    whole state; return the counts (see the module docstring for what is copied and
    how a re-run behaves).

    Memory stays bounded by ``batch_size`` (>= 1, else :class:`InvalidConfiguration`)
    rows. A failure part-way raises :class:`MigrationError` with the counts so far,
    chained to the store's error; the pages written before it stay written. Either
    store may be any :class:`ScheduleStore` that implements
    :meth:`~ScheduleStore.export_records` (the source) and
    :meth:`~ScheduleStore.import_records` (the destination): the in-memory, SQLite and
    PostgreSQL stores all do. ``progress``, when given, is told the rows read so far
    after each page.
    """
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
