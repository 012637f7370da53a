# Generated from hexeract_lite.store.mysql._EXPORTS by hexeract_lite._lazy.write_stubs().

from .store import MysqlScheduleStore as MysqlScheduleStore

__all__ = [
    "MysqlScheduleStore",
]
