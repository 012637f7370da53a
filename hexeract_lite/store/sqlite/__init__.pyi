# Generated from hexeract_lite.store.sqlite._EXPORTS by hexeract_lite._lazy.write_stubs().

from .schema import APP_NAME as APP_NAME
from .schema import DATABASE_FILE_NAME as DATABASE_FILE_NAME
from .schema import META_TABLE as META_TABLE
from .schema import SCHEMA_VERSION as SCHEMA_VERSION
from .schema import default_database_path as default_database_path
from .store import SqliteScheduleStore as SqliteScheduleStore

__all__ = [
    "APP_NAME",
    "DATABASE_FILE_NAME",
    "META_TABLE",
    "SCHEMA_VERSION",
    "default_database_path",
    "SqliteScheduleStore",
]
