"""The SQLite store: :class:`SqliteScheduleStore` and the names of its file layout.

Names load on first use, so that importing a module of this package (the schema, the
statements) does not import the store.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .schema import (
        APP_NAME,
        DATABASE_FILE_NAME,
        META_TABLE,
        SCHEMA_VERSION,
        default_database_path,
    )
    from .store import SqliteScheduleStore

__all__ = [
    "APP_NAME",
    "DATABASE_FILE_NAME",
    "META_TABLE",
    "SCHEMA_VERSION",
    "SqliteScheduleStore",
    "default_database_path",
]

__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__,
    globals(),
    {
        ".schema": (
            "APP_NAME",
            "DATABASE_FILE_NAME",
            "META_TABLE",
            "SCHEMA_VERSION",
            "default_database_path",
        ),
        ".store": ("SqliteScheduleStore",),
    },
)
