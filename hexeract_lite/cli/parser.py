"""The command tree: :func:`build_parser` adds each command from its module in
:mod:`hexeract_lite.cli.commands` (where its options and its handler live)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from .options import CommandTree, HelpFormatter, example

_MODULES = {
    "list": "list",
    "show": "stats prune vacuum inspect next runs",
    "change": "pause resume cancel add ensure reschedule update run-now backfill abort",
    "migrate": "schema migrate",
    "dead_letter": "dead-letter",
    "worker": "worker",
    "ui": "ui",
}
COMMAND_MODULES = {name: module for module, names in _MODULES.items() for name in names.split()}
"""Each ``hexeract scheduler`` command name, in the order ``hexeract scheduler --help``
lists them, and the module of :mod:`hexeract_lite.cli.commands` that adds it."""

COMMANDS = tuple(_MODULES)
"""The command modules, in that order."""


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

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


def build_parser(prog: str = "hexeract", command: str | None = None) -> argparse.ArgumentParser:
    """The whole command tree; every command has help text and an example.

    With ``command`` (a name of :data:`COMMAND_MODULES`), the tree holds only the module
    that adds that command: it parses that command's arguments, and prints its help
    and its errors, exactly as the whole tree does."""
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
    modules = COMMANDS if command is None else (COMMAND_MODULES[command],)
    for module in modules:
        importlib.import_module(f"{__package__}.commands.{module}").add_parser(tree)
    return parser


def parser_for(prog: str, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: only the named command's part of the tree when
    ``argv`` starts with ``scheduler`` and a command name, else the whole tree."""
    if len(argv) >= 2 and argv[0] == "scheduler" and argv[1] in COMMAND_MODULES:
        return build_parser(prog, argv[1])
    return build_parser(prog)
