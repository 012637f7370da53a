"""hexeract_lite: a persistent message scheduler in one SQLite file.

Hand it a message and a time (once, or on a cron rule); it keeps the message on disk
and, when it is due, delivers it to a sink at least once, retrying with backoff and
dead-lettering what keeps failing. Consumers deduplicate on :class:`OccurrenceId`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .clock import SYSTEM_CLOCK, Clock, ManualClock, SystemClock
    from .control import ReconcileReport, SchedulerControl
    from .errors import (
        DispatchError,
        DuplicateSchedule,
        InvalidArgument,
        InvalidConfiguration,
        InvalidMessage,
        InvalidTrigger,
        MigrationError,
        NotChangeable,
        NotReplayable,
        ScheduleNotFound,
        SchedulerError,
        StoreError,
        UnsupportedConnection,
    )
    from .handlers import EventRouterSink
    from .interval import Interval
    from .message import MAX_PAYLOAD_BYTES, ScheduledMessage, Target
    from .names import NAME_NAMESPACE, name_id
    from .occurrence import OccurrenceId
    from .retry import RetryPolicy
    from .settle import Settlement
    from .sinks import (
        BusMessage,
        BusSink,
        CallableSink,
        InProcessBus,
        ScheduleSink,
        TargetRouterSink,
    )
    from .snapshot import LeasedOccurrence, ScheduleSnapshot, ScheduleStatus
    from .store import InMemoryScheduleStore, ScheduleStore, SqliteScheduleStore
    from .store.changes import EnsureResult
    from .transactional import TransactionalSink
    from .trigger import CronExpression, Trigger
    from .worker import CycleReport, SchedulerWorker, SchedulerWorkerConfig, WorkerHandle

    __version__: str
    """The installed distribution's version (``"0+unknown"`` in a never-installed source tree).

    .. versionadded:: 0.1.0
    """

# Every public name, and the submodule that defines it. They are imported on first use
# (PEP 562), so that `import hexeract_lite` (and every `hexeract` command) pays only for
# what it touches: the SQLite driver, asyncio and cron parsing load when needed.
_EXPORTS = {
    ".clock": (
        "SYSTEM_CLOCK",
        "Clock",
        "ManualClock",
        "SystemClock",
    ),
    ".control": (
        "ReconcileReport",
        "SchedulerControl",
    ),
    ".errors": (
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
    ),
    ".handlers": ("EventRouterSink",),
    ".interval": ("Interval",),
    ".message": (
        "MAX_PAYLOAD_BYTES",
        "ScheduledMessage",
        "Target",
    ),
    ".names": (
        "NAME_NAMESPACE",
        "name_id",
    ),
    ".occurrence": ("OccurrenceId",),
    ".retry": ("RetryPolicy",),
    ".sinks": (
        "BusMessage",
        "BusSink",
        "CallableSink",
        "InProcessBus",
        "ScheduleSink",
        "TargetRouterSink",
    ),
    ".snapshot": (
        "LeasedOccurrence",
        "ScheduleSnapshot",
        "ScheduleStatus",
    ),
    ".store": (
        "InMemoryScheduleStore",
        "ScheduleStore",
        "Settlement",
        "SqliteScheduleStore",
    ),
    ".store.changes": ("EnsureResult",),
    ".transactional": ("TransactionalSink",),
    ".trigger": (
        "CronExpression",
        "Trigger",
    ),
    ".worker": (
        "CycleReport",
        "SchedulerWorker",
        "SchedulerWorkerConfig",
        "WorkerHandle",
    ),
}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("hexeract_lite")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        # pyproject.toml's version is the one source; without installed metadata there
        # is no version to report, so say so rather than repeat the number here.
        return "0+unknown"


__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__, globals(), _EXPORTS, {"__version__": _version}
)

# The package's logger gets its NullHandler from ._log, which every module that logs
# imports (a command that never logs does not import logging).

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "NAME_NAMESPACE",
    "SYSTEM_CLOCK",
    "BusMessage",
    "BusSink",
    "CallableSink",
    "Clock",
    "CronExpression",
    "Interval",
    "CycleReport",
    "DispatchError",
    "DuplicateSchedule",
    "EnsureResult",
    "EventRouterSink",
    "InProcessBus",
    "InMemoryScheduleStore",
    "InvalidArgument",
    "InvalidConfiguration",
    "InvalidMessage",
    "InvalidTrigger",
    "LeasedOccurrence",
    "ManualClock",
    "MigrationError",
    "NotChangeable",
    "NotReplayable",
    "OccurrenceId",
    "ReconcileReport",
    "RetryPolicy",
    "ScheduleNotFound",
    "ScheduleSink",
    "ScheduleSnapshot",
    "ScheduleStatus",
    "ScheduleStore",
    "Settlement",
    "ScheduledMessage",
    "SchedulerControl",
    "SchedulerError",
    "SchedulerWorker",
    "SchedulerWorkerConfig",
    "SqliteScheduleStore",
    "StoreError",
    "SystemClock",
    "Target",
    "TargetRouterSink",
    "TransactionalSink",
    "UnsupportedConnection",
    "Trigger",
    "WorkerHandle",
    "__version__",
    "name_id",
]
