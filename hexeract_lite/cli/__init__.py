"""The ``hexeract`` command (docs/reference/cli.md): :func:`main` runs a command of the
tree :mod:`.parser` builds; exit codes 0 success, 1 runtime error, 2 usage error.
"""

from __future__ import annotations

from .._lazy import lazy_exports

# Every public name and the module that defines it, imported on first use (see ._lazy).
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
