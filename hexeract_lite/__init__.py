"""hexeract_lite: a persistent message scheduler in one SQLite file.

Hand it a message and a time (once, or on a cron rule); it keeps the message on disk
and, when it is due, delivers it to a sink at least once, retrying with backoff and
dead-lettering what keeps failing. Consumers deduplicate on :class:`OccurrenceId`.
"""

from __future__ import annotations

from ._lazy import lazy_exports

# Every public name, once, and the submodule that defines it (it makes __all__ and the
# type checkers' __init__.pyi). They are imported on first use
# (PEP 562), so that `import hexeract_lite` (and every `hexeract` command) pays only for
# what it touches: the SQLite driver, asyncio and cron parsing load when needed.
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
        # pyproject.toml's version is the one source; without installed metadata there
        # is no version to report, so say so rather than repeat the number here.
        return "0+unknown"


_COMPUTED_TYPES = {"__version__": "str"}
"""The type of each computed name, for the stub."""

__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__, globals(), _EXPORTS, {"__version__": _version}
)

# The package's logger gets its NullHandler from ._log, which every module that logs
# imports (a command that never logs does not import logging).
