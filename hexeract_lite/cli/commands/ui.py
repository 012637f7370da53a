"""``hexeract scheduler ui``: serve the web console (:mod:`hexeract_lite.web`) locally."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
from functools import partial

from ...errors import SchedulerError, StoreError, UsageError
from ..args import parse_positive_int
from ..context import EXIT_OK, Context
from ..options import CommandTree, arg, switch

TOKEN_ENV = "HEXERACT_UI_TOKEN"
"""The environment variable holding the console's access token."""

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
"""The Host headers a console on a loopback address without a token answers."""


def add_parser(tree: CommandTree) -> None:
    """Add ``ui``."""
    sub = tree.command(
        "ui",
        "serve the web console: overview, schedules, dead letters, timeline",
        [
            "hexeract scheduler ui --conn sqlite:////var/lib/myapp/scheduler.db --open",
            "HEXERACT_UI_TOKEN=s3cret hexeract scheduler ui --host 0.0.0.0 --allow-actions",
        ],
        [tree.conn],
        _run,
        description="Serve the web console over HTTP: counts and the last 24 hours, the"
        " schedules with their next firings, each schedule's trigger, payload and last"
        " error, the dead letters and a timeline of what fires next; pages refresh"
        " themselves. Without --allow-actions it only reads (a SQLite file is opened"
        " read-only and left byte for byte as it was). It listens on 127.0.0.1; another"
        f" address needs ${TOKEN_ENV}, and then every request must carry it (open the"
        " console once with ?token=<token>, which sets a cookie, or send Authorization:"
        " Bearer <token>). Needs the web extra: pip install 'hexeract_lite[web]'.",
    )
    help_text = f"the address to listen on (default: 127.0.0.1; another needs ${TOKEN_ENV})"
    arg(sub, "--host", None, help_text, default="127.0.0.1", metavar="ADDRESS")
    port = (partial(parse_positive_int, most=65535), "N")
    arg(sub, "--port", port, "the port to listen on (default: 8765)", default=8765)
    switch(
        sub,
        "--allow-actions",
        "serve the actions too (pause, resume, cancel, run now, reschedule, replay),"
        " as POST forms with a CSRF token; opens the store for writing",
    )
    switch(sub, "--open", "open the console in the default web browser")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _run(args: argparse.Namespace, ctx: Context) -> int:
    token = os.environ.get(TOKEN_ENV) or None
    loopback = is_loopback(args.host)
    if not loopback and token is None:
        raise UsageError(
            f"--host {args.host} is not a loopback address: set {TOKEN_ENV} to an access"
            " token (every request must then carry it), or serve on 127.0.0.1"
        )
    try:
        import uvicorn
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        from ...web import create_app
    except ImportError as exc:
        raise StoreError(
            f"the web console needs the web extra ({exc.name} is missing):"
            " pip install 'hexeract_lite[web]'"
        ) from None
    readonly = not args.allow_actions
    with ctx.store(create=False, readonly=readonly) as store:
        app = create_app(store, allow_actions=args.allow_actions, token=token)
        if loopback and token is None:  # no other site's page may reach it by DNS rebinding
            app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_NAMES))
        shown_host = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{shown_host}:{args.port}/"
        listening = _listen(args.host, args.port, url)
        mode = "actions allowed" if args.allow_actions else "read-only"
        ctx.print(f"Serving the console on {url} ({mode}); Ctrl-C stops it.")
        ctx.out.flush()
        if args.open:
            import threading
            import webbrowser

            threading.Timer(0.5, webbrowser.open, [url]).start()
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", lifespan="off"
        )
        # uvicorn re-raises the signal that stopped it once it has shut down: SIGTERM
        # then ends the process here, as SIGINT does, through the store's close
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            uvicorn.Server(config).run(sockets=[listening])
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


def _listen(host: str, port: int, url: str) -> socket.socket:
    """A socket listening on ``host``:``port``, so that the console is announced only once
    it listens; an unknown host, an address in use or not this host's: the error, naming
    ``url``."""
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind
        sock.bind(address)
        sock.listen()
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise SchedulerError(f"cannot listen on {url}: {exc.strerror or exc}") from None
    return sock


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_OK)
