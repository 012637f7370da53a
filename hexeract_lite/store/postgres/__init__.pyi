# Generated from hexeract_lite.store.postgres._EXPORTS by hexeract_lite._lazy.write_stubs().

from .store import PostgresScheduleStore as PostgresScheduleStore

__all__ = [
    "PostgresScheduleStore",
]
