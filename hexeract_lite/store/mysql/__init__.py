"""The MySQL/MariaDB store: :class:`MysqlScheduleStore` (needs the ``mysql`` extra).

The name loads on first use, so that the schema module (the DDL) imports without
PyMySQL.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .store import MysqlScheduleStore

__all__ = ["MysqlScheduleStore"]

__getattr__, __dir__, _MODULE_OF = lazy_exports(
    __name__, globals(), {".store": ("MysqlScheduleStore",)}
)
