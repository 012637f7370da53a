"""Finding the MySQL/MariaDB server the tests run against, and fresh tables on it.

The server is the one ``HEXERACT_TEST_MYSQL_URL`` names (``scripts/test`` starts one
with ``scripts/mysql-test-server`` and sets it). When the variable is unset, the server
``scripts/mysql-test-server`` starts by default (127.0.0.1:33069) is tried. No server:
the MySQL tests are skipped, with the reason, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.pg import in_ci
from tests.scratch import ScratchTables

if TYPE_CHECKING:
    from hexeract_lite.clock import Clock
    from hexeract_lite.store.base import ScheduleStore
    from hexeract_lite.store.mysql import MysqlScheduleStore

URL_ENV = "HEXERACT_TEST_MYSQL_URL"
DEFAULT_URL = "mysql://hexeract:hexeract-test-only@127.0.0.1:33069/hexeract_test"


def without_tls(url: str) -> str:
    """``url`` with ``ssl-mode=disabled`` unless it chooses a mode itself: the test server
    has no TLS, and the default (``preferred``: TLS when the server offers it) builds a
    TLS context for every connection, about 25 ms each."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    if "ssl-mode" in urllib.parse.parse_qs(parts.query):
        return url
    query = "&".join(q for q in (parts.query, "ssl-mode=disabled") if q)
    return parts._replace(query=query).geturl()


def raw_connect(url: str, **extra: Any) -> Any:
    """A plain PyMySQL connection to ``url`` (autocommit unless told otherwise), without
    TLS (see :func:`without_tls`)."""
    import pymysql

    from hexeract_lite.store.mysql.connections import url_params

    options: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": 3,
        "charset": "utf8mb4",
        "ssl_disabled": True,
    }
    options.update(url_params(without_tls(url)))
    options.update(extra)
    return pymysql.connect(**options)


@cache
def server() -> tuple[str | None, str]:
    """``(url, "")`` for the server to use, or ``(None, why there is none)``."""
    try:
        import pymysql
    except ImportError:
        return None, "PyMySQL is not installed (pip install -e '.[mysql]')"
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return without_tls(url), ""
    try:
        raw_connect(DEFAULT_URL).close()
    except pymysql.MySQLError as exc:
        return None, (
            f"no MySQL server: {URL_ENV} is not set and 127.0.0.1:33069 does not answer"
            f" ({type(exc).__name__}; run scripts/mysql-test-server start)"
        )
    return without_tls(DEFAULT_URL), ""


def require_server() -> str:
    """The server's URL; skips the calling test when there is none (fails it in CI)."""
    url, why = server()
    if url is None:
        if in_ci():
            pytest.fail(f"CI=true but MySQL tests cannot run: {why}", pytrace=False)
        pytest.skip(why)
    return url


def unique_table(prefix: str = "m") -> str:
    """A table name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


_ADMIN: dict[tuple[int, str], Any] = {}
"""One connection per process and server for dropping and emptying scratch tables."""
_ADMIN_LOCK = threading.Lock()


def _on_admin(url: str, work: Callable[[Any], None]) -> None:
    """``work(cursor)`` on this process's admin connection to ``url`` (reconnecting once
    when the server went away since)."""
    import pymysql

    key = (os.getpid(), url)
    with _ADMIN_LOCK:
        conn = _ADMIN.get(key)
        if conn is not None and conn.open:
            try:
                with conn.cursor() as cur:
                    work(cur)
                return
            except (pymysql.OperationalError, pymysql.InterfaceError):  # the server went away
                with contextlib.suppress(Exception):
                    conn.close()
        _ADMIN[key] = conn = raw_connect(url)
        with conn.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 5")  # a lock a test left held
            work(cur)


def drop_table(url: str, table: str) -> None:
    """Drop ``table`` and its run log if they exist, and forget its schema version."""
    from hexeract_lite.store.mysql.runs import runs_table_name

    def drop(cur: Any) -> None:
        cur.execute(f"DROP TABLE IF EXISTS `{table}`, `{runs_table_name(table)}`")
        cur.execute(
            "CREATE TABLE IF NOT EXISTS hexeract_lite_schema (table_name"
            " VARCHAR(64) NOT NULL PRIMARY KEY, version INT NOT NULL)"
        )
        cur.execute("DELETE FROM hexeract_lite_schema WHERE table_name = %s", [table])

    _on_admin(url, drop)


def empty_table(url: str, table: str) -> bool:
    """Delete every row of ``table`` and of its run log; False when that failed."""
    import pymysql

    from hexeract_lite.store.mysql.runs import runs_table_name

    def empty(cur: Any) -> None:
        for name in (table, runs_table_name(table)):
            cur.execute(f"DELETE FROM `{name}`")

    try:
        _on_admin(url, empty)
    except pymysql.MySQLError:
        return False
    return True


_SCRATCH = ScratchTables(empty_table, drop_table, unique_table)


def open_scratch_store(
    table: str | None = None, *, clock: Clock | None = None, **options: Any
) -> MysqlScheduleStore:
    """A store on a fresh table of the test server (:meth:`.ScratchTables.open`)."""
    from hexeract_lite.store.mysql import MysqlScheduleStore

    return _SCRATCH.open(MysqlScheduleStore, require_server(), table, clock, options)


def mysql_store_factory() -> Callable[[Path], ScheduleStore] | None:
    """The contract suite's factory for the MySQL store, or None without a server (in
    CI a factory whose tests fail, saying why)."""
    url, _why = server()
    if url is None and not in_ci():
        return None

    def factory(tmp_path: Path) -> ScheduleStore:
        return open_scratch_store()

    return factory
