"""An mkdocs hook: the command-line reference, generated from the argparse parser.

A page holding the line ``<!-- cli-reference -->`` gets, in its place, one section per
command of ``hexeract`` (``hexeract_lite.cli.build_parser()``), each with the command's
own ``--help`` text. Nothing of it is written by hand, so it cannot drift.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(
    parser: argparse.ArgumentParser,
) -> list[tuple[str, argparse.ArgumentParser]]:
    """Each subcommand's one-line help and parser (argparse keeps them only here)."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((helps.get(name, ""), sub))
    return found


def _sections(parser: argparse.ArgumentParser, depth: int) -> list[str]:
    out: list[str] = []
    for summary, sub in _subcommands(parser):
        heading = "#" * min(depth, 6)
        out += [f"{heading} `{sub.prog}`", ""]
        if summary:
            out += [summary[:1].upper() + summary[1:] + ".", ""]
        out += ["```text", sub.format_help().rstrip(), "```", ""]
        out += _sections(sub, depth + 1)
    return out


def reference() -> str:
    """The generated Markdown."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # the same wrapping on every machine
    try:
        from hexeract_lite.cli import build_parser

        parser = build_parser()
        lines = [
            "## `hexeract`",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
            "",
        ]
        lines += _sections(parser, 2)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(lines)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Put the reference in place of the marker."""
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, reference())
    return markdown
