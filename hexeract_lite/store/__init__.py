"""Schedule stores: the contract and its implementations.

The implementations are imported on first use (PEP 562): the SQLite one needs apsw,
the PostgreSQL one the optional psycopg.
"""

from typing import TYPE_CHECKING

from .base import SWEEP_ERROR, ScheduleStore, Settlement, SettlementKind

if TYPE_CHECKING:
    from .memory import InMemoryScheduleStore
    from .postgres import PostgresScheduleStore as PostgresScheduleStore
    from .sqlite import SqliteScheduleStore

__all__ = [
    "SWEEP_ERROR",
    "InMemoryScheduleStore",
    "ScheduleStore",
    "Settlement",
    "SettlementKind",
    "SqliteScheduleStore",
]

_LAZY = {
    "InMemoryScheduleStore": "memory",
    "SqliteScheduleStore": "sqlite",
    # not in __all__: `from hexeract_lite.store import *` must work without psycopg
    "PostgresScheduleStore": "postgres",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
