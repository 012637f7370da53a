"""Schedule stores: the contract and its implementations."""

from typing import TYPE_CHECKING

from .base import SWEEP_ERROR, ScheduleStore, Settlement, SettlementKind
from .memory import InMemoryScheduleStore
from .sqlite import SqliteScheduleStore

if TYPE_CHECKING:
    from .postgres import PostgresScheduleStore as PostgresScheduleStore

__all__ = [
    "SWEEP_ERROR",
    "InMemoryScheduleStore",
    "ScheduleStore",
    "Settlement",
    "SettlementKind",
    "SqliteScheduleStore",
]


def __getattr__(name: str) -> object:
    # PostgresScheduleStore needs the optional psycopg: imported on first use only, so
    # that `import hexeract_lite` works without the postgres extra.
    if name == "PostgresScheduleStore":
        from .postgres import PostgresScheduleStore

        return PostgresScheduleStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
