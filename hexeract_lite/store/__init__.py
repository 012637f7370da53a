"""Schedule stores: the contract and its implementations."""

from .base import SWEEP_ERROR, ScheduleStore
from .memory import InMemoryScheduleStore
from .sqlite import SqliteScheduleStore as SqliteScheduleStore

__all__ = ["SWEEP_ERROR", "InMemoryScheduleStore", "ScheduleStore"]
