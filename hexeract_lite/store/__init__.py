"""Schedule stores: the contract and its implementations.

Every name is imported on first use (PEP 562): the SQLite store needs apsw, the
PostgreSQL one the optional psycopg, and the contract its value classes, which a
read-only listing by the CLI does without.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..settlement import Settlement, SettlementKind
    from .base import SWEEP_ERROR, ScheduleStore
    from .memory import InMemoryScheduleStore
    from .mysql.store import MysqlScheduleStore as MysqlScheduleStore
    from .postgres.store import PostgresScheduleStore as PostgresScheduleStore
    from .sqlite.store import SqliteScheduleStore

__all__ = [
    "SWEEP_ERROR",
    "InMemoryScheduleStore",
    "ScheduleStore",
    "Settlement",
    "SettlementKind",
    "SqliteScheduleStore",
]

_EXPORTS = {
    ".base": ("SWEEP_ERROR", "ScheduleStore", "Settlement", "SettlementKind"),
    ".memory": ("InMemoryScheduleStore",),
    ".sqlite": ("SqliteScheduleStore",),
    # not in __all__: `from hexeract_lite.store import *` must work without psycopg
    ".postgres": ("PostgresScheduleStore",),
    ".mysql": ("MysqlScheduleStore",),
}
__getattr__, __dir__, _MODULE_OF = lazy_exports(__name__, globals(), _EXPORTS)
