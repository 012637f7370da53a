"""The PostgreSQL store: :class:`PostgresScheduleStore` (needs the ``postgres`` extra),
loaded on first use so that the schema module imports without psycopg."""

from ..._lazy import lazy_exports

_EXPORTS = {".store": ("PostgresScheduleStore",)}
__getattr__, __dir__, _MODULE_OF = lazy_exports(__name__, globals(), _EXPORTS)
