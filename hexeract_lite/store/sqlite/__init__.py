"""The SQLite store: :class:`SqliteScheduleStore` and the names of its file layout,
loaded on first use (importing the schema or the statements does not import the store)."""

from ..._lazy import lazy_exports

_EXPORTS = {
    ".schema": (
        "APP_NAME",
        "DATABASE_FILE_NAME",
        "META_TABLE",
        "SCHEMA_VERSION",
        "default_database_path",
    ),
    ".store": ("SqliteScheduleStore",),
}
__getattr__, __dir__, _MODULE_OF = lazy_exports(__name__, globals(), _EXPORTS)
