"""Review round 4c: defects found by exercising the README's quick start, storage,
delivery contract and transactional sections from outside, on every store."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexeract_lite.errors import InvalidConfiguration
from hexeract_lite.store.sqlite import SqliteScheduleStore
from tests import pg

NOT_BOOLS = ["no", "false", 0, 1, None]


@pytest.mark.parametrize("flag", ["create", "readonly"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_sqlite_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    tmp_path: Path, flag: str, value: object
) -> None:
    # create="no" (a string read from a setting) was truthy: it created the file.
    db = tmp_path / "s.db"
    with pytest.raises(InvalidConfiguration, match=rf"{flag} must be True or False, got {value!r}"):
        SqliteScheduleStore.open(db, **{flag: value})  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["create", "use_database_clock", "listen"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_postgres_open_refuses_a_flag_that_is_not_a_bool_and_creates_nothing(
    flag: str, value: object
) -> None:
    # create="no" created the table; use_database_clock="no" turned the server's clock on.
    import psycopg

    from hexeract_lite.store.postgres import PostgresScheduleStore

    url = pg.require_server()
    table = pg.unique_table("r4c")
    try:
        with pytest.raises(
            InvalidConfiguration, match=rf"{flag} must be True or False, got {value!r}"
        ):
            PostgresScheduleStore.open(url, table=table, **{flag: value})  # type: ignore[arg-type]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass(%s)", [table]).fetchone() == (None,)
    finally:
        pg.drop_table(url, table)
