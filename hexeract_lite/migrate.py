"""Copying every schedule, with its state, from one store to another (``hexeract
scheduler migrate``; docs/howto/postgres.md): occurrence ids carry over, a schedule the
destination already holds is skipped, a copy that stopped part-way resumes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import attrs

from .errors import InvalidConfiguration
from .errors import MigrationError as MigrationError
from .store.base import ScheduleStore
from .store.checks import check_limit

DEFAULT_BATCH_SIZE = 500
"""Rows per page read from the source and per transaction written to the destination."""


@attrs.frozen(kw_only=True)
class MigrationReport:
    """What :func:`migrate` did: ``read`` rows from the source, ``copied`` of them into
    the destination."""

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
    state, in pages of ``batch_size`` rows; ``progress`` is told the rows read after each.
    A failure part-way: :class:`MigrationError` with the counts so far."""
    check_limit(batch_size, "batch_size")
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
