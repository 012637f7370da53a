# Generated from hexeract_lite.store._EXPORTS by hexeract_lite._lazy.write_stubs().

from ..settlement import Settlement as Settlement
from ..settlement import SettlementKind as SettlementKind
from .base import SWEEP_ERROR as SWEEP_ERROR
from .base import ScheduleStore as ScheduleStore
from .memory import InMemoryScheduleStore as InMemoryScheduleStore
from .mysql.store import MysqlScheduleStore as MysqlScheduleStore
from .postgres.store import PostgresScheduleStore as PostgresScheduleStore
from .sqlite.store import SqliteScheduleStore as SqliteScheduleStore

__all__ = [
    "SWEEP_ERROR",
    "ScheduleStore",
    "Settlement",
    "SettlementKind",
    "InMemoryScheduleStore",
    "SqliteScheduleStore",
]
