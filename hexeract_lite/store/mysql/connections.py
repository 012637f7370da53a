"""The MySQL store's URL (``docs/howto/mysql.md``), its pool and forks. Connections are
``utf8mb4``, autocommit, count *found* rows and have the session bounds set; a failed
one is closed with every idle one; a forked child forgets the parent's unused."""

from __future__ import annotations

import os
import ssl
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pymysql
from pymysql.constants import CLIENT

from ...errors import InvalidConfiguration, StoreError
from ...redact import redact_conn
from .session import ISOLATION, PoolTimeout, Timeouts, store_error

Conn = pymysql.Connection

_SCHEMES = ("mysql", "mariadb")


def url_params(url: object) -> dict[str, Any]:
    """PyMySQL's connection arguments for ``url``; a bad URL raises
    :class:`InvalidConfiguration` without showing its password."""
    if not isinstance(url, str):
        raise InvalidConfiguration(f"url must be a str, got {type(url).__name__}")
    shown = redact_conn(url)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidConfiguration(f"invalid MySQL URL {shown!r}") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise InvalidConfiguration(f"a MySQL URL starts with mysql:// or mariadb://, got {shown!r}")
    database = urllib.parse.unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise InvalidConfiguration(f"the MySQL URL {shown!r} names no database (…/dbname)")
    params: dict[str, Any] = {
        "host": parts.hostname or "localhost",
        "port": port or 3306,
        "user": urllib.parse.unquote(parts.username or ""),
        "password": urllib.parse.unquote(parts.password or ""),
        "database": database,
    }
    query: dict[str, str] = {}
    for key, values in urllib.parse.parse_qs(parts.query, keep_blank_values=True).items():
        if key not in _QUERY_KEYS:
            raise InvalidConfiguration(
                f"unknown parameter {key!r} in the MySQL URL {shown!r}"
                f" (known: {', '.join(_QUERY_KEYS)})"
            )
        query[key] = values[-1]
    if "unix_socket" in query:
        params["unix_socket"] = query["unix_socket"]
    params.update(_tls_params(query.get("ssl-mode"), query.get("ssl-ca"), shown))
    return params


_QUERY_KEYS = ("unix_socket", "ssl-mode", "ssl-ca")
_SSL_MODES = ("disabled", "preferred", "required", "verify-ca", "verify-identity")


def _tls_params(mode: str | None, ca: str | None, shown: str) -> dict[str, Any]:
    """PyMySQL's TLS arguments for ``ssl-mode`` and ``ssl-ca``, a bad pair refused."""
    name = "preferred" if mode is None else mode.strip().lower()
    if name not in _SSL_MODES:
        raise InvalidConfiguration(
            f"unknown ssl-mode {mode!r} in the MySQL URL {shown!r} (known: {', '.join(_SSL_MODES)})"
        )
    verify = name.startswith("verify-")
    if ca is not None and not verify:
        raise InvalidConfiguration(
            f"ssl-ca goes with ssl-mode=verify-ca or verify-identity, not {name!r},"
            f" in the MySQL URL {shown!r}"
        )
    if verify and not ca:
        raise InvalidConfiguration(
            f"ssl-mode={name} needs ssl-ca=/path/to/ca.pem in the MySQL URL {shown!r}"
        )
    if name == "disabled":
        return {"ssl_disabled": True}
    if name == "preferred":
        return {}
    if name == "required":
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        return {"ssl": unverified}
    assert ca is not None
    if not os.path.isfile(ca):
        raise InvalidConfiguration(f"ssl-ca {ca!r} is not a file, in the MySQL URL {shown!r}")
    if name == "verify-ca":
        return {"ssl_ca": ca, "ssl_verify_cert": True}
    return {"ssl_ca": ca, "ssl_verify_cert": True, "ssl_verify_identity": True}


def connect(params: dict[str, Any], timeouts: Timeouts) -> Conn[Any]:
    """One autocommit connection with the store's bounds set (driver errors raise)."""
    conn = pymysql.connect(
        **params,
        charset="utf8mb4",
        autocommit=True,
        client_flag=CLIENT.FOUND_ROWS,
        connect_timeout=timeouts.connect.total_seconds(),
        # the server's greeting and the login are part of connecting: bounded by the
        # connect timeout, then every read by the read timeout
        read_timeout=timeouts.connect.total_seconds(),
        write_timeout=timeouts.read.total_seconds(),
    )
    conn._read_timeout = timeouts.read.total_seconds()  # type: ignore[attr-defined]  # per read
    try:
        mariadb = "mariadb" in str(conn.get_server_info()).lower()  # type: ignore[no-untyped-call]
        with conn.cursor() as cur:
            cur.execute(timeouts.session_sql(mariadb))
            cur.execute(ISOLATION)
    except BaseException:
        conn.close()
        raise
    return conn


class Connections:
    """A store's pool (see the module). Thread-safe."""

    def __init__(self, url: str, *, table: str, timeouts: Timeouts, pool_max_size: int) -> None:
        self.url = url
        self.params = url_params(url)
        self.where = redact_conn(url)
        """The server, printable (no password)."""
        self.timeouts = timeouts
        self._table = table
        self._size = pool_max_size
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(pool_max_size)
        self._idle: list[Conn[Any]] = []
        self._pid = os.getpid()
        self._closed = False

    def new(self) -> Conn[Any]:
        """A connection of its own (not pooled)."""
        return connect(self.params, self.timeouts)

    def _forked(self) -> None:
        if self._pid != os.getpid():  # the parent's sockets: never used here
            self._pid, self._idle = os.getpid(), []
            self._lock = threading.Lock()
            self._slots = threading.BoundedSemaphore(self._size)

    @contextmanager
    def connection(self, action: str) -> Iterator[Conn[Any]]:
        """A pooled connection; driver errors become :class:`StoreError` naming
        ``action``, the table, the server and, when one ran out, the bound."""
        self._forked()
        prefix = f"{action} failed on table {self._table!r} at {self.where}"
        if self._closed:
            raise StoreError(f"{prefix}: the store is closed")
        slots = self._slots
        if not slots.acquire(timeout=self.timeouts.pool.total_seconds()):
            raise store_error(prefix, PoolTimeout(), url=self.url, timeouts=self.timeouts)
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self.new()
            yield conn
        except pymysql.MySQLError as exc:
            conn = self._rolled_back(conn)
            raise store_error(prefix, exc, url=self.url, timeouts=self.timeouts) from exc
        except BaseException:
            conn = self._rolled_back(conn)  # a transaction may be open on it
            raise
        finally:
            if conn is not None:
                with self._lock:
                    if self._closed or slots is not self._slots:
                        conn.close()
                    else:
                        self._idle.append(conn)
            slots.release()

    def _rolled_back(self, conn: Conn[Any] | None) -> Conn[Any] | None:
        """``conn`` after a rollback, to reuse; None (and every idle connection closed:
        the server may have gone away) when the rollback fails."""
        if conn is None:
            return None
        try:
            conn.rollback()
        except Exception:
            self._discard(conn)
            return None
        return conn

    def _discard(self, conn: Conn[Any] | None) -> None:
        """Close ``conn`` and every idle connection (the server may have gone away)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for each in [*idle, *([conn] if conn is not None else [])]:
            with suppress(Exception):  # already closed, or the socket is gone
                each.close()

    def close(self) -> None:
        """Close the idle connections; later calls raise :class:`StoreError`. Idempotent."""
        self._closed = True
        self._discard(None)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed
