"""Schedule stores: the contract and its implementations.

Every name is imported on first use (PEP 562): the SQLite store needs apsw, the
PostgreSQL one the optional psycopg, and the contract its value classes, which a
read-only listing by the CLI does without.
"""

from .._lazy import lazy_exports

# Every public name, once, and the module that defines it (it makes __all__ and the
# type checkers' __init__.pyi). The PostgreSQL and MySQL stores are left out of __all__:
# `from hexeract_lite.store import *` must work without psycopg or PyMySQL.
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
