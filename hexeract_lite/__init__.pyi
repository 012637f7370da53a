# Generated from hexeract_lite._EXPORTS by hexeract_lite._lazy.write_stubs().

from .clock import SYSTEM_CLOCK as SYSTEM_CLOCK
from .clock import Clock as Clock
from .clock import ManualClock as ManualClock
from .clock import SystemClock as SystemClock
from .connect import open_store as open_store
from .control import ReconcileReport as ReconcileReport
from .control import SchedulerControl as SchedulerControl
from .errors import DispatchError as DispatchError
from .errors import DuplicateSchedule as DuplicateSchedule
from .errors import InvalidArgument as InvalidArgument
from .errors import InvalidConfiguration as InvalidConfiguration
from .errors import InvalidMessage as InvalidMessage
from .errors import InvalidTrigger as InvalidTrigger
from .errors import MigrationError as MigrationError
from .errors import NotChangeable as NotChangeable
from .errors import NotReplayable as NotReplayable
from .errors import ScheduleNotFound as ScheduleNotFound
from .errors import SchedulerError as SchedulerError
from .errors import StoreError as StoreError
from .errors import UnsupportedConnection as UnsupportedConnection
from .handlers import EventRouterSink as EventRouterSink
from .interval import Interval as Interval
from .longrun import DispatchHandle as DispatchHandle
from .longrun import Snooze as Snooze
from .longrun import current_dispatch as current_dispatch
from .message import MAX_PAYLOAD_BYTES as MAX_PAYLOAD_BYTES
from .message import ScheduledMessage as ScheduledMessage
from .message import Target as Target
from .names import NAME_NAMESPACE as NAME_NAMESPACE
from .names import name_id as name_id
from .occurrence import OccurrenceId as OccurrenceId
from .policy import SchedulePolicy as SchedulePolicy
from .retry import RetryPolicy as RetryPolicy
from .runlog import RunOutcome as RunOutcome
from .runlog import RunRecord as RunRecord
from .settlement import Settlement as Settlement
from .sinks import BusMessage as BusMessage
from .sinks import BusSink as BusSink
from .sinks import CallableSink as CallableSink
from .sinks import InProcessBus as InProcessBus
from .sinks import ScheduleSink as ScheduleSink
from .sinks import TargetRouterSink as TargetRouterSink
from .snapshot import LeasedOccurrence as LeasedOccurrence
from .snapshot import ScheduleSnapshot as ScheduleSnapshot
from .snapshot import ScheduleStatus as ScheduleStatus
from .store import InMemoryScheduleStore as InMemoryScheduleStore
from .store import ScheduleStore as ScheduleStore
from .store import SqliteScheduleStore as SqliteScheduleStore
from .store.changes import EnsureResult as EnsureResult
from .transactional import TransactionalSink as TransactionalSink
from .trigger import CronExpression as CronExpression
from .trigger import Trigger as Trigger
from .worker import CycleReport as CycleReport
from .worker import SchedulerWorker as SchedulerWorker
from .worker import SchedulerWorkerConfig as SchedulerWorkerConfig
from .worker import WorkerHandle as WorkerHandle

__version__: str
__all__ = [
    "SYSTEM_CLOCK",
    "Clock",
    "ManualClock",
    "SystemClock",
    "open_store",
    "ReconcileReport",
    "SchedulerControl",
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
    "EventRouterSink",
    "Interval",
    "DispatchHandle",
    "Snooze",
    "current_dispatch",
    "MAX_PAYLOAD_BYTES",
    "ScheduledMessage",
    "Target",
    "NAME_NAMESPACE",
    "name_id",
    "OccurrenceId",
    "SchedulePolicy",
    "RetryPolicy",
    "RunOutcome",
    "RunRecord",
    "BusMessage",
    "BusSink",
    "CallableSink",
    "InProcessBus",
    "ScheduleSink",
    "TargetRouterSink",
    "LeasedOccurrence",
    "ScheduleSnapshot",
    "ScheduleStatus",
    "Settlement",
    "InMemoryScheduleStore",
    "ScheduleStore",
    "SqliteScheduleStore",
    "EnsureResult",
    "TransactionalSink",
    "CronExpression",
    "Trigger",
    "CycleReport",
    "SchedulerWorker",
    "SchedulerWorkerConfig",
    "WorkerHandle",
    "__version__",
]
