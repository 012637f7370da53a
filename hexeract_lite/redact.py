"""Passwords out of connection strings: :func:`redact_conn` for showing one,
:func:`scrub` for any text that may quote one (a driver's message, a traceback)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Protocol

SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
# scheme://user:password@ -- the password is everything between the first ':' of the
# userinfo and the last '@' before the host.
_URL_PASSWORD_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<pw>[^\s]*)@")
# libpq keyword/value strings and URL query parameters: password=secret
_KV_PASSWORD_RE = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|[^\s&]+)", re.I)


class _HasUrl(Protocol):
    @property
    def url(self) -> str | None: ...


def passwords(conn: str) -> list[str]:
    """Every password spelled in a connection string: a URL's ``user:password@``, and
    ``password=...`` (a query parameter or a libpq keyword)."""
    found: list[str] = []
    if SCHEME_RE.match(conn):
        try:
            password = urllib.parse.urlsplit(conn).password
        except ValueError:
            password = None
        if password:
            found.append(password)
    for regex in (_URL_PASSWORD_RE, _KV_PASSWORD_RE):
        found.extend(match.group("pw") for match in regex.finditer(conn))
    return [p for p in found if p]


def redact_conn(conn: str) -> str:
    """``conn`` with any password replaced by ``***`` (``postgresql://user:***@host/db``,
    ``password=***``)."""
    text = _URL_PASSWORD_RE.sub(lambda m: f"{m.group('head')}***@", conn)
    return _KV_PASSWORD_RE.sub(lambda m: f"{m.group('head')}***", text)


def scrub(text: str, conn: str | _HasUrl | None) -> str:
    """``text`` with every password removed: those ``conn`` carries (raw, percent-encoded
    and -decoded) and those a URL or ``password=`` inside ``text`` carries. For driver
    messages, tracebacks and log lines."""
    text = redact_conn(text)
    raw = conn if conn is None or isinstance(conn, str) else conn.url
    secrets: set[str] = set()
    for password in passwords(raw or ""):
        secrets.add(password)
        secrets.add(urllib.parse.quote(password, safe=""))
        secrets.add(urllib.parse.unquote(password))
        if len(password) >= 2 and password[0] == password[-1] == "'":
            secrets.add(password[1:-1].replace("\\'", "'").replace("\\\\", "\\"))
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
