"""What a command loads: ``hexeract scheduler <command>`` builds only that command's
part of the tree (which must be the whole tree's, help and errors alike), and a listing
imports nothing that only other commands, writers or the worker need."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import hexeract_lite
from hexeract_lite import ScheduledMessage, Target
from hexeract_lite.cli.parser import COMMAND_MODULES, build_parser, parser_for
from hexeract_lite.store.sqlite import SqliteScheduleStore


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action


def _scheduler(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    return _subparsers(parser).choices["scheduler"]


def _helps(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, str]:
    """Every parser's help text under ``parser``, by command path."""
    found = {" ".join(path): parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_helps(sub, (*path, name)))
    return found


def test_the_command_table_names_every_command_of_the_tree() -> None:
    names = list(_subparsers(_scheduler(build_parser())).choices)
    assert sorted(names) == sorted(COMMAND_MODULES)


@pytest.mark.parametrize("command", sorted(COMMAND_MODULES))
def test_a_command_alone_has_the_whole_trees_help(command: str) -> None:
    whole = _subparsers(_scheduler(build_parser())).choices[command]
    alone_tree = build_parser("hexeract", command)
    alone = _subparsers(_scheduler(alone_tree)).choices
    assert list(alone) == [
        name for name, module in COMMAND_MODULES.items() if module == COMMAND_MODULES[command]
    ]
    assert _helps(alone[command]) == _helps(whole)
    assert alone[command].prog == whole.prog == f"hexeract scheduler {command}"


@pytest.mark.parametrize(
    "argv",
    [
        ["scheduler", "list", "--limit", "0"],
        ["scheduler", "list", "--bogus"],
        ["scheduler", "inspect", "not-a-uuid"],
        ["scheduler", "dead-letter"],
        ["scheduler", "dead-letter", "nope"],
        ["scheduler", "add", "--in", "5x", "--event-type", "a"],
        ["scheduler", "list", "extra"],
    ],
)
def test_usage_errors_are_the_whole_trees(argv: list[str]) -> None:
    def error(parser: argparse.ArgumentParser) -> tuple[object, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        return exc.value.code, err.getvalue()

    assert error(parser_for("hexeract", argv)) == error(build_parser("hexeract"))


@pytest.mark.parametrize(
    "argv", [[], ["--help"], ["scheduler"], ["scheduler", "--help"], ["scheduler", "lst"]]
)
def test_anything_but_a_command_name_gets_the_whole_tree(argv: list[str]) -> None:
    parser = parser_for("hexeract", argv)
    assert list(_subparsers(_scheduler(parser)).choices) == list(
        _subparsers(_scheduler(build_parser())).choices
    )


# Loaded by other commands, by writers or by the worker, never by a listing.
NOT_FOR_A_LISTING = (
    "asyncio",
    "cronsim",  # a cron rule's next instant
    "ctypes",  # the WAL watcher of a claiming store
    "hashlib",  # occurrence ids
    "shutil",  # argparse's default help formatter
    "sqlite3",  # transactional inserts on a sqlite3 connection
    "zoneinfo",  # zones other than UTC
    "hexeract_lite.control",
    "hexeract_lite.retry",
    "hexeract_lite.config",
    "hexeract_lite.worker",
    "hexeract_lite.sinks",
    "hexeract_lite.cli.commands.change",
    "hexeract_lite.cli.commands.worker",
    "hexeract_lite.cli.commands.migrate",
)

# Nor by the plain ``scheduler list`` (text, no filter) on a SQLite file, which renders
# the rows without the store and its value classes (hexeract_lite.store.sqlite.plain);
# it reads each payload with the stdlib's json, as the store does.
NOT_FOR_THE_PLAIN_LISTING = (
    "attr",
    "attrs",
    "logging",
    "uuid",
    "hexeract_lite.store.sqlite.store",
    "hexeract_lite.store.base",
    "hexeract_lite.snapshot",
    "hexeract_lite.message",
    "hexeract_lite.trigger",
)

_CHILD = """
import sys
before = set(sys.modules)
from hexeract_lite.cli import main
code = main(sys.argv[1:])
print(code, *sorted(set(sys.modules) - before))
"""


def test_scheduler_list_imports_only_what_a_listing_needs(tmp_path: Path) -> None:
    db = tmp_path / "sched.db"
    with SqliteScheduleStore.open(db) as store:
        store.insert(
            ScheduledMessage.delay(
                Target.outbox(), datetime.now(UTC) + timedelta(hours=1), "a.b", {}
            ),
            5,
        )
    root = str(Path(hexeract_lite.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    env.pop("DATABASE_URL", None)
    env.pop("HEXERACT_SCHEDULER_TABLE", None)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "scheduler", "list", "--conn", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    code, *loaded = proc.stdout.splitlines()[-1].split()
    assert code == "0", proc.stdout
    assert "a.b" in proc.stdout  # the child did list
    assert sorted(set(NOT_FOR_A_LISTING + NOT_FOR_THE_PLAIN_LISTING) & set(loaded)) == []
    # with a filter, the store lists
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "scheduler", "list", "--status", "all", "--conn", str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    code, *loaded = proc.stdout.splitlines()[-1].split()
    assert code == "0", proc.stdout
    assert "hexeract_lite.store.sqlite.store" in loaded
    assert sorted(set(NOT_FOR_A_LISTING) & set(loaded)) == []


@pytest.mark.parametrize("store", ["postgres", "mysql"])
def test_a_server_stores_module_loads_nothing_a_listing_never_needs(store: str) -> None:
    """A ``list`` over ``postgresql://`` or ``mysql://`` opens the store: its module
    leaves the worker's side (the transactional-sink runner, the settle path, the
    worker config) to the first call that needs it."""
    pytest.importorskip({"postgres": "psycopg", "mysql": "pymysql"}[store])
    root = str(Path(hexeract_lite.__file__).resolve().parent.parent)
    child = (
        "import sys\nbefore = set(sys.modules)\n"
        f"import hexeract_lite.store.{store}.store\n"
        "print(*sorted(set(sys.modules) - before))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": root},
        timeout=60,
        check=True,
    )
    loaded = set(proc.stdout.split())
    assert f"hexeract_lite.store.{store}.store" in loaded  # the child did import it
    ours = [name for name in NOT_FOR_A_LISTING if name.startswith("hexeract_lite.")]
    assert sorted(set(ours) & loaded) == []
    assert f"hexeract_lite.store.{store}.transaction" not in loaded
