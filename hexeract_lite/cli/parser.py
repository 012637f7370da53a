"""The command tree: :func:`build_parser` adds each command from its module in
:mod:`hexeract_lite.cli.commands` (where its options and its handler live)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .commands import (
    add,
    control,
    dead_letter,
    ensure,
    inspect,
    migrate,
    prune,
    reschedule,
    run_now,
    schema,
    stats,
    update,
    vacuum,
    worker,
)
from .commands import list as list_
from .options import CommandTree, HelpFormatter, example

COMMANDS = (
    list_,
    stats,
    prune,
    vacuum,
    inspect,
    control,
    add,
    ensure,
    reschedule,
    update,
    run_now,
    schema,
    migrate,
    dead_letter,
    worker,
)
"""The command modules, in the order ``hexeract scheduler --help`` lists them."""


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for (reading the
    package metadata costs every other command start-up time)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from .. import __version__

        print(f"{parser.prog} {__version__}", file=sys.stdout)
        parser.exit()


def build_parser(prog: str = "hexeract") -> argparse.ArgumentParser:
    """The whole command tree; every command has help text and an example."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="hexeract_lite: a persistent message scheduler in one SQLite file."
        " Operate schedules and dead letters, and run the worker.",
        epilog=example(
            "hexeract scheduler list --conn sqlite:////var/lib/myapp/scheduler.db",
            "hexeract scheduler dead-letter list --format json",
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="show the version")
    groups = parser.add_subparsers(
        dest="group", metavar="COMMAND", required=True, help="the command group"
    )
    sched = groups.add_parser(
        "scheduler",
        help="operate the scheduler: list, inspect, add, pause, resume, cancel, dead letters,"
        " the worker",
        description="Operate schedules and dead letters, and run the worker.",
        epilog=example("hexeract scheduler list", "hexeract scheduler inspect 0195f3c2-..."),
        formatter_class=HelpFormatter,
    )
    cmds = sched.add_subparsers(dest="command", metavar="COMMAND", required=True, help="what to do")
    tree = CommandTree(cmds)
    for module in COMMANDS:
        module.add_parser(tree)
    return parser
