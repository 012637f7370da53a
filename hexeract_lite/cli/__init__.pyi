# Generated from hexeract_lite.cli._EXPORTS by hexeract_lite._lazy.write_stubs().

from ..errors import UsageError as UsageError
from .app import main as main
from .args import TABLE_ENV as TABLE_ENV
from .args import DEFAULT_LIMIT as DEFAULT_LIMIT
from .args import MAX_INT_ARG as MAX_INT_ARG
from .args import Payload as Payload
from .args import parse_conn_arg as parse_conn_arg
from .args import parse_duration as parse_duration
from .args import parse_instant as parse_instant
from .args import parse_name as parse_name
from .args import parse_payload as parse_payload
from .args import parse_positive_int as parse_positive_int
from .args import parse_schedule_id as parse_schedule_id
from .args import parse_sink_spec as parse_sink_spec
from .args import parse_table as parse_table
from .args import parse_target as parse_target
from .context import EXIT_OK as EXIT_OK
from .context import EXIT_ERROR as EXIT_ERROR
from .context import EXIT_USAGE as EXIT_USAGE
from .context import Handler as Handler
from .output import LAST_ERROR_WIDTH as LAST_ERROR_WIDTH
from .output import MALFORMED as MALFORMED
from .output import MALFORMED_REASON_WIDTH as MALFORMED_REASON_WIDTH
from .output import Listed as Listed
from .output import format_dead_letter as format_dead_letter
from .output import format_inspect as format_inspect
from .output import format_migration as format_migration
from .output import format_pending as format_pending
from .output import format_size as format_size
from .output import format_stats as format_stats
from .output import format_table as format_table
from .output import one_line as one_line
from .output import snapshot_json as snapshot_json
from .parser import build_parser as build_parser

__all__ = [
    "main",
    "UsageError",
    "build_parser",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "Handler",
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
]
