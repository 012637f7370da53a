"""Security: payloads are JSON only, new files are owner-only, table names cannot carry
SQL, and the CLI never shows a password from a connection string."""

from __future__ import annotations

import ast
import contextlib
import os
import pickle
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

import hexeract_lite
from hexeract_lite import (
    InvalidConfiguration,
    InvalidMessage,
    ScheduledMessage,
    SchedulerError,
    Target,
)
from hexeract_lite.cli import main as cli_main
from hexeract_lite.store.sqlite import SqliteScheduleStore

from .conftest import ROOT, TABLE, dump_database, file_fingerprint

PACKAGE = Path(hexeract_lite.__file__).resolve().parent

# -- payloads are JSON, never pickled or evaluated -------------------------------------

UNSAFE_MODULES = frozenset({"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "yaml"})
UNSAFE_BUILTINS = frozenset({"eval", "exec", "compile", "__import__"})


def unsafe_uses(source: str, filename: str) -> list[str]:
    """Every import of a deserialiser that can run code, every call of ``eval``/``exec``/
    ``compile``/``__import__``, and every ``yaml.load``/``pickle.loads``-style call."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [
                f"{where} import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in UNSAFE_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in UNSAFE_MODULES:
                found.append(f"{where} from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in UNSAFE_BUILTINS:
                found.append(f"{where} {func.id}(...)")
            elif (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and (
                    func.value.id in UNSAFE_MODULES
                    or (func.value.id == "builtins" and func.attr in UNSAFE_BUILTINS)
                )
            ):
                found.append(f"{where} {func.value.id}.{func.attr}(...)")
    return found


def test_the_scanner_finds_what_it_looks_for() -> None:
    sample = (
        "import pickle\nfrom yaml import load\nimport marshal as m\n"
        "x = eval('1')\nexec('pass')\npickle.loads(b'')\nbuiltins.eval('2')\n"
    )
    assert len(unsafe_uses(sample, "sample.py")) == 7
    assert unsafe_uses("import json\njson.loads('1')\nre.compile('x')\n", "ok.py") == []


def test_the_package_never_unpickles_or_evaluates() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) >= 10, sources
    found = [
        use
        for path in sources
        for use in unsafe_uses(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


@pytest.mark.parametrize(
    "payload",
    [{1, 2}, b"bytes", object(), datetime(2026, 1, 1, tzinfo=UTC), float("nan"), {1: {2j}}],
    ids=["set", "bytes", "object", "datetime", "nan", "complex"],
)
def test_a_payload_that_is_not_json_is_refused(payload: object) -> None:
    with pytest.raises(InvalidMessage, match="JSON"):
        ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "ev", payload)


class _Boom:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def test_a_pickle_smuggled_into_the_table_is_never_unpickled(tmp_path: Path) -> None:
    """Someone with write access to the file plants a pickle in the payload column. A
    worker claims the row: the payload is parsed as JSON (and refused) or passed on as
    text, but never unpickled, so the marker file is never created."""
    db = tmp_path / "s.db"
    marker = tmp_path / "pwned"
    now = datetime.now(UTC)
    with SqliteScheduleStore.open(db) as store:
        for i in range(2):
            message = ScheduledMessage.delay(Target.outbox(), now, "ev", {"i": i})
            store.insert(message, 3)
    planted = pickle.dumps(_Boom(marker), protocol=0)
    conn = apsw.Connection(str(db))
    conn.execute(f"UPDATE {TABLE} SET payload = ?", (planted.decode("latin-1"),))
    conn.execute(  # one as BLOB too
        f"UPDATE {TABLE} SET payload = ?"
        f" WHERE schedule_id = (SELECT min(schedule_id) FROM {TABLE})",
        (planted,),
    )
    conn.close()
    assert not marker.exists()
    with SqliteScheduleStore.open(db) as store:
        with contextlib.suppress(SchedulerError, ValueError):
            store.claim_due(now + timedelta(seconds=1), 10, timedelta(seconds=30))
        with contextlib.suppress(SchedulerError, ValueError):
            store.list_pending()
    assert not marker.exists()


# -- new database files are owner-only -------------------------------------------------


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_new_database_and_its_side_files_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "new" / "sched.db"
    db.parent.mkdir()
    with umask(0), SqliteScheduleStore.open(db) as store:  # even with a permissive umask
        store.insert(ScheduledMessage.delay(Target.outbox(), datetime.now(UTC), "e", 1), 3)
        side = sorted(p.name for p in db.parent.iterdir())
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in db.parent.iterdir()}
    assert "sched.db" in side
    assert modes == {name: 0o600 for name in side}, modes


# -- table names cannot carry SQL --------------------------------------------------------

INJECTIONS = [
    'x"; DROP TABLE victim; --',
    "x; DROP TABLE victim",
    "victim WHERE 1=1",
    "x' OR '1'='1",
    "scheduled_messages--",
    "x]",
    "sqlite_master; DELETE FROM victim",
    "t\x00victim",
    "täble",
    "1table",
    "",
    "a" * 64,
]


@pytest.mark.parametrize("table", INJECTIONS, ids=range(len(INJECTIONS)))
def test_a_table_name_carrying_sql_is_refused_before_any_sql(tmp_path: Path, table: str) -> None:
    db = tmp_path / "s.db"
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE victim(x); INSERT INTO victim VALUES (1), (2)")
    conn.close()
    before, rows = file_fingerprint(db), dump_database(db)
    with pytest.raises(InvalidConfiguration, match="table name") as info:
        SqliteScheduleStore.open(db, table=table)
    assert repr(table)[1:-1][:20] in str(info.value)
    assert file_fingerprint(db) == before
    assert dump_database(db) == rows


# -- the CLI never prints a password -----------------------------------------------------

SECRET = "s3cr3t-Pa55w0rd"


def _conn_strings() -> list[str]:
    return [
        f"postgresql://alice:{SECRET}@127.0.0.1:1/app",
        f"postgres://alice:{SECRET}@127.0.0.1:1/app?sslmode=disable",
        f"postgresql://127.0.0.1:1/app?user=alice&password={SECRET}",
        f"mysql://alice:{SECRET}@127.0.0.1/app",
        f"host=127.0.0.1 port=1 user=alice password={SECRET}",
    ]


COMMANDS = [
    ["scheduler", "list"],
    ["scheduler", "dead-letter", "list", "--format", "json"],
    ["scheduler", "inspect", str(uuid.UUID(int=1))],
    ["scheduler", "dead-letter", "replay", str(uuid.UUID(int=1))],
]


CONN_IDS = ["url", "url-query", "param", "mysql", "libpq"]


@pytest.mark.parametrize("conn", _conn_strings(), ids=CONN_IDS)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: "-".join(a[1:3]))
def test_the_cli_never_prints_a_password(
    conn: str, argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = cli_main([*argv, "--conn", conn])
    out, err = capsys.readouterr()
    assert code in (1, 2), (code, out, err)
    assert err.strip(), "a failure must say why"
    assert SECRET not in out + err, out + err


@pytest.mark.parametrize("conn", _conn_strings()[:3], ids=CONN_IDS[:3])
def test_the_cli_never_prints_a_password_from_database_url(conn: str, tmp_path: Path) -> None:
    """A real process, with the password in ``$DATABASE_URL`` and full logging on."""
    env = dict(os.environ, DATABASE_URL=conn, PYTHONPATH=str(ROOT))
    for argv in (["scheduler", "list"], ["scheduler", "inspect", str(uuid.UUID(int=2))]):
        result = subprocess.run(
            [sys.executable, "-m", "hexeract_lite", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert result.returncode == 1, result
        assert result.stderr.strip()
        assert SECRET not in result.stdout + result.stderr, result
