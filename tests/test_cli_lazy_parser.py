"""``hexeract scheduler <command>`` builds only that command's part of the tree: the
part it builds must be the whole tree's, help and errors alike."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from hexeract_lite.cli.parser import COMMAND_MODULES, build_parser, parser_for


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
