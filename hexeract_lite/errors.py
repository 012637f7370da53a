"""The errors hexeract_lite raises: each derives from :class:`SchedulerError` and the
builtin exception it resembles; driver errors are chained behind a :class:`StoreError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import uuid

__all__ = [
    "DispatchError",
    "DuplicateSchedule",
    "InvalidArgument",
    "InvalidConfiguration",
    "InvalidMessage",
    "InvalidTrigger",
    "MigrationError",
    "NotChangeable",
    "NotReplayable",
    "ScheduleNotFound",
    "SchedulerError",
    "StoreError",
    "UnsupportedConnection",
    "UsageError",
]


class SchedulerError(Exception):
    """The root of every error hexeract_lite raises on purpose.

    .. versionadded:: 0.1.0
    """


class InvalidArgument(SchedulerError, ValueError):
    """A value handed to hexeract_lite is not acceptable; nothing was written.

    .. versionadded:: 0.1.0
    """


class InvalidTrigger(InvalidArgument):
    """A trigger cannot be built: a bad cron expression or a bad instant.

    .. versionadded:: 0.1.0
    """


class InvalidMessage(InvalidArgument):
    """A message cannot be built: bad event type, payload or instant.

    .. versionadded:: 0.1.0
    """


class InvalidConfiguration(InvalidArgument):
    """A setting is out of range (worker config, batch size, max_attempts, ...).

    .. versionadded:: 0.1.0
    """


class UnsupportedConnection(InvalidConfiguration):
    """A connection string this build cannot serve; quoted without its password.

    .. versionadded:: 0.1.0
    """


class UsageError(InvalidArgument):
    """A command-line argument the command cannot use; reported like argparse's, exit 2."""


class ScheduleNotFound(SchedulerError, LookupError):
    """No schedule has this id (or this name).

    .. versionadded:: 0.1.0
    """

    def __init__(self, schedule_id: uuid.UUID, name: str | None = None) -> None:
        if name is None:
            super().__init__(f"no schedule {schedule_id}")
        else:
            super().__init__(f"no schedule named {name!r} (id {schedule_id})")
        self.schedule_id = schedule_id
        self.name = name


class DuplicateSchedule(SchedulerError, ValueError):
    """A schedule with this id (or this name) already exists; the insert wrote nothing.

    .. versionadded:: 0.1.0
    """

    def __init__(self, schedule_id: uuid.UUID, name: str | None = None) -> None:
        if name is None:
            super().__init__(f"schedule {schedule_id} already exists")
        else:
            super().__init__(f"a schedule named {name!r} already exists (id {schedule_id})")
        self.schedule_id = schedule_id
        self.name = name


class NotReplayable(SchedulerError, RuntimeError):
    """Only a dead-lettered schedule can be replayed.

    .. versionadded:: 0.1.0
    """

    def __init__(self, schedule_id: uuid.UUID, status: object) -> None:
        label = getattr(status, "value", status)
        super().__init__(f"not replayable: schedule {schedule_id} is {label}")
        self.schedule_id = schedule_id
        self.status = status


class NotChangeable(SchedulerError, RuntimeError):
    """A schedule cannot be changed that way now (terminal, paused, in flight, or another
    trigger kind); nothing was written.

    .. versionadded:: 0.2.0
    """

    def __init__(self, schedule_id: uuid.UUID, reason: str) -> None:
        super().__init__(f"schedule {schedule_id} {reason}; nothing changed")
        self.schedule_id = schedule_id
        self.reason = reason


class DispatchError(SchedulerError, RuntimeError):
    """A sink could not deliver a message; the worker retries or dead-letters it.

    .. versionadded:: 0.1.0
    """


class StoreError(SchedulerError, OSError):
    """The store could not do its work (I/O error, disk full, lock timeout, bad file); the
    operation applied nothing.

    .. versionadded:: 0.1.0
    """


class MigrationCounts(Protocol):
    """What a :class:`~hexeract_lite.migrate.MigrationReport` counts: rows ``read`` from the
    source, ``copied`` to the destination, ``skipped`` (their id was already there)."""

    @property
    def read(self) -> int: ...
    @property
    def copied(self) -> int: ...
    @property
    def skipped(self) -> int: ...


class MigrationError(SchedulerError, RuntimeError):
    """:func:`hexeract_lite.migrate.migrate` stopped part-way; :attr:`report` counts what
    was copied (it stays copied: running it again resumes).

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, report: MigrationCounts) -> None:
        super().__init__(message)
        self.report = report
