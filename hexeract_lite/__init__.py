"""hexeract_lite: a persistent message scheduler in one SQLite file.

Hand it a message and a time (once, or on a cron rule); it keeps the message on disk
and, when it is due, delivers it to a sink at least once, retrying with backoff and
dead-lettering what keeps failing. Consumers deduplicate on :class:`OccurrenceId`.
"""

from __future__ import annotations

from . import errors as _errors
from ._lazy import lazy_exports

# Every public name and the submodule that defines it, imported on first use.
_EXPORTS = {
    ".clock": (
        "SYSTEM_CLOCK",
        "Clock",
        "ManualClock",
        "SystemClock",
    ),
    ".connect": ("open_store",),
    ".control": (
        "ReconcileReport",
        "SchedulerControl",
    ),
    ".errors": tuple(name for name in _errors.__all__ if name != "UsageError"),
    ".handlers": ("EventRouterSink",),
    ".interval": ("Interval",),
    ".longrun": (
        "DispatchHandle",
        "Snooze",
        "current_dispatch",
    ),
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
    ".policy": ("SchedulePolicy",),
    ".retry": ("RetryPolicy",),
    ".runlog": (
        "RunOutcome",
        "RunRecord",
    ),
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
    ".settlement": ("Settlement",),
    ".store": (
        "InMemoryScheduleStore",
        "ScheduleStore",
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
        return "0+unknown"


_COMPUTED_TYPES = {"__version__": "str"}  # for the stub

__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__, globals(), _EXPORTS, {"__version__": _version}
)
