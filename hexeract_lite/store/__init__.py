"""Schedule stores: the contract and its implementations, each imported on first use
(PEP 562: apsw, psycopg and the value classes load only when needed).
"""

from .._lazy import lazy_exports

# Every public name and its module (__all__ and __init__.pyi come from it); the optional
# PostgreSQL and MySQL stores stay out of __all__, so that `import *` works without them.
_EXPORTS = {
    ".base": ("SWEEP_ERROR", "ScheduleStore"),
    "..settlement": ("Settlement", "SettlementKind"),
    ".memory": ("InMemoryScheduleStore",),
    ".sqlite.store": ("SqliteScheduleStore",),
    ".postgres.store": ("PostgresScheduleStore",),
    ".mysql.store": ("MysqlScheduleStore",),
}
__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__, globals(), _EXPORTS, optional=("PostgresScheduleStore", "MysqlScheduleStore")
)
