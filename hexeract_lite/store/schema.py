"""Table names and DDL shared by the SQL stores and the CLI's ``schema`` command."""

from __future__ import annotations

import re

from ..errors import InvalidConfiguration

__all__ = ["DEFAULT_TABLE", "TABLE_NAME_RE", "validate_table_name"]

DEFAULT_TABLE = "scheduled_messages"
TABLE_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
MAX_TABLE_NAME_BYTES = 63


def validate_table_name(name: object) -> str:
    """Return ``name`` if it matches ``^[a-zA-Z_][a-zA-Z0-9_]*$`` and has at most 63 bytes.

    Checked before a table name is ever put into SQL, so it cannot inject any;
    anything else raises :class:`InvalidConfiguration` quoting the name.
    """
    if not isinstance(name, str) or not TABLE_NAME_RE.fullmatch(name):
        raise InvalidConfiguration(
            f"invalid table name {name!r}: it must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
        )
    if len(name.encode()) > MAX_TABLE_NAME_BYTES:
        raise InvalidConfiguration(
            f"invalid table name {name!r}: {len(name)} characters; at most"
            f" {MAX_TABLE_NAME_BYTES} are allowed"
        )
    return name
