"""The pieces of the command tree that commands share: the help formatter, the parent
parsers, the shared arguments, and :class:`CommandTree`, through which each module in
:mod:`hexeract_lite.cli.commands` adds its command."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..store.listing import LIST_STATUSES
from ..store.schema import DEFAULT_TABLE
from .args import (
    DEFAULT_LIMIT,
    TABLE_ENV,
    parse_checked_duration,
    parse_conn_arg,
    parse_duration,
    parse_instant,
    parse_name,
    parse_payload,
    parse_positive_int,
    parse_schedule_id,
    parse_table,
    parse_target,
)

if TYPE_CHECKING:
    from .context import Handler


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions to the terminal; keeps the example block's lines as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=terminal_columns() - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLE_HEADER):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def terminal_columns() -> int:
    """The width argparse wraps help to, as :func:`shutil.get_terminal_size` gives it
    ($COLUMNS, else the terminal on stdout, else 80), without importing :mod:`shutil`."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 0
        except (AttributeError, ValueError, OSError):  # closed, detached, not a terminal
            columns = 0
    return columns or 80


NEGATIVE_VALUE = re.compile(r"^-\.?\d")
"""What a command's parser reads as a (negative) value rather than an option."""

EXAMPLE_HEADER = "example:"


def example(*lines: str) -> str:
    """An epilog: the ``example:`` header and the lines, indented."""
    return EXAMPLE_HEADER + "\n" + "\n".join(f"  {line}" for line in lines)


Kind = tuple[Any, str]
"""An option's type and metavar."""

N: Kind = (parse_positive_int, "N")
INSTANT: Kind = (parse_instant, "INSTANT")
DURATION: Kind = (parse_duration, "DURATION")
POSITIVE_DURATION: Kind = (partial(parse_checked_duration, positive=True), "DURATION")
STORED_DURATION: Kind = (partial(parse_checked_duration, whole_ms=True), "DURATION")
INTERVAL: Kind = (partial(parse_checked_duration, positive=True, whole_ms=True), "DURATION")
TABLE: Kind = (parse_table, "NAME")


def arg(sub: Any, flag: str, kind: Kind | None, help: str, **kwargs: Any) -> None:  # noqa: A002
    """Add ``flag`` to the parser or group ``sub``, of ``kind`` (None: plain text)."""
    if kind is not None:
        kwargs["type"], kwargs["metavar"] = kind
    sub.add_argument(flag, help=help, **kwargs)


def switch(sub: Any, flag: str, help: str) -> None:  # noqa: A002
    """Add the on/off option ``flag`` to ``sub``."""
    sub.add_argument(flag, action="store_true", help=help)


class CommandTree:
    """The ``scheduler`` command group being built: each command module's
    ``add_parser`` adds its command here, with the parents its commands share."""

    def __init__(self, cmds: Any) -> None:
        self.cmds = cmds
        self.conn, self.fmt, self.limit = (
            argparse.ArgumentParser(add_help=False, formatter_class=HelpFormatter) for _ in range(3)
        )
        # --conn and --table: the commands that open a database
        database = self.conn.add_argument_group("database")
        arg(
            database,
            "--conn",
            (parse_conn_arg, "URL"),  # an empty one (an unset variable) is refused
            "the database: sqlite:///absolute/path.db, sqlite://relative/path.db, a file"
            " path, postgresql://user:password@host/db, mysql://user:password@host/db or a"
            " libpq 'host=... dbname=...'"
            " string (default: $DATABASE_URL, else the default database in the user data"
            " directory)",
        )
        help_text = f"the schedules table (default: ${TABLE_ENV}, else {DEFAULT_TABLE})"
        arg(database, "--table", TABLE, help_text)
        help_text = "text (aligned columns, the default) or json"
        arg(self.fmt, "--format", None, help_text, choices=("text", "json"), default="text")
        help_text = f"show at most N schedules (default: {DEFAULT_LIMIT})"
        arg(self.limit, "--limit", N, help_text, default=DEFAULT_LIMIT)

    def command(
        self,
        name: str,
        help: str,  # noqa: A002 - argparse's own name for it
        examples: Sequence[str],
        parents: Sequence[argparse.ArgumentParser],
        handler: Handler,
        *,
        into: Any = None,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        """Add command ``name`` (under ``into``, default the group) run by ``handler``;
        its description defaults to ``help`` as a sentence."""
        sub: argparse.ArgumentParser = (self.cmds if into is None else into).add_parser(
            name,
            help=help,
            description=description or help[:1].upper() + help[1:] + ".",
            epilog=example(*examples),
            parents=list(parents),
            formatter_class=HelpFormatter,
        )
        sub.set_defaults(handler=handler, cmd_parser=sub)
        # ``--older-than -5d``: a value starting with a minus and a digit is a value (no
        # option looks like one), so that its parser names it, on every Python version
        sub._negative_number_matcher = NEGATIVE_VALUE
        return sub


CLEAR = object()
"""What a :func:`clearable` value is for the text ``none``, which ``update`` takes for a
policy value or the misfire grace to set it back to its default (no end, no limit, no
jitter, no grace)."""


def clearable(kind: Kind) -> Kind:
    """``kind``, taking the text ``none`` too, as :data:`CLEAR`."""
    parse = kind[0]

    def parse_or_clear(text: str) -> Any:
        return CLEAR if text.strip().lower() == "none" else parse(text)

    parse_or_clear.__name__ = getattr(parse, "__name__", "value")
    return parse_or_clear, kind[1]


def policy_arguments(sub: argparse.ArgumentParser, *, clear: bool = False) -> None:
    """The policy of a recurring schedule: ``--end-at``, ``--max-firings``, ``--jitter``,
    ``--catch-up``, ``--catch-up-limit`` (``add``, ``ensure``, ``update``); with
    ``clear`` (``update``) the first three and the limit also take ``none``."""
    group = sub.add_argument_group("policy (--cron or --every)")
    back = " (none: back to the default)" if clear else ""

    def kind(kind: Kind) -> Kind:
        return clearable(kind) if clear else kind

    arg(
        group,
        "--end-at",
        kind(INSTANT),
        f"no firing after this instant; the schedule then completes (delivered){back}",
    )
    arg(group, "--max-firings", kind(N), f"complete the schedule after N deliveries{back}")
    arg(
        group,
        "--jitter",
        kind(STORED_DURATION),
        "delay each firing by up to DURATION (e.g. 5m), the same amount in every process"
        f" (derived from the occurrence id), never up to the next firing{back}",
    )
    arg(
        group,
        "--catch-up",
        None,
        "missed firings: latest (collapse into one, the default), skip (fire none of"
        " them), all (fire each, in order, up to --catch-up-limit)",
        choices=("latest", "skip", "all"),
    )
    arg(
        group,
        "--catch-up-limit",
        kind(N),
        f"with --catch-up all: fire at most the latest N missed firings (default 100){back}",
    )


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The arguments ``names`` given on the command line, by name; :data:`CLEAR` as None
    (back to the default)."""
    values = {name: getattr(args, name) for name in names}
    return {name: None if v is CLEAR else v for name, v in values.items() if v is not None}


def message_arguments(sub: argparse.ArgumentParser, *, once_in: bool) -> None:
    """The arguments that describe a message: when (``--at``, ``--in`` when
    ``once_in``, ``--cron`` with ``--first`` and ``--tz``, ``--every`` with
    ``--first``), misfire grace, event type, payload, target, budget."""
    from ..message import Target  # the value classes: only the commands that write need them

    when = sub.add_argument_group("when (exactly one)").add_mutually_exclusive_group(required=True)
    arg(
        when,
        "--at",
        INSTANT,
        "fire once at an ISO 8601 instant with a timezone, e.g. 2026-03-01T12:00:00Z",
    )
    if once_in:
        help_text = "fire once after a delay from now: 90s, 5m, 2h, 1d, 1h30m"
        arg(when, "--in", DURATION, help_text, dest="in_")
    arg(
        when,
        "--cron",
        None,
        "fire on a cron rule, in UTC unless --tz: 5 fields, 6 with leading seconds, or @daily etc.",
        metavar="EXPR",
    )
    arg(
        when,
        "--every",
        INTERVAL,
        "fire every period on a fixed grid (90s, 5m, 1h30m; whole milliseconds),"
        " first one period from now (or at --first)",
    )
    arg(
        sub,
        "--misfire-grace",
        STORED_DURATION,
        "how late a firing may be found and still be delivered (e.g. 10m); later, a"
        " one-shot is dead-lettered with the reason and a recurring schedule skips to its"
        " next firing (default: no limit, deliver late)",
    )
    arg(
        sub,
        "--tz",
        None,
        "with --cron: read the rule on this IANA time zone's wall clock"
        " (e.g. Europe/Paris; default UTC); see the README on daylight saving time",
        metavar="ZONE",
    )
    policy_arguments(sub)
    arg(
        sub,
        "--first",
        INSTANT,
        "with --cron: the first firing (default: the rule's next instant after now);"
        " with --every: the grid's anchor (default: one period from now)",
    )
    help_text = "what the message is, 1 to 64 characters (e.g. reminder.due)"
    arg(sub, "--event-type", None, help_text, required=True, metavar="TYPE")
    arg(
        sub,
        "--payload",
        (parse_payload, "JSON"),
        "the payload: JSON text, @FILE to read a file, or - to read stdin (default: {})",
    )
    help_text = "mediator, outbox or bus:ROUTING_KEY (default: mediator)"
    arg(sub, "--target", (parse_target, "TARGET"), help_text, default=Target.mediator())
    help_text = "attempts per occurrence before it is dead-lettered (default: 5)"
    arg(sub, "--max-attempts", N, help_text, default=5)


def filter_arguments(sub: argparse.ArgumentParser, *, statuses: bool) -> None:
    """``--event-type GLOB``; with ``statuses`` also ``--status`` and ``--name GLOB``."""
    if statuses:
        help_text = "list only schedules with this status (all: every status)"
        arg(sub, "--status", None, help_text, choices=LIST_STATUSES)
    help_text = "only schedules whose event type matches this glob (* any run, ? one character)"
    arg(sub, "--event-type", None, help_text, metavar="GLOB")
    if statuses:
        help_text = "only named schedules matching this glob"
        arg(sub, "--name", None, help_text, dest="name_glob", metavar="GLOB")


def id_argument(sub: argparse.ArgumentParser) -> None:
    """``SCHEDULE_ID`` or ``--name``: the schedule a command acts on."""
    kind = (parse_schedule_id, "SCHEDULE_ID")
    arg(sub, "schedule_id", kind, "the schedule's UUID (or give --name)", nargs="?")
    help_text = "the schedule's name instead of its id (e.g. myapp.backup.daily)"
    arg(sub, "--name", (parse_name, "NAME"), help_text, dest="schedule_name")
