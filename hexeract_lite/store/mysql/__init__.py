"""The MySQL/MariaDB store: :class:`MysqlScheduleStore` (needs the ``mysql`` extra),
loaded on first use so that the schema module imports without PyMySQL."""

from ..._lazy import lazy_exports

_EXPORTS = {".store": ("MysqlScheduleStore",)}
__getattr__, __dir__, _MODULE_OF = lazy_exports(__name__, globals(), _EXPORTS)
