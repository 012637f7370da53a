"""Connection strings: :func:`parse_conn` reads one, :func:`open_store` opens its store.

The spellings (``sqlite:///abs.db``, ``sqlite://rel.db``, a plain path, ``postgresql://``,
a libpq ``host=... dbname=...`` string, ``mysql://``, ``mariadb://``): docs/reference/cli.md,
"Which database". ``None`` means ``DATABASE_URL``, then (unset or empty) the default
database. A connection string is only shown through :func:`redact_conn`; driver text
through :func:`scrub`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ._conn import LIBPQ_KV_RE, POSTGRES_SCHEMES, SCHEME_RE, sqlite_url_path
from .clock import SYSTEM_CLOCK, Clock
from .errors import InvalidConfiguration, SchedulerError, StoreError
from .errors import UnsupportedConnection as UnsupportedConnection
from .redact import redact_conn as redact_conn
from .redact import scrub as scrub
from .store.schema import DEFAULT_TABLE, validate_table_name

if TYPE_CHECKING:
    from .store.base import ScheduleStore

DATABASE_URL_ENV = "DATABASE_URL"
"""The environment variable read when no connection string is given."""

_MYSQL_SCHEMES = ("mysql", "mariadb")


class ConnTarget(NamedTuple):
    """A parsed connection string: ``kind`` ``"sqlite"`` (``path`` set), ``"postgres"``
    or ``"mysql"`` (``url`` set); ``source``: ``"argument"``, ``"DATABASE_URL"`` or
    ``"default"``."""

    kind: Literal["sqlite", "postgres", "mysql"]
    path: Path | None = None
    url: str | None = None
    source: str = "argument"

    def display(self) -> str:
        """A printable form, without any password."""
        if self.kind == "sqlite":
            return str(self.path)
        return redact_conn(self.url or "")


def parse_conn(conn: str | None) -> ConnTarget:
    """Read a connection string (the spellings: see the module docstring); another scheme
    or a ``sqlite://`` URL naming no file: :class:`UnsupportedConnection`."""
    source = "argument"
    if not conn:
        conn = os.environ.get(DATABASE_URL_ENV) or None
        source = DATABASE_URL_ENV
    if conn is None:
        from .store.sqlite.store import default_database_path

        return ConnTarget(kind="sqlite", path=Path(default_database_path()), source="default")
    match = SCHEME_RE.match(conn)
    if match is None:
        if LIBPQ_KV_RE.match(conn):
            return ConnTarget(kind="postgres", url=conn, source=source)
        return ConnTarget(kind="sqlite", path=Path(conn).expanduser(), source=source)
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        return ConnTarget(kind="sqlite", path=sqlite_url_path(conn, match), source=source)
    if scheme in POSTGRES_SCHEMES:
        return ConnTarget(kind="postgres", url=conn, source=source)
    if scheme in _MYSQL_SCHEMES:
        return ConnTarget(kind="mysql", url=conn, source=source)
    where = "" if source == "argument" else f" (from ${source})"
    raise UnsupportedConnection(
        f"unsupported connection scheme {scheme!r}{where} in {redact_conn(conn)!r}:"
        " use sqlite:///absolute/path.db, sqlite://relative/path.db, a plain file path,"
        " postgresql://..., mysql://... or a libpq 'host=... dbname=...' string"
    )


def open_store(
    url: str | ConnTarget | None = None,
    *,
    table: str | None = None,
    create: bool | None = None,
    clock: Clock = SYSTEM_CLOCK,
    readonly: bool = False,
    **options: Any,
) -> ScheduleStore:
    """Open the store ``url`` names, as ``hexeract scheduler --conn`` does (None:
    ``DATABASE_URL``, then the default database); ``table`` defaults to
    ``scheduled_messages``.

    ``create`` (default: not ``readonly``) creates the SQLite file and the table when
    missing; ``create=False`` raises :class:`StoreError` instead. ``readonly=True`` (with
    ``create=False``) never writes a SQLite file. ``options`` go to the store's own
    ``open``. A server store without its extra: :class:`StoreError` naming it. Errors
    never carry the password.

    .. versionadded:: 0.2.0
    """
    if table is None:
        table = DEFAULT_TABLE
    validate_table_name(table)
    if create is None:
        create = not readonly
    if readonly and create:
        raise InvalidConfiguration("open_store: readonly=True goes with create=False only")
    target = url if isinstance(url, ConnTarget) else parse_conn(url)
    if target.kind == "sqlite":
        from .store.sqlite.store import SqliteScheduleStore

        # None lets the store create the default database's folders; an explicit
        # path's folder must exist (a typo must not grow a directory tree).
        path = None if target.source == "default" else target.path
        return SqliteScheduleStore.open(
            path, table=table, clock=clock, create=create, readonly=readonly, **options
        )
    return _open_server(target, table=table, clock=clock, create=create, **options)


_SERVER_STORES = {  # module, class, the drivers its extra brings, the engine's name
    "postgres": (".store.postgres.store", "PostgresScheduleStore", ("psycopg",), "PostgreSQL"),
    "mysql": (".store.mysql.store", "MysqlScheduleStore", ("pymysql",), "MySQL"),
}


def _open_server(target: ConnTarget, **options: Any) -> ScheduleStore:
    """The server store of ``target``; its errors scrubbed of the password, unchained."""
    assert target.url is not None
    import importlib

    kind = target.kind
    module, name, drivers, engine = _SERVER_STORES[kind]
    try:
        store_type = getattr(importlib.import_module(module, __package__), name)
    except ImportError as exc:
        if (exc.name or "").startswith(drivers):
            raise StoreError(
                f"{engine} support needs the {kind!r} extra: pip install 'hexeract_lite[{kind}]'"
            ) from None
        raise StoreError(
            f"this build of hexeract_lite cannot open {engine} databases ({exc})"
        ) from None
    try:
        store: ScheduleStore = store_type.open(target.url, **options)
    except StoreError as exc:
        raise StoreError(scrub(str(exc), target)) from None
    except SchedulerError:
        raise
    except Exception as exc:
        raise StoreError(
            scrub(f"cannot open {target.display()}: {type(exc).__name__}: {exc}", target)
        ) from None
    return store
