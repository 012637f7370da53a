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

Where each thing lives:

- :mod:`.app`: :func:`main`, running a command and its exit code and error message;
- :mod:`.parser`: :func:`build_parser`, the command tree (a command run builds only its own
  part of it: :func:`~.parser.parser_for`);
- :mod:`.options`: what the commands share in the tree (help layout, ``--conn``/
  ``--table``, ``--format``, ``--limit``, ``SCHEDULE_ID``/``--name``, the message
  arguments of ``add`` and ``ensure``);
- :mod:`.args`: the argument value parsers (``parse_duration``, ``parse_instant``, ...);
- :mod:`.output`: the text tables, JSON objects and ``inspect`` field list;
- :mod:`.context`: what a handler gets (the connection, table and output), the exit codes;
- :mod:`.commands`: one module per command, its options and its handler: ``list``,
  ``stats``, ``prune``, ``vacuum``, ``inspect``, ``control`` (pause, resume, cancel),
  ``add``, ``ensure``, ``reschedule``, ``update``, ``run_now``, ``schema``,
  ``migrate``, ``dead_letter`` (list, replay), ``worker`` (the sink, logging, stop
  signals).
"""

from __future__ import annotations

from .._lazy import lazy_exports

# Every public name, once, and the module that defines it (it makes __all__ and the
# type checkers' __init__.pyi): imported on first use (PEP 562), so
# that a command imports only what it runs.
_EXPORTS = {
    ".app": ("main",),
    "..errors": ("UsageError",),
    ".parser": ("build_parser",),
    ".context": ("EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "Handler"),
    ".args": (
        "TABLE_ENV",
        "DEFAULT_LIMIT",
        "MAX_INT_ARG",
        "Payload",
        "parse_conn_arg",
        "parse_duration",
        "parse_instant",
        "parse_name",
        "parse_payload",
        "parse_positive_int",
        "parse_schedule_id",
        "parse_sink_spec",
        "parse_table",
        "parse_target",
    ),
    ".output": (
        "LAST_ERROR_WIDTH",
        "MALFORMED",
        "MALFORMED_REASON_WIDTH",
        "Listed",
        "format_dead_letter",
        "format_inspect",
        "format_migration",
        "format_pending",
        "format_size",
        "format_stats",
        "format_table",
        "one_line",
        "snapshot_json",
    ),
}
__getattr__, __dir__, _MODULE_OF = lazy_exports(__name__, globals(), _EXPORTS)
