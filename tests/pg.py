"""Finding the PostgreSQL server the tests run against, and fresh tables on it.

The server is the one ``HEXERACT_TEST_POSTGRES_URL`` names (``scripts/test`` starts one
with ``scripts/pg-test-server`` and sets it). When the variable is unset, the server
``scripts/pg-test-server`` starts by default (127.0.0.1:54329) is tried, so that
``scripts/pg-test-server && pytest`` just works.

No server: PostgreSQL tests are skipped, with the reason, except in CI (``CI=true``),
where they fail: CI must exercise the PostgreSQL store, and a silently skipped suite
would hide that it did not.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hexeract_lite.clock import Clock
    from hexeract_lite.store.base import ScheduleStore
    from hexeract_lite.store.postgres import PostgresScheduleStore

URL_ENV = "HEXERACT_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://hexeract:hexeract-test-only@127.0.0.1:54329/hexeract_test"
"""Where ``scripts/pg-test-server`` puts its server unless told otherwise."""


def in_ci() -> bool:
    """True when running under CI (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _problem(url: str) -> str | None:
    """None when a connection to ``url`` works, else why not (password-free)."""
    import psycopg

    from hexeract_lite.connect import redact_conn

    try:
        with psycopg.connect(url, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"cannot connect to {redact_conn(url)}: {type(exc).__name__}"


@cache
def server() -> tuple[str | None, str]:
    """``(url, "")`` for the server to use, or ``(None, why there is none)``.

    A server named by ``HEXERACT_TEST_POSTGRES_URL`` is used even when it does not
    answer: its tests then fail with the connection error, rather than skip.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return None, "psycopg is not installed (pip install -e '.[postgres]')"
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return url, ""
    why = _problem(DEFAULT_URL)
    if why is None:
        return DEFAULT_URL, ""
    return None, (
        f"no PostgreSQL server: {URL_ENV} is not set and {why}"
        " (run scripts/pg-test-server, which installs and starts one)"
    )


def require_server() -> str:
    """The server's URL; skips the calling test when there is none (fails it in CI)."""
    url, why = server()
    if url is None:
        if in_ci():
            pytest.fail(f"CI=true but PostgreSQL tests cannot run: {why}", pytrace=False)
        pytest.skip(why)
    return url


def unique_table(prefix: str = "t") -> str:
    """A table name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def drop_table(url: str, table: str) -> None:
    """Drop ``table`` (and its indexes) if it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def open_scratch_store(
    table: str | None = None, *, clock: Clock | None = None, **options: object
) -> PostgresScheduleStore:
    """A store on a fresh table of the test server; closing it drops the table."""
    from hexeract_lite.clock import SYSTEM_CLOCK
    from hexeract_lite.store.postgres import PostgresScheduleStore

    url = require_server()
    name = table or unique_table()

    class ScratchStore(PostgresScheduleStore):
        def close(self) -> None:
            if not self.closed:
                super().close()
                drop_table(url, name)

    store = ScratchStore.open(
        url,
        table=name,
        clock=clock or SYSTEM_CLOCK,
        **options,  # type: ignore[arg-type]
    )
    assert isinstance(store, ScratchStore)
    return store


def postgres_store_factory() -> Callable[[Path], ScheduleStore] | None:
    """The contract suite's factory for the PostgreSQL store, or None without a server.

    In CI a missing server still yields a factory: one whose tests fail, saying why.
    """
    url, _why = server()
    if url is None and not in_ci():
        return None

    def factory(tmp_path: Path) -> ScheduleStore:
        return open_scratch_store()

    return factory
