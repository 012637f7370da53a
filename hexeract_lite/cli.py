"""The ``hexeract`` command: operate schedules and dead letters from a shell.

``hexeract scheduler <command>``; ``hexeract-lite`` and ``python -m hexeract_lite``
are the same program. Operators inspect and repair schedules here, never by
hand-editing the table.

Exit codes: 0 success; 1 runtime error (no such schedule, not replayable, a database
error, a missing database, a row the store cannot decode); 2 usage error (unknown
flag, bad UUID, bad duration, bad JSON payload, bad table name, an instant out of
range, unsupported connection scheme, a worker setting out of range), with an
argparse-style message on stderr.

Commands that read or repair (``list``, ``inspect``, ``pause``, ``resume``,
``cancel``, ``dead-letter list``, ``dead-letter replay``) never create a database:
a missing file is exit 1, ``no database at <path>``; those that only read (``list``,
``inspect``, ``dead-letter list``) open a SQLite file read-only, and the listings show
a row the store cannot decode as ``malformed``, with the reason. ``add`` and
``worker`` create it (and its table) when needed. ``migrate`` never creates its
source (``--from``) and creates the destination's table when needed.

(Over 700 lines: one argparse tree, its value parsers and one short handler per
command; the tree is where an operator's command is defined, kept in one place.)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO, cast

from ._time import rfc3339, to_utc_ms
from .clock import SYSTEM_CLOCK
from .connect import DATABASE_URL_ENV, ConnTarget, open_store, parse_conn, scrub
from .control import SchedulerControl, default_grid_anchor
from .errors import (
    InvalidArgument,
    InvalidMessage,
    ScheduleNotFound,
    SchedulerError,
    StoreError,
    UsageError,
)
from .interval import format_duration
from .message import ScheduledMessage, Target
from .migrate import DEFAULT_BATCH_SIZE, MigrationReport, migrate
from .names import check_name, name_id
from .settle import error_summary
from .snapshot import MalformedSchedule, ScheduleSnapshot, ScheduleStatus
from .store.base import ScheduleStore
from .store.listing import LIST_STATUSES, check_glob, check_prune
from .store.schema import DEFAULT_TABLE, validate_table_name
from .store.stats import StoreStats
from .trigger import CronExpression
from .upkeep import DEFAULT_UPKEEP_BATCH, Progress, replay_all

if TYPE_CHECKING:
    from .sinks import ScheduleSink

__all__ = ["UsageError", "main"]  # UsageError: defined here before errors.py had it

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2

TABLE_ENV = "HEXERACT_SCHEDULER_TABLE"
"""The environment variable giving the table name when ``--table`` is absent."""

DEFAULT_LIMIT = 50
"""How many schedules ``list`` and ``dead-letter list`` show without ``--limit``."""
LAST_ERROR_WIDTH = 60
"""How many characters of ``last_error`` the dead-letter text listing shows."""

log = logging.getLogger("hexeract_lite.cli")


# -- argument types ------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``5m``, ``2h``, ``1d``, ``250ms``, ``1h30m``, ``0.5s``; a bare number is
    seconds (as systemd reads it). Raises :class:`argparse.ArgumentTypeError`."""
    value = text.strip().lower()
    try:
        if re.fullmatch(r"\d+(?:\.\d+)?", value):
            return timedelta(seconds=float(value))
        pos = 0
        total = timedelta(0)
        for match in _DURATION_PART.finditer(value):
            if match.start() != pos:
                break
            total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            pos = match.end()
        if value and pos == len(value):
            return total
    except OverflowError:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: too long") from None
    raise argparse.ArgumentTypeError(
        f"invalid duration {text!r}: write a number and a unit (ms, s, m, h, d),"
        " e.g. 90s, 5m, 2h or 1h30m"
    )


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant with a timezone (``2026-03-01T12:00:00Z``,
    ``2026-03-01T13:00+01:00``); a naive one is refused, never guessed."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid instant {text!r}: write ISO 8601 with a timezone, e.g. 2026-03-01T12:00:00Z"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise argparse.ArgumentTypeError(
            f"instant {text!r} has no timezone: add Z (UTC) or an offset such as +01:00"
        )
    # Rounded up like ScheduledMessage.delay's ``at``: a firing is never early.
    return to_utc_ms(value, "instant", argparse.ArgumentTypeError, round_up=True)


def parse_schedule_id(text: str) -> uuid.UUID:
    """A schedule id: a UUID in any of the spellings :class:`uuid.UUID` accepts."""
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid schedule id {text!r}: not a UUID") from None


MAX_INT_ARG = 2**31 - 1


def parse_positive_int(text: str) -> int:
    """An integer from 1 to 2**31 - 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_INT_ARG:
        raise argparse.ArgumentTypeError(
            f"invalid value {text!r}: expected an integer >= 1"
            + (f" and <= {MAX_INT_ARG}" if value > MAX_INT_ARG else "")
        )
    return value


def parse_conn_arg(text: str) -> str:
    """A connection string given explicitly (``migrate``'s ``--from`` and ``--to``):
    not empty, and of a scheme :func:`~hexeract_lite.connect.parse_conn` accepts."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty connection string")
    try:
        parse_conn(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def parse_table(text: str) -> str:
    """A table name, checked by :func:`validate_table_name`."""
    try:
        return validate_table_name(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_target(text: str) -> Target:
    """``mediator``, ``outbox`` or ``bus:ROUTING_KEY``."""
    kind, sep, key = text.partition(":")
    try:
        if kind == "bus" and sep:
            return Target.bus(key)
        if kind == "mediator" and not sep:
            return Target.mediator()
        if kind == "outbox" and not sep:
            return Target.outbox()
    except InvalidMessage as exc:
        raise argparse.ArgumentTypeError(f"invalid target {text!r}: {exc}") from None
    raise argparse.ArgumentTypeError(
        f"invalid target {text!r}: expected mediator, outbox or bus:ROUTING_KEY"
    )


class Payload:
    """A parsed ``--payload``: the JSON text and where it came from."""

    def __init__(self, value: Any, origin: str) -> None:
        self.value = value
        self.origin = origin


def parse_payload(text: str) -> Payload:
    """``--payload``: JSON text, ``@path`` (read the file) or ``-`` (read stdin)."""
    if text == "-":
        origin, raw = "stdin", sys.stdin.read()
    elif text.startswith("@"):
        origin = text[1:]
        try:
            with open(origin, encoding="utf-8") as fh:
                raw = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise argparse.ArgumentTypeError(
                f"cannot read payload file {origin!r}: {exc}"
            ) from None
    else:
        origin, raw = "argument", text
    where = "" if origin == "argument" else f" in {origin}"
    try:
        value = json.loads(raw)
    except RecursionError:
        raise argparse.ArgumentTypeError(
            f"invalid JSON payload{where}: nested too deeply (more levels than Python's"
            f" recursion limit, {sys.getrecursionlimit()}) in {raw!r:.60}"
        ) from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON payload{where}: {exc}") from None
    return Payload(value, origin)


def parse_sink_spec(text: str) -> str:
    """``MODULE:ATTR`` (``ATTR`` may be dotted)."""
    module, sep, attr = text.partition(":")
    ident = r"[A-Za-z_][A-Za-z0-9_]*"
    if (
        not sep
        or not re.fullmatch(rf"{ident}(\.{ident})*", module)
        or not (re.fullmatch(rf"{ident}(\.{ident})*", attr))
    ):
        raise argparse.ArgumentTypeError(
            f"invalid sink {text!r}: expected MODULE:ATTR, e.g. myapp.scheduling:sink"
        )
    return text


# -- parser --------------------------------------------------------------------------


class _Formatter(argparse.HelpFormatter):
    """Wraps descriptions to the terminal; keeps the example block's lines as written."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(_EXAMPLE_HEADER):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


_EXAMPLE_HEADER = "example:"


def _example(*lines: str) -> str:
    return _EXAMPLE_HEADER + "\n" + "\n".join(f"  {line}" for line in lines)


def _conn_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("database")
    group.add_argument(
        "--conn",
        metavar="URL",
        help="the database: sqlite:///absolute/path.db, sqlite://relative/path.db, a file"
        " path, or postgresql://user:password@host/db (default: $DATABASE_URL, else the"
        " default database in the user data directory)",
    )
    group.add_argument(
        "--table",
        type=parse_table,
        metavar="NAME",
        help=f"the schedules table (default: ${TABLE_ENV}, else {DEFAULT_TABLE})",
    )
    return parent


def _format_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (aligned columns, the default) or json",
    )
    return parent


def _limit_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--limit",
        type=parse_positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show at most N schedules (default: {DEFAULT_LIMIT})",
    )
    return parent


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
        from . import __version__

        print(f"{parser.prog} {__version__}", file=sys.stdout)
        parser.exit()


def build_parser(prog: str = "hexeract") -> argparse.ArgumentParser:
    """The whole command tree; every command has help text and an example."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="hexeract_lite: a persistent message scheduler in one SQLite file."
        " Operate schedules and dead letters, and run the worker.",
        epilog=_example(
            "hexeract scheduler list --conn sqlite:////var/lib/myapp/scheduler.db",
            "hexeract scheduler dead-letter list --format json",
        ),
        formatter_class=_Formatter,
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
        epilog=_example("hexeract scheduler list", "hexeract scheduler inspect 0195f3c2-..."),
        formatter_class=_Formatter,
    )
    cmds = sched.add_subparsers(dest="command", metavar="COMMAND", required=True, help="what to do")
    conn, fmt, limit = _conn_parent(), _format_parent(), _limit_parent()

    def command(
        name: str,
        help: str,  # noqa: A002 - argparse's own name for it
        example: Sequence[str],
        parents: Sequence[argparse.ArgumentParser],
        handler: Handler,
        *,
        into: Any = cmds,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = into.add_parser(
            name,
            help=help,
            description=description or help[:1].upper() + help[1:] + ".",
            epilog=_example(*example),
            parents=list(parents),
            formatter_class=_Formatter,
        )
        sub.set_defaults(handler=handler, cmd_parser=sub)
        return sub

    sub = command(
        "list",
        "list pending and paused schedules, soonest first; or filter by status",
        [
            "hexeract scheduler list --limit 20",
            "hexeract scheduler list --format json | jq .",
            "hexeract scheduler list --status delivered --event-type 'invoice.*' --limit 500",
        ],
        [conn, fmt, limit],
        _cmd_list,
        description="List schedules. Without --status, --event-type or --after: pending and"
        " paused ones, soonest first. With any of them: every schedule that matches, in"
        " schedule id order; page through a large table with --after set to the last id"
        " printed. JSON output includes each payload.",
    )
    _filter_arguments(sub, statuses=True)
    sub.add_argument(
        "--after",
        type=parse_schedule_id,
        metavar="SCHEDULE_ID",
        help="list only schedules whose id sorts after this one (keyset pagination)",
    )
    command(
        "stats",
        "count schedules by status, due, in flight, in backoff; the oldest lag",
        ["hexeract scheduler stats", "hexeract scheduler stats --format json"],
        [conn, fmt],
        _cmd_stats,
        description="Count schedules by status, those due now and not claimed, in flight"
        " and in retry backoff; show how late the oldest due one is, the next wake-up,"
        " and for SQLite the size of the file and its WAL. Reads only; counts on indexes,"
        " so it answers fast at any table size.",
    )
    sub = command(
        "prune",
        "delete delivered and cancelled schedules that ended long ago",
        [
            "hexeract scheduler prune --older-than 30d --dry-run",
            "hexeract scheduler prune --older-than 7d --include-dead-letters",
        ],
        [conn],
        _cmd_prune,
        description="Delete delivered and cancelled schedules (and, with"
        " --include-dead-letters, dead-lettered ones) that ended more than --older-than"
        " ago, in batches of --batch-size rows per transaction so workers are never held"
        " up for long. Never touches a pending or paused schedule (a recurring one"
        " included). On SQLite the space goes back to the file system (files created by"
        " older versions need `hexeract scheduler vacuum` once). Prints how many were"
        " deleted; --dry-run only counts them.",
    )
    sub.add_argument(
        "--older-than",
        required=True,
        type=parse_duration,
        metavar="DURATION",
        help="how long ago a schedule must have ended (e.g. 30d, 12h)",
    )
    sub.add_argument(
        "--include-dead-letters", action="store_true", help="also delete old dead letters"
    )
    sub.add_argument("--dry-run", action="store_true", help="count, delete nothing")
    sub.add_argument(
        "--batch-size",
        type=parse_positive_int,
        default=DEFAULT_UPKEEP_BATCH,
        metavar="N",
        help=f"rows per transaction (default: {DEFAULT_UPKEEP_BATCH})",
    )
    command(
        "vacuum",
        "rebuild a SQLite file so that it shrinks and prune gives space back",
        ["hexeract scheduler vacuum --conn /var/lib/myapp/scheduler.db"],
        [conn],
        _cmd_vacuum,
        description="Rebuild a SQLite file with incremental auto-vacuum (files created"
        " before this version lack it) and return its free pages to the file system. Holds"
        " the write lock while it copies the file: run it when the workers are quiet."
        " SQLite only (PostgreSQL's autovacuum does this job).",
    )
    sub = command(
        "inspect",
        "show one schedule, every field",
        ["hexeract scheduler inspect 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b --format json"],
        [conn, fmt],
        _cmd_inspect,
    )
    _id_argument(sub)
    for name, verb, what in (
        ("pause", "pause", "a paused schedule is never claimed until resumed"),
        (
            "resume",
            "resume",
            "a cron schedule whose instant passed while paused moves to its next instant",
        ),
        ("cancel", "cancel", "a cancelled schedule never fires again"),
    ):
        sub = command(
            name,
            f"{verb} a schedule ({what})",
            [f"hexeract scheduler {name} 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b"],
            [conn],
            _cmd_control,
        )
        sub.set_defaults(action=name)
        _id_argument(sub)

    sub = command(
        "add",
        "create a schedule: once (--at, --in), on a cron rule (--cron) or every period (--every)",
        [
            "hexeract scheduler add --in 5m --event-type reminder.due --payload '{\"user\": 42}'",
            "hexeract scheduler add --cron '0 9 * * 1-5' --event-type report.daily"
            " --target bus:reports",
            "hexeract scheduler add --cron '0 9 * * 1-5' --tz Europe/Paris"
            " --event-type report.daily",
            "hexeract scheduler add --every 90m --event-type cache.refresh",
            "hexeract scheduler add --at 2026-03-01T12:00:00Z --event-type invoice.send"
            " --payload @invoice.json",
        ],
        [conn, fmt],
        _cmd_add,
        description="Create a schedule and print its id (the whole schedule with --format"
        " json). Creates the database and its table when they do not exist.",
    )
    _message_arguments(sub, once_in=True)
    sub.add_argument(
        "--schedule-id",
        type=parse_schedule_id,
        metavar="UUID",
        help="use this id instead of a fresh UUIDv7 (an existing id is an error)",
    )
    sub.add_argument(
        "--name",
        type=parse_name,
        metavar="NAME",
        help="name the schedule (its id is then derived from the name; an existing name is"
        " an error: use ensure to declare it idempotently)",
    )
    _named_commands(command, conn, fmt)

    command(
        "schema",
        "print the DDL of the table the stores create (offline, no database needed)",
        [
            "hexeract scheduler schema > schema.sql",
            "hexeract scheduler schema --dialect postgres --table app_schedules",
        ],
        [],
        _cmd_schema,
    )
    schema = cmds.choices["schema"]
    schema.add_argument(
        "--dialect",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="sqlite (the default) or postgres",
    )
    schema.add_argument(
        "--table",
        type=parse_table,
        metavar="NAME",
        help=f"the table name (default: ${TABLE_ENV}, else {DEFAULT_TABLE})",
    )

    sub = command(
        "migrate",
        "copy every schedule, with its state, to another database (e.g. SQLite to PostgreSQL)",
        [
            "hexeract scheduler migrate --from sqlite:////var/lib/myapp/scheduler.db"
            " --to postgresql://app@db.internal/app",
            "hexeract scheduler migrate --from postgresql://app@db.internal/app"
            " --to sqlite:///backup.db --format json",
        ],
        [fmt],
        _cmd_migrate,
        description="Copy every schedule from one database to another with its whole state"
        " (attempts, lease, paused flag, last error, timestamps), whatever its status:"
        " SQLite to PostgreSQL, back, or between two tables. Idempotent: a schedule the"
        " destination already holds (same id) is skipped, never overwritten, so running it"
        " again copies only what is new and resumes a copy that stopped part-way. Prints"
        " how many rows were read, copied and skipped. Never creates the source; creates"
        " the destination's table when needed. Stop the workers on the source first: a"
        " change made there after a row was copied is not carried over.",
    )
    sub.add_argument(
        "--from",
        dest="from_conn",
        required=True,
        type=parse_conn_arg,
        metavar="URL",
        help="the database to copy from, spelled as --conn (sqlite:///path.db, a file path,"
        " postgresql://...); it must exist",
    )
    sub.add_argument(
        "--to",
        dest="to_conn",
        required=True,
        type=parse_conn_arg,
        metavar="URL",
        help="the database to copy to, spelled as --conn; a password is never printed"
        " (PGPASSWORD or ~/.pgpass keep it off the command line)",
    )
    sub.add_argument(
        "--table",
        type=parse_table,
        metavar="NAME",
        help=f"the source table (default: ${TABLE_ENV}, else {DEFAULT_TABLE})",
    )
    sub.add_argument(
        "--to-table",
        type=parse_table,
        metavar="NAME",
        help="the destination table (default: the source table's name)",
    )
    sub.add_argument(
        "--batch-size",
        type=parse_positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"rows per read and per write transaction (default: {DEFAULT_BATCH_SIZE})",
    )

    dead = cmds.add_parser(
        "dead-letter",
        help="list and replay dead-lettered schedules",
        description="Dead-lettered schedules exhausted their attempts; inspect them, fix the"
        " cause, then replay them.",
        epilog=_example(
            "hexeract scheduler dead-letter list",
            "hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b",
        ),
        formatter_class=_Formatter,
    )
    dead_cmds = dead.add_subparsers(
        dest="dead_command", metavar="COMMAND", required=True, help="what to do"
    )
    command(
        "list",
        "list dead-lettered schedules, most recently dead-lettered first",
        ["hexeract scheduler dead-letter list --limit 10 --format json"],
        [conn, fmt, limit],
        _cmd_dead_letter_list,
        into=dead_cmds,
    )
    sub = command(
        "replay",
        "replay a dead-lettered schedule, or all of them: attempts reset, last error"
        " cleared, due now",
        [
            "hexeract scheduler dead-letter replay 0195f3c2-7b1a-7c3e-9a2b-4c5d6e7f8a9b",
            "hexeract scheduler dead-letter replay --all --event-type 'invoice.*'",
        ],
        [conn],
        _cmd_replay,
        into=dead_cmds,
    )
    sub.add_argument(
        "schedule_id",
        nargs="?",
        type=parse_schedule_id,
        metavar="SCHEDULE_ID",
        help="the schedule's UUID (or --all)",
    )
    sub.add_argument(
        "--all",
        action="store_true",
        help="replay every dead letter (matching --event-type), in batches of --batch-size"
        " per transaction; prints how many were replayed",
    )
    _filter_arguments(sub, statuses=False)
    sub.add_argument(
        "--batch-size",
        type=parse_positive_int,
        default=DEFAULT_UPKEEP_BATCH,
        metavar="N",
        help=f"rows per transaction with --all (default: {DEFAULT_UPKEEP_BATCH})",
    )

    sub = command(
        "worker",
        "run a worker in the foreground, delivering due messages to a sink",
        [
            "hexeract scheduler worker --sink myapp.scheduling:sink"
            " --conn sqlite:////var/lib/myapp/scheduler.db",
        ],
        [conn],
        _cmd_worker,
        description="Run a worker in the foreground: claim due occurrences and hand each to"
        " the sink, at least once, retrying with backoff and dead-lettering what keeps"
        " failing. Logs go to stderr. SIGINT or SIGTERM stops it cleanly: the occurrences in"
        " hand are settled first, the rest of the batch released, and it exits 0. A second"
        " signal stops it at once: the dispatch in flight is abandoned (recorded as a"
        " failure), what was never dispatched is released with its attempt given back, and"
        " it exits 128+signal (143 for SIGTERM) within a few seconds. Creates the database"
        " when it does not exist.",
    )
    sub.add_argument(
        "--sink",
        required=True,
        type=parse_sink_spec,
        metavar="MODULE:ATTR",
        help="the sink the application exposes: a ScheduleSink, or a callable taking the"
        " ScheduledMessage",
    )
    sub.add_argument(
        "--app-dir",
        default=".",
        metavar="DIR",
        help="put DIR first on the import path to find the sink module (default: .)",
    )
    settings = sub.add_argument_group("worker settings (durations: 100ms, 5s, 2m, 1h)")
    for flag, help_text in (
        ("--poll-interval", "the longest sleep between polls (default: 100ms)"),
        ("--lease", "how long a claim holds an occurrence (default: 300s)"),
        ("--dispatch-timeout", "the longest one dispatch may take (default: 30s)"),
        ("--retry-base-delay", "base of the exponential retry backoff (default: 1s)"),
        ("--retry-max-delay", "cap of the retry backoff (default: 300s)"),
        ("--min-cycle-delay", "the pause after a cycle that claimed a full batch (default: 5ms)"),
    ):
        settings.add_argument(flag, type=parse_duration, metavar="DURATION", help=help_text)
    settings.add_argument(
        "--batch-size",
        type=parse_positive_int,
        metavar="N",
        help="occurrences claimed per poll (default: 10)",
    )
    settings.add_argument(
        "--no-jitter",
        dest="jitter",
        action="store_false",
        default=None,
        help="retry after exactly the backoff delay instead of a random draw below it",
    )
    settings.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        type=str.lower,
        help="log verbosity on stderr (default: info)",
    )
    return parser


def _message_arguments(sub: argparse.ArgumentParser, *, once_in: bool) -> None:
    """The arguments that describe a message: when (``--at``, ``--in`` when
    ``once_in``, ``--cron`` with ``--first`` and ``--tz``, ``--every`` with
    ``--first``), misfire grace, event type, payload, target, budget."""
    when = sub.add_argument_group("when (exactly one)").add_mutually_exclusive_group(required=True)
    when.add_argument(
        "--at",
        type=parse_instant,
        metavar="INSTANT",
        help="fire once at an ISO 8601 instant with a timezone, e.g. 2026-03-01T12:00:00Z",
    )
    if once_in:
        when.add_argument(
            "--in",
            dest="in_",
            type=parse_duration,
            metavar="DURATION",
            help="fire once after a delay from now: 90s, 5m, 2h, 1d, 1h30m",
        )
    when.add_argument(
        "--cron",
        metavar="EXPR",
        help="fire on a cron rule, in UTC unless --tz: 5 fields, 6 with leading seconds,"
        " or @daily etc.",
    )
    when.add_argument(
        "--every",
        type=parse_duration,
        metavar="DURATION",
        help="fire every period on a fixed grid (90s, 5m, 1h30m; whole milliseconds),"
        " first one period from now (or at --first)",
    )
    sub.add_argument(
        "--misfire-grace",
        type=parse_duration,
        metavar="DURATION",
        help="how late a firing may be found and still be delivered (e.g. 10m); later, a"
        " one-shot is dead-lettered with the reason and a recurring schedule skips to its"
        " next firing (default: no limit, deliver late)",
    )
    sub.add_argument(
        "--tz",
        metavar="ZONE",
        help="with --cron: read the rule on this IANA time zone's wall clock"
        " (e.g. Europe/Paris; default UTC); see the README on daylight saving time",
    )
    sub.add_argument(
        "--first",
        type=parse_instant,
        metavar="INSTANT",
        help="with --cron: the first firing (default: the rule's next instant after now);"
        " with --every: the grid's anchor (default: one period from now)",
    )
    sub.add_argument(
        "--event-type",
        required=True,
        metavar="TYPE",
        help="what the message is, 1 to 64 characters (e.g. reminder.due)",
    )
    sub.add_argument(
        "--payload",
        type=parse_payload,
        metavar="JSON",
        help="the payload: JSON text, @FILE to read a file, or - to read stdin (default: {})",
    )
    sub.add_argument(
        "--target",
        type=parse_target,
        default=Target.mediator(),
        metavar="TARGET",
        help="mediator, outbox or bus:ROUTING_KEY (default: mediator)",
    )
    sub.add_argument(
        "--max-attempts",
        type=parse_positive_int,
        default=5,
        metavar="N",
        help="attempts per occurrence before it is dead-lettered (default: 5)",
    )


def _named_commands(command: Callable[..., argparse.ArgumentParser], conn: Any, fmt: Any) -> None:
    """``ensure``, ``reschedule``, ``update`` and ``run-now``."""
    sub = command(
        "ensure",
        "declare a named schedule idempotently: create it, leave it, or update it in place",
        [
            "hexeract scheduler ensure --name myapp.backup.daily --cron '0 3 * * *'"
            " --event-type backup.run",
        ],
        [conn, fmt],
        _cmd_ensure,
        description="Make the named schedule exist as given, and print what that took:"
        " created, updated (changed in place; a firing in flight completes under the old"
        " values) or unchanged. Safe to run at every start. Creates the database and its"
        " table when they do not exist.",
    )
    sub.add_argument(
        "--name", required=True, type=parse_name, metavar="NAME", help="the schedule's name"
    )
    _message_arguments(sub, once_in=False)

    sub = command(
        "reschedule",
        "move a schedule's next firing",
        ["hexeract scheduler reschedule --name myapp.backup.daily --at 2026-03-01T04:00:00Z"],
        [conn, fmt],
        _cmd_reschedule,
    )
    _id_argument(sub)
    when = sub.add_argument_group("when (exactly one)").add_mutually_exclusive_group(required=True)
    when.add_argument("--at", type=parse_instant, metavar="INSTANT", help="the next firing")
    when.add_argument(
        "--in", dest="in_", type=parse_duration, metavar="DURATION", help="from now: 5m, 2h"
    )

    sub = command(
        "update",
        "change a schedule in place: payload, cron rule, target, event type, attempt budget",
        ["hexeract scheduler update --name myapp.backup.daily --cron '0 4 * * *'"],
        [conn, fmt],
        _cmd_update,
    )
    _id_argument(sub)
    sub.add_argument("--cron", metavar="EXPR", help="the new rule (a cron schedule only)")
    sub.add_argument(
        "--tz",
        metavar="ZONE",
        help="with --cron: read the new rule on this IANA time zone's wall clock (default UTC)",
    )
    sub.add_argument(
        "--misfire-grace",
        type=parse_duration,
        metavar="DURATION",
        help="the new misfire grace (e.g. 10m)",
    )
    sub.add_argument("--event-type", metavar="TYPE", help="the new event type")
    sub.add_argument("--payload", type=parse_payload, metavar="JSON", help="the new payload")
    sub.add_argument("--target", type=parse_target, metavar="TARGET", help="the new target")
    sub.add_argument(
        "--max-attempts", type=parse_positive_int, metavar="N", help="the new attempt budget"
    )

    sub = command(
        "run-now",
        "fire a schedule once as soon as a worker can (a cron one then goes on on its rule)",
        ["hexeract scheduler run-now --name myapp.backup.daily"],
        [conn, fmt],
        _cmd_run_now,
    )
    _id_argument(sub)


def _filter_arguments(sub: argparse.ArgumentParser, *, statuses: bool) -> None:
    if statuses:
        sub.add_argument(
            "--status",
            choices=LIST_STATUSES,
            help="list only schedules with this status (all: every status)",
        )
    sub.add_argument(
        "--event-type",
        metavar="GLOB",
        help="only schedules whose event type matches this glob (* any run, ? one character)",
    )
    if statuses:
        sub.add_argument(
            "--name",
            dest="name_glob",
            metavar="GLOB",
            help="only named schedules matching this glob",
        )


def _id_argument(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "schedule_id",
        nargs="?",
        type=parse_schedule_id,
        metavar="SCHEDULE_ID",
        help="the schedule's UUID (or give --name)",
    )
    sub.add_argument(
        "--name",
        dest="schedule_name",
        type=parse_name,
        metavar="NAME",
        help="the schedule's name instead of its id (e.g. myapp.backup.daily)",
    )


def parse_name(text: str) -> str:
    """A schedule name (see :mod:`hexeract_lite.names`)."""
    try:
        return check_name(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _schedule_id(args: argparse.Namespace, store: ScheduleStore) -> uuid.UUID:
    """The id the command names: SCHEDULE_ID, or --name's (which must exist)."""
    sid: uuid.UUID | None = args.schedule_id
    name: str | None = getattr(args, "schedule_name", None)
    if (sid is None) == (name is None):
        raise UsageError("give exactly one of SCHEDULE_ID or --name")
    if name is None:
        assert sid is not None
        return sid
    sid = name_id(name)
    if store.inspect(sid) is None:
        raise ScheduleNotFound(sid, name)
    return sid


# -- output --------------------------------------------------------------------------

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str | None, width: int | None = None) -> str:
    """``text`` on one line (control characters and runs of whitespace become one
    space), cut to ``width`` characters with ``...`` when longer; ``-`` for None."""
    if text is None:
        return "-"
    flat = " ".join(_CONTROL_CHARS.sub(" ", text).split())
    if width is not None and len(flat) > width:
        flat = flat[: max(width - 3, 0)] + "..."
    return flat


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligned columns separated by two spaces, under a header; no trailing spaces.

    A row with fewer cells than the header is aligned on its cells but the last, which
    runs on to the end of the line (a malformed row's reason)."""
    widths = [len(h) for h in headers]
    for row in rows:
        aligned = row if len(row) == len(headers) else row[:-1]
        for i, cell in enumerate(aligned):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for line in (headers, *rows):
        cells = [cell.ljust(w) for cell, w in zip(line, widths, strict=False)]
        if len(line) < len(headers):
            cells[-1] = line[-1]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


MALFORMED = "malformed"
"""The status a listing shows for a row the store could not decode."""
MALFORMED_REASON_WIDTH = 200
"""How many characters of a malformed row's reason the text listings show."""


def _malformed_row(item: MalformedSchedule) -> tuple[str, str, str]:
    """A listing's row for a row the store could not decode: its id as stored, the
    status ``malformed`` and the reason (naming the column), to the end of the line."""
    return (
        one_line(item.raw_id),
        MALFORMED,
        one_line(item.reason, MALFORMED_REASON_WIDTH),
    )


def _ts(value: datetime | None) -> str:
    return rfc3339(value) or "-"


Listed = ScheduleSnapshot | MalformedSchedule
"""An item of a listing: a schedule, or a row the store could not decode."""


def format_pending(snapshots: Sequence[Listed]) -> str:
    """The text of ``scheduler list``; a malformed row shows its id, ``malformed`` and
    the reason."""
    if not snapshots:
        return "no pending schedules"
    return format_table(
        ("SCHEDULE ID", "STATUS", "SCHEDULED FOR", "ATTEMPTS", "TRIGGER", "EVENT TYPE", "NAME"),
        [
            _malformed_row(s)
            if isinstance(s, MalformedSchedule)
            else (
                str(s.schedule_id),
                s.status.value,
                _ts(s.scheduled_for),
                f"{s.attempts}/{s.max_attempts}",
                one_line(s.trigger.label()),
                one_line(s.event_type),
                one_line(s.name),
            )
            for s in snapshots
        ],
    )


def format_dead_letter(snapshots: Sequence[Listed]) -> str:
    """The text of ``scheduler dead-letter list``; a malformed row shows its id,
    ``malformed`` and the reason."""
    if not snapshots:
        return "no dead-lettered schedules"
    return format_table(
        (
            "SCHEDULE ID",
            "STATUS",
            "SCHEDULED FOR",
            "ATTEMPTS",
            "TRIGGER",
            "EVENT TYPE",
            "DEAD-LETTERED AT",
            "LAST ERROR",
        ),
        [
            _malformed_row(s)
            if isinstance(s, MalformedSchedule)
            else (
                str(s.schedule_id),
                s.status.value,
                _ts(s.scheduled_for),
                f"{s.attempts}/{s.max_attempts}",
                one_line(s.trigger.label()),
                one_line(s.event_type),
                _ts(s.dead_lettered_at),
                one_line(error_summary(s.last_error), LAST_ERROR_WIDTH),
            )
            for s in snapshots
        ],
    )


def snapshot_json(
    snapshot: Listed, *, detail: bool = False, payload: bool = False
) -> dict[str, object]:
    """A listing's JSON object; with ``payload`` also the payload, with ``detail``
    (``inspect``) the payload and the occurrence id of the next firing. A malformed
    row is ``{"schedule_id": <as stored>, "status": "malformed", "row_status": ...,
    "malformed": <reason>}``."""
    if isinstance(snapshot, MalformedSchedule):
        return snapshot.to_json_dict()
    data = snapshot.to_json_dict()
    data.update(_rule_fields(snapshot))
    if detail:
        data["occurrence_id"] = str(_occurrence_id(snapshot))
    if detail or payload:
        try:
            data["payload"] = json.loads(snapshot.payload_json)
        except ValueError:  # a hand-edited row: shown as stored
            data["payload"] = snapshot.payload_json
    return data


def _rule_fields(snapshot: ScheduleSnapshot) -> dict[str, str]:
    """The zone of a zoned cron rule, the period and anchor of an interval, the misfire
    grace when one is set; nothing for a UTC cron rule or a one-shot without a grace
    (their listings are as they always were)."""
    trigger = snapshot.trigger
    expr, interval = trigger.cron_expression, trigger.interval
    fields: dict[str, str] = {}
    if expr is not None and expr.tz != "UTC":
        fields["tz"] = expr.tz
    if interval is not None:
        fields["every"] = format_duration(interval.every)
        fields["anchor"] = _ts(interval.anchor)
    if snapshot.misfire_grace is not None:
        fields["misfire_grace"] = format_duration(snapshot.misfire_grace)
    return fields


_FIELD_NAMES = {"tz": "time zone", "misfire_grace": "misfire grace"}


def _occurrence_id(snapshot: ScheduleSnapshot) -> object:
    from .occurrence import OccurrenceId

    return OccurrenceId.derive(snapshot.schedule_id, snapshot.scheduled_for)


def format_inspect(snapshot: ScheduleSnapshot) -> str:
    """The text of ``scheduler inspect``: one ``field  value`` line per field (``last
    error`` its exception line), then the traceback kept with the error, if any."""
    s = snapshot
    fields = [
        ("schedule id", str(s.schedule_id)),
        ("name", one_line(s.name)),
        ("status", s.status.value),
        ("event type", one_line(s.event_type)),
        ("target", one_line(s.target.label())),
        ("trigger", one_line(s.trigger.label())),
        *((_FIELD_NAMES.get(name, name), value) for name, value in _rule_fields(s).items()),
        ("scheduled for", _ts(s.scheduled_for)),
        ("occurrence id", str(_occurrence_id(s))),
        ("attempts", f"{s.attempts}/{s.max_attempts}"),
        ("leased until", _ts(s.leased_until)),
        ("last error", one_line(error_summary(s.last_error))),
        ("created at", _ts(s.created_at)),
        ("delivered at", _ts(s.delivered_at)),
        ("cancelled at", _ts(s.cancelled_at)),
        ("dead-lettered at", _ts(s.dead_lettered_at)),
        ("payload", s.payload_json),
    ]
    width = max(len(name) for name, _ in fields)
    text = "\n".join(f"{name.ljust(width)}  {value}" for name, value in fields)
    story = (s.last_error or "").split("\n")[1:]
    if story:  # the traceback kept with the error, each line cleaned of control characters
        text += "\ntraceback\n" + "\n".join("  " + _CONTROL_CHARS.sub(" ", line) for line in story)
    return text


def _dump_json(value: object) -> str:
    return json.dumps(value, indent=2)


# -- running a command ---------------------------------------------------------------


class _Context:
    """What every command needs: the resolved connection and table, and the output."""

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.args = args
        self.out = out
        self.conn: str | None = getattr(args, "conn", None)
        table = getattr(args, "table", None)
        if table is None:
            env = os.environ.get(TABLE_ENV) or None
            if env is not None:
                try:
                    table = validate_table_name(env)
                except InvalidArgument as exc:
                    raise UsageError(f"${TABLE_ENV}: {exc}") from None
        self.table: str = table or DEFAULT_TABLE

    def print(self, text: str) -> None:
        print(text, file=self.out)

    @contextlib.contextmanager
    def store(self, *, create: bool, readonly: bool = False) -> Iterator[ScheduleStore]:
        """The store, closed on exit; ``readonly`` for the commands that only read."""
        store = open_store(self.conn, table=self.table, create=create, readonly=readonly)
        try:
            yield store
        finally:
            store.close()


Handler = Callable[[argparse.Namespace, _Context], int]
"""A command: the parsed arguments and the context in, the exit code out."""


def _cmd_list(args: argparse.Namespace, ctx: _Context) -> int:
    filters = (args.status, args.event_type, args.after, args.name_glob)
    filtered = any(value is not None for value in filters)
    check_glob(args.event_type)  # before the store opens: bad input touches nothing
    check_glob(args.name_glob, "name")
    with ctx.store(create=False, readonly=True) as store:
        if filtered:
            rows = store.list_schedules(
                status=args.status,
                event_type=args.event_type,
                after=args.after,
                limit=args.limit,
                name=args.name_glob,
            )
        else:
            rows = SchedulerControl(store).list_pending(args.limit)
    if args.format == "json":
        ctx.print(_dump_json([snapshot_json(s, payload=True) for s in rows]))
    elif filtered and not rows:
        ctx.print("no matching schedules")
    else:
        ctx.print(format_pending(rows))
    return EXIT_OK


def _cmd_dead_letter_list(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        rows = SchedulerControl(store).list_dead_letter(args.limit)
    if args.format == "json":
        ctx.print(_dump_json([snapshot_json(s) for s in rows]))
    else:
        ctx.print(format_dead_letter(rows))
    return EXIT_OK


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return "-"  # pragma: no cover


def format_stats(stats: StoreStats) -> str:
    """The text of ``scheduler stats``: one ``field  value`` line per figure."""
    lag = stats.oldest_due_lag
    fields = [
        ("pending", str(stats.pending)),
        ("paused", str(stats.paused)),
        ("delivered", str(stats.delivered)),
        ("cancelled", str(stats.cancelled)),
        ("dead-lettered", str(stats.dead_lettered)),
        ("total", str(stats.total)),
        ("due, not claimed", str(stats.due)),
        ("in flight", str(stats.in_flight)),
        ("in retry backoff", str(stats.in_backoff)),
        ("oldest due lag", "-" if lag is None else f"{lag.total_seconds():.3f} s"),
        ("next wake-up", _ts(stats.next_wakeup)),
        ("file size", _size(stats.file_bytes)),
        ("WAL size", _size(stats.wal_bytes)),
    ]
    width = max(len(name) for name, _ in fields)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in fields)


def _cmd_stats(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        stats = store.stats()
    if args.format == "json":
        ctx.print(_dump_json(stats.as_json()))
    else:
        ctx.print(format_stats(stats))
    return EXIT_OK


def _cmd_prune(args: argparse.Namespace, ctx: _Context) -> int:
    statuses = ["delivered", "cancelled"]
    if args.include_dead_letters:
        statuses.append("dead-lettered")
    older_than, _ = check_prune(args.older_than, statuses)  # before the store opens
    progress = Progress("pruned")
    with ctx.store(create=False, readonly=args.dry_run) as store:
        count = store.prune(
            older_than,
            statuses=statuses,
            batch_size=args.batch_size,
            dry_run=args.dry_run,
            progress=progress,
        )
    progress.done()
    noun = "schedule" if count == 1 else "schedules"
    verb = "Would prune" if args.dry_run else "Pruned"
    ctx.print(f"{verb} {count} {noun}.")
    return EXIT_OK


def _cmd_vacuum(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False) as store:
        vacuum = getattr(store, "vacuum", None)
        if not callable(vacuum):
            raise InvalidArgument(
                "vacuum is for SQLite files; PostgreSQL's autovacuum reclaims space itself"
            )
        before = store.stats().file_bytes
        vacuum()
        after = store.stats().file_bytes
    ctx.print(f"Vacuumed: {_size(before)} -> {_size(after)}.")
    return EXIT_OK


def _cmd_inspect(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False, readonly=True) as store:
        snapshot = SchedulerControl(store).inspect(_schedule_id(args, store))
    if args.format == "json":
        ctx.print(_dump_json(snapshot_json(snapshot, detail=True)))
    else:
        ctx.print(format_inspect(snapshot))
    return EXIT_OK


def _cmd_control(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False) as store:
        sid = _schedule_id(args, store)
        control = SchedulerControl(store)
        before = control.inspect(sid)
        changed = bool(getattr(control, args.action)(sid))
        after = control.inspect(sid)
    if args.action == "pause":
        if changed:
            ctx.print(f"Paused schedule {sid}.")
        elif before.status is ScheduleStatus.PAUSED:
            ctx.print(f"Schedule {sid} is already paused.")
        else:
            ctx.print(f"Schedule {sid} is {before.status}; nothing to pause.")
    elif args.action == "resume":
        if changed:
            ctx.print(f"Resumed schedule {sid}; next firing {_ts(after.scheduled_for)}.")
        elif after.status is ScheduleStatus.PAUSED:
            # A paused cron schedule whose rule has no instant after now stays paused.
            raise SchedulerError(
                f"schedule {sid} stays paused: its cron expression has no instant after now"
            )
        else:
            ctx.print(f"Schedule {sid} is {before.status}, not paused; nothing to resume.")
    elif changed:
        ctx.print(f"Cancelled schedule {sid}.")
    else:
        ctx.print(f"Schedule {sid} is {before.status}; nothing to cancel.")
    return EXIT_OK


def _cmd_replay(args: argparse.Namespace, ctx: _Context) -> int:
    if args.all == (args.schedule_id is not None):
        raise InvalidArgument("give either a SCHEDULE_ID or --all (not both, not neither)")
    if args.event_type is not None and not args.all:
        raise InvalidArgument("--event-type only goes with --all")
    if args.all:
        check_glob(args.event_type)
        progress = Progress("replayed")
        with ctx.store(create=False) as store:
            count = replay_all(
                store, event_type=args.event_type, batch_size=args.batch_size, progress=progress
            )
        progress.done()
        ctx.print(f"Replayed {count} dead-lettered schedule{'' if count == 1 else 's'}.")
        return EXIT_OK
    with ctx.store(create=False) as store:
        sid = _schedule_id(args, store)
        SchedulerControl(store).replay(sid)
    ctx.print(f"Replayed schedule {sid}.")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace, ctx: _Context) -> int:
    if args.dialect == "sqlite":
        from .store.schema import sqlite_ddl

        ddl = sqlite_ddl(ctx.table)
    else:
        try:
            from .store.postgres_schema import postgres_ddl
        except ImportError as exc:
            raise StoreError(
                f"this build of hexeract_lite has no PostgreSQL schema ({exc})"
            ) from None
        ddl = postgres_ddl(ctx.table)
    ctx.print(ddl.rstrip("\n"))
    return EXIT_OK


def _message_from_args(
    args: argparse.Namespace, name: str | None, *, declared: bool = False
) -> ScheduledMessage:
    """The message ``add`` or ``ensure`` (``declared``) describes; a ``--first`` that
    is not an instant of the rule is kept (it fires then, then on the rule), with a
    note on stderr. ``--every`` without ``--first``: anchored one period from now, or
    for ``ensure`` on the epoch's grid (so that declaring it again is unchanged)."""
    payload = args.payload.value if args.payload is not None else {}
    now = SYSTEM_CLOCK.now()
    schedule_id = getattr(args, "schedule_id", None)
    if args.first is not None and args.cron is None and args.every is None:
        raise UsageError("--first goes with --cron or --every only")
    if args.tz is not None and args.cron is None:
        raise UsageError(
            f"--tz {args.tz!r} goes with --cron only (a one-shot's --at names its own offset;"
            " an interval is a fixed period)"
        )
    if args.every is not None:
        try:
            if args.first is not None:
                anchor = args.first
            elif declared:
                anchor = default_grid_anchor(args.every, now)
            else:
                anchor = now + args.every
        except OverflowError:
            raise UsageError(f"--every {args.every} reaches past the year 9999") from None
        return ScheduledMessage.every(
            args.target,
            args.every,
            anchor,
            args.event_type,
            payload,
            schedule_id=schedule_id,
            name=name,
            misfire_grace=args.misfire_grace,
        )
    if args.cron is not None:
        expression = CronExpression.parse(args.cron, tz=args.tz)
        first = args.first
        if first is None:
            first = expression.next_occurrence(now)
            if first is None:
                raise InvalidArgument(f"cron expression {args.cron!r} has no instant after now")
        elif expression.next_occurrence(first - timedelta(milliseconds=1)) != first:
            print(
                f"note: --first {rfc3339(first)} is not an instant of the rule {args.cron!r}:"
                " the schedule fires then, then on the rule",
                file=sys.stderr,
            )
        return ScheduledMessage.cron(
            args.target,
            expression,
            first,
            args.event_type,
            payload,
            schedule_id=schedule_id,
            name=name,
            misfire_grace=args.misfire_grace,
        )
    in_: timedelta | None = getattr(args, "in_", None)
    try:
        at = args.at if args.at is not None or in_ is None else now + in_
    except OverflowError:
        raise UsageError(f"--in {in_} reaches past the year 9999") from None
    return ScheduledMessage.delay(
        args.target,
        at,
        args.event_type,
        payload,
        schedule_id=schedule_id,
        name=name,
        misfire_grace=args.misfire_grace,
    )


def _cmd_add(args: argparse.Namespace, ctx: _Context) -> int:
    if args.name is not None and args.schedule_id is not None:
        raise UsageError("--schedule-id and --name do not go together (a name gives the id)")
    message = _message_from_args(args, args.name)
    with ctx.store(create=True) as store:
        control = SchedulerControl(store)
        control.schedule(message, max_attempts=args.max_attempts)
        snapshot = control.inspect(message.schedule_id)
    if args.format == "json":
        ctx.print(_dump_json(snapshot_json(snapshot, detail=True)))
    else:
        ctx.print(str(message.schedule_id))
    return EXIT_OK


def _print_change(
    ctx: _Context, args: argparse.Namespace, snapshot: ScheduleSnapshot, result: str, text: str
) -> None:
    if args.format == "json":
        ctx.print(_dump_json({"result": result, "schedule": snapshot_json(snapshot, detail=True)}))
    else:
        ctx.print(text)


def _cmd_ensure(args: argparse.Namespace, ctx: _Context) -> int:
    message = _message_from_args(args, args.name, declared=True)
    with ctx.store(create=True) as store:
        result = store.ensure(message, args.max_attempts)
        snapshot = SchedulerControl(store).inspect(message.schedule_id)
    text = f"{result.value}: {args.name} ({message.schedule_id}); next firing"
    _print_change(ctx, args, snapshot, result.value, f"{text} {_ts(snapshot.scheduled_for)}")
    return EXIT_OK


def _cmd_reschedule(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False) as store:
        sid = _schedule_id(args, store)
        try:
            at = args.at if args.at is not None else SYSTEM_CLOCK.now() + args.in_
        except OverflowError:
            raise UsageError(f"--in {args.in_} reaches past the year 9999") from None
        control = SchedulerControl(store)
        changed = control.reschedule(sid, at)
        snapshot = control.inspect(sid)
    result = "rescheduled" if changed else "unchanged"
    text = f"Schedule {sid}: next firing {rfc3339(at)}"
    if snapshot.leased_until is not None and snapshot.scheduled_for != at:
        text += " (after the firing in flight)"
    _print_change(ctx, args, snapshot, result, text + ".")
    return EXIT_OK


def _cmd_update(args: argparse.Namespace, ctx: _Context) -> int:
    if args.tz is not None and args.cron is None:
        raise UsageError(f"--tz {args.tz!r} goes with --cron only")
    fields: dict[str, Any] = {
        "cron": args.cron,
        "event_type": args.event_type,
        "target": args.target,
        "max_attempts": args.max_attempts,
    }
    if args.payload is not None:
        fields["payload"] = args.payload.value
    if args.misfire_grace is not None:
        fields["misfire_grace"] = args.misfire_grace
    if all(v is None for v in fields.values()):
        raise UsageError(
            "give at least one of --payload, --cron, --target, --event-type, --max-attempts,"
            " --misfire-grace"
        )
    if args.tz is not None:
        fields["tz"] = args.tz
    with ctx.store(create=False) as store:
        sid = _schedule_id(args, store)
        control = SchedulerControl(store)
        changed = control.update(sid, **fields)
        snapshot = control.inspect(sid)
    result = "updated" if changed else "unchanged"
    text = f"Updated schedule {sid}." if changed else f"Schedule {sid} already has these values."
    _print_change(ctx, args, snapshot, result, text)
    return EXIT_OK


def _cmd_run_now(args: argparse.Namespace, ctx: _Context) -> int:
    with ctx.store(create=False) as store:
        sid = _schedule_id(args, store)
        control = SchedulerControl(store)
        changed = control.run_now(sid)
        snapshot = control.inspect(sid)
    if changed:
        result, text = "due", f"Schedule {sid} is due now; a worker fires it next."
    else:
        result, text = "in-flight", f"Schedule {sid} is being delivered now; nothing to do."
    _print_change(ctx, args, snapshot, result, text)
    return EXIT_OK


def _same_database(a: ConnTarget, b: ConnTarget) -> bool:
    if a.kind == "sqlite" and b.kind == "sqlite":
        assert a.path is not None and b.path is not None
        return a.path.expanduser().resolve() == b.path.expanduser().resolve()
    return a.kind == b.kind and a.url == b.url


def format_migration(report: MigrationReport) -> str:
    """The counts line of ``scheduler migrate``."""
    return (
        f"read {report.read}, copied {report.copied},"
        f" skipped {report.skipped} (already in the destination)"
    )


def _cmd_migrate(args: argparse.Namespace, ctx: _Context) -> int:
    source, dest = parse_conn(args.from_conn), parse_conn(args.to_conn)
    source_table = ctx.table
    dest_table = args.to_table or source_table
    if _same_database(source, dest) and source_table == dest_table:
        raise UsageError(
            f"--from and --to name the same table ({source_table} in {source.display()}):"
            " nothing to copy"
        )
    # The source first: when it is missing, nothing (not even the destination) is created.
    with (
        contextlib.closing(open_store(source, table=source_table, create=False)) as src,
        contextlib.closing(open_store(dest, table=dest_table, create=True)) as dst,
    ):
        progress = Progress("read")
        report = migrate(src, dst, batch_size=args.batch_size, progress=progress)
    progress.done()
    if args.format == "json":
        data: dict[str, object] = {
            "source": source.display(),
            "source_table": source_table,
            "destination": dest.display(),
            "destination_table": dest_table,
            **report.to_json_dict(),
        }
        ctx.print(_dump_json(data))
    else:
        ctx.print(
            f"Migrated table {source_table} of {source.display()}"
            f" to table {dest_table} of {dest.display()}:"
        )
        ctx.print(format_migration(report))
    return EXIT_OK


# -- the worker ----------------------------------------------------------------------


def _load_sink(spec: str, app_dir: str) -> ScheduleSink:
    """Import ``MODULE:ATTR`` and return a sink: a ScheduleSink as is, a callable
    wrapped in :class:`CallableSink`."""
    from .sinks import CallableSink, ScheduleSink  # the worker command's alone

    module_name, _, attr_path = spec.partition(":")
    path = os.path.abspath(app_dir)
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise UsageError(f"cannot import sink module {module_name!r}: {exc}") from None
        raise SchedulerError(f"importing sink module {module_name!r} failed: {exc!r}") from exc
    except Exception as exc:
        raise SchedulerError(f"importing sink module {module_name!r} failed: {exc!r}") from exc
    obj: object = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(
                f"sink module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if isinstance(obj, type):
        raise UsageError(
            f"sink {spec!r} is a class: expose an instance, e.g. {attr_path.split('.')[-1].lower()}"
            f" = {attr_path.split('.')[-1]}()"
        )
    if isinstance(obj, ScheduleSink):
        return obj
    if callable(obj):
        return CallableSink(cast("Callable[[ScheduledMessage], Any]", obj))
    raise UsageError(
        f"sink {spec!r} is a {type(obj).__name__}: expected a ScheduleSink or a callable"
        " taking the message"
    )


_SETTINGS = (
    "poll_interval",
    "batch_size",
    "lease",
    "retry_base_delay",
    "retry_max_delay",
    "jitter",
    "min_cycle_delay",
    "dispatch_timeout",
)


class _ScrubbingFormatter(logging.Formatter):
    """Formats a record, then removes any password the connection string carries."""

    def __init__(self, target: ConnTarget | None) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._target = target

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record), self._target)


@contextlib.contextmanager
def _logging_to_stderr(level: str, target: ConnTarget | None) -> Iterator[None]:
    """Route log records to stderr for the worker's lifetime, then restore the root."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_ScrubbingFormatter(target))
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


_ABORT_GRACE_S = 5.0
"""After a second stop signal, how long the worker has to settle its batch before the
process exits regardless (its leases then expire and another worker redelivers)."""


class _StopSignals:
    """The stop signals the worker command received."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.deadline: float | None = None
        """Set by the second signal: the process exits by then."""

    @property
    def exit_code(self) -> int:
        """``128 + signal`` of the signal that aborted the worker."""
        return 128 + self.received[-1]


@contextlib.contextmanager
def _stop_on_signals(
    stop: threading.Event, wake: Callable[[], None], abort: Callable[[], None]
) -> Iterator[_StopSignals]:
    """SIGINT and SIGTERM, for the worker command (in the main thread only).

    The first sets ``stop`` and wakes the worker: it finishes the occurrences in hand.
    The second calls ``abort``: the dispatch in flight is abandoned (recorded as
    failed), what was not dispatched is released and the rest settled, and the
    command exits ``128 + signal`` within :data:`_ABORT_GRACE_S`. A third exits at once.
    """
    signals = _StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signals.received.append(signum)
        name = signal.Signals(signum).name
        if len(signals.received) == 1:
            log.info("%s received: stopping after the occurrences in hand", name)
            stop.set()
            wake()
        elif len(signals.received) == 2:
            log.warning(
                "second %s: abandoning the dispatch in flight, releasing the rest of the batch",
                name,
            )
            signals.deadline = time.monotonic() + _ABORT_GRACE_S
            abort()  # safe here: the main thread only joins the worker's thread
        else:
            log.warning("%s again: exiting without waiting", name)
            os._exit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield signals
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _cmd_worker(args: argparse.Namespace, ctx: _Context) -> int:
    from .worker import SchedulerWorker, SchedulerWorkerConfig  # asyncio: only workers need it

    given = {name: getattr(args, name) for name in _SETTINGS if getattr(args, name) is not None}
    config = SchedulerWorkerConfig(**given)
    sink = _load_sink(args.sink, args.app_dir)
    target = parse_conn(ctx.conn)
    with _logging_to_stderr(args.log_level, target), ctx.store(create=True) as store:
        worker = SchedulerWorker(store, sink, config=config)
        stop = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                worker.run(stop)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)

        thread = threading.Thread(target=run, name="hexeract-worker", daemon=True)
        log.info(
            "worker started: database %s, table %s, sink %s",
            target.display(),
            ctx.table,
            args.sink,
        )
        with _stop_on_signals(stop, store.changes.notify, worker.abort) as signals:
            thread.start()
            while thread.is_alive():
                thread.join(0.2 if signals.deadline is None else 0.05)
                if signals.deadline is not None and time.monotonic() > signals.deadline:
                    log.error(
                        "the worker did not settle its batch within %g s; exiting, its"
                        " leases will expire and another worker redelivers",
                        _ABORT_GRACE_S,
                    )
                    sys.stderr.flush()
                    os._exit(signals.exit_code)
        if failure:
            raise failure[0]
        if signals.deadline is not None:
            log.warning("worker aborted: exiting %d", signals.exit_code)
            return signals.exit_code
        log.info("worker stopped")
    return EXIT_OK


# -- main ----------------------------------------------------------------------------


def _prog() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name.startswith("hexeract") else "hexeract"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hexeract`` command with ``argv`` (default: ``sys.argv[1:]``); return the
    exit code: 0 success, 1 runtime error, 2 usage error."""
    parser = build_parser(_prog())
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help, --version, or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR if exc.code else EXIT_OK
    cmd_parser: argparse.ArgumentParser = args.cmd_parser
    handler: Handler = args.handler
    # What to scrub from any message: every connection string in use, wherever it came
    # from (migrate has two).
    conns = [
        getattr(args, "conn", None) or os.environ.get(DATABASE_URL_ENV),
        getattr(args, "from_conn", None),
        getattr(args, "to_conn", None),
    ]

    def clean(text: str) -> str:
        for conn in conns:
            if conn:
                text = scrub(text, conn)
        return scrub(text, None)

    try:
        return handler(args, _Context(args, sys.stdout))
    except InvalidArgument as exc:  # UsageError included
        return _usage_error(cmd_parser, clean(str(exc)))
    except SchedulerError as exc:
        return _runtime_error(parser.prog, clean(str(exc)))
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        detail = clean("".join(traceback.format_exception(exc)))
        sys.stderr.write(detail)
        return _runtime_error(parser.prog, clean(f"unexpected {type(exc).__name__}: {exc}"))


def _usage_error(parser: argparse.ArgumentParser, message: str) -> int:
    try:
        parser.error(message)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return EXIT_USAGE  # pragma: no cover - parser.error always exits


def _runtime_error(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """After a closed pipe (``hexeract ... | head``), stop Python from complaining at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
