"""The syntax of connection strings, shared by :mod:`hexeract_lite.connect` and the
SQLite store's path check (which must not import the stores' opener)."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import UnsupportedConnection
from .redact import SCHEME_RE as SCHEME_RE
from .redact import redact_conn

POSTGRES_SCHEMES = ("postgres", "postgresql")
# libpq's keyword/value form, ``host=db.internal dbname=app ...``: its first keyword
LIBPQ_KV_RE = re.compile(
    r"^\s*(?:host|hostaddr|port|dbname|user|password|passfile|require_auth|channel_binding"
    r"|connect_timeout|client_encoding|options|application_name|fallback_application_name"
    r"|keepalives|keepalives_idle|keepalives_interval|keepalives_count|tcp_user_timeout"
    r"|replication|gssencmode|sslmode|requiressl|sslcompression|sslcert|sslkey|sslpassword"
    r"|sslcertmode|sslrootcert|sslcrl|sslcrldir|sslsni|requirepeer|ssl_min_protocol_version"
    r"|ssl_max_protocol_version|krbsrvname|gsslib|gssdelegation|service"
    r"|target_session_attrs|load_balance_hosts)\s*=",
    re.IGNORECASE,
)


def sqlite_url_path(conn: str, match: re.Match[str]) -> Path:
    """The file a ``sqlite://`` URL (``match``: its :data:`SCHEME_RE` match) names:
    ``sqlite:///abs`` and ``sqlite:////abs`` alike, ``sqlite://rel`` relative;
    :class:`UnsupportedConnection` when it names none."""
    rest = conn[match.end() :]
    if rest.startswith("/"):
        rest = "/" + rest.lstrip("/")  # sqlite:///abs and sqlite:////abs alike
    if not rest or rest == "/":
        raise UnsupportedConnection(
            f"the sqlite URL {redact_conn(conn)!r} names no file"
            " (write sqlite:///absolute/path.db or sqlite://relative/path.db)"
        )
    if "?" in rest:
        raise UnsupportedConnection(
            f"the sqlite URL {redact_conn(conn)!r} has a query ({rest[rest.index('?') :]!r}):"
            " a sqlite:// URL takes none; give the options to the store"
            " (readonly=True, durability=...)"
        )
    if rest.lstrip("/") == ":memory:":
        raise UnsupportedConnection(
            f"the sqlite URL {redact_conn(conn)!r} names no file: schedules are kept on disk"
            " (for a store in memory, use InMemoryScheduleStore)"
        )
    return Path(rest)
