"""The console's ASGI application: :func:`create_app` (pages, actions and HTTP rules:
docs/howto/console.md). User values are escaped by Jinja2 after :func:`~.views.shown`;
errors are scrubbed of passwords."""

from __future__ import annotations

import hmac
import secrets
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..control import SchedulerControl
from ..errors import InvalidArgument, InvalidConfiguration, ScheduleNotFound, SchedulerError
from ..redact import scrub
from ..upkeep import replay_all
from . import views

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from ..store.base import ScheduleStore

REFRESH_SECONDS = 5
"""How often a page refreshes its live part."""
TOKEN_COOKIE = "hexeract_ui_token"
"""The cookie that carries the access token after a ``?token=`` visit."""

_HERE = Path(__file__).parent
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_ACTIONS = ("pause", "resume", "cancel", "run-now", "replay", "reschedule")
_DONE = {
    "pause": "Paused.",
    "resume": "Resumed.",
    "cancel": "Cancelled.",
    "run-now": "Due now: a worker fires it on its next cycle.",
    "replay": "Replayed: pending, due now.",
    "reschedule": "Rescheduled.",
    "unchanged": "Nothing to do: it was already so.",
}
"""The notices an action's redirect may name (``?done=``): fixed texts, never a value."""


def create_app(
    store: ScheduleStore, *, allow_actions: bool = False, token: str | None = None
) -> Starlette:
    """The console over ``store`` as an ASGI application (mountable; links follow the
    mount's path). ``allow_actions`` serves the actions (POST, CSRF-checked; needs a
    writable store); ``token``, if given, must come with every request. The store is
    never closed.

    .. versionadded:: 0.2.0
    """
    if allow_actions and store.readonly:
        raise InvalidConfiguration("allow_actions=True needs a store opened for writing")
    if token is not None and (not isinstance(token, str) or not token):
        raise InvalidConfiguration("token must be a non-empty text (or None)")
    console = _Console(store, allow_actions)
    routes = [
        Route("/", console.page("overview.html", views.overview_page)),
        Route("/schedules", console.page("schedules.html", views.schedules_page)),
        Route("/schedules/{sid}", console.page("schedule.html", views.schedule_page)),
        Route("/dead-letters", console.page("dead_letters.html", views.dead_letters_page)),
        Route("/timeline", console.page("timeline.html", views.timeline_page)),
        Route("/schedules/{sid}/{action}", console.act, methods=["POST"]),
        Route("/dead-letters/replay-all", console.replay_all, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(_headers)
    if token is not None:
        app.add_middleware(_token_gate, token=token)
    return app


class _Console:
    """The pages and actions over one store."""

    def __init__(self, store: ScheduleStore, allow_actions: bool) -> None:
        self.store = store
        self.control = SchedulerControl(store)
        self.allow_actions = allow_actions
        self.csrf = secrets.token_urlsafe(32)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["shown"] = views.shown

    # -- pages ----------------------------------------------------------------------

    def page(self, name: str, view: views.View) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint rendering template ``name`` over ``view``'s context from the store
        and the request's parameters (only its live part for a fragment request), the
        store read in a worker thread."""

        async def endpoint(request: Request) -> Response:
            params = {**request.query_params, **request.path_params}
            try:
                context = await run_in_threadpool(view, self.store, params)
            except (InvalidArgument, ScheduleNotFound, ValueError) as exc:
                return self._problem(request, 404 if isinstance(exc, LookupError) else 400, exc)
            except SchedulerError as exc:
                return self._problem(request, 500, exc)
            fragment = request.headers.get("x-hexeract-fragment") == "1"
            return HTMLResponse(self._render(request, name, context, fragment=fragment))

        return endpoint

    def _render(
        self, request: Request, name: str, context: dict[str, Any], *, fragment: bool = False
    ) -> str:
        template = self.env.get_template(name)
        done = request.query_params.get("done", "")
        full = {
            "base": _base(request),
            "csrf": self.csrf,
            "actions": self.allow_actions,
            "refresh": REFRESH_SECONDS,
            "notice": _DONE.get(done),
            "path": request.url.path,
            **context,
        }
        if fragment and "live" in template.blocks:
            return "".join(template.blocks["live"](template.new_context(full)))
        return template.render(full)

    def _problem(self, request: Request, status: int, exc: Exception) -> Response:
        message = scrub(str(exc), None)
        body = self._render(request, "problem.html", {"status": status, "message": message})
        return HTMLResponse(body, status_code=status)

    # -- actions --------------------------------------------------------------------

    async def _post(
        self, request: Request, work: Callable[[dict[str, str]], str | Response]
    ) -> Response:
        """A POST: refused (actions off, another origin, a wrong CSRF token), or
        ``work(form)`` in a worker thread, then a redirect to the page it names."""
        if not self.allow_actions:
            return PlainTextResponse("actions are off (start with --allow-actions)", 403)
        origin = request.headers.get("origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != request.url.netloc:
            return PlainTextResponse("refused: the request came from another origin", 403)
        body = (await request.body()).decode("utf-8", "replace")
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            return PlainTextResponse("refused: missing or wrong CSRF token", 403)
        try:
            where = await run_in_threadpool(work, form)
        except (SchedulerError, ValueError) as exc:  # 409: refused (not changeable, ...)
            return self._problem(request, _status_of(exc), exc)
        if isinstance(where, Response):
            return where
        return RedirectResponse(_base(request) + where, 303)

    async def act(self, request: Request) -> Response:
        """``POST /schedules/{id}/{action}``: the action through SchedulerControl,
        then back to the schedule's page with a notice."""
        action = request.path_params["action"]

        def work(form: dict[str, str]) -> str | Response:
            if action not in _ACTIONS:
                return PlainTextResponse(f"unknown action {action!r}", 404)
            sid = views.schedule_uuid(request.path_params["sid"])
            changed = self._do(action, sid, form)
            return f"/schedules/{sid}?done={action if changed else 'unchanged'}"

        return await self._post(request, work)

    def _do(self, action: str, sid: uuid.UUID, form: dict[str, str]) -> bool:
        c = self.control
        if action == "replay":
            c.replay(sid)
            return True
        if action == "reschedule":
            return c.reschedule(sid, _instant(form.get("at", "")))
        do = {"pause": c.pause, "resume": c.resume, "cancel": c.cancel, "run-now": c.run_now}
        return do[action](sid)

    async def replay_all(self, request: Request) -> Response:
        """``POST /dead-letters/replay-all``: every dead letter replayed, in batches."""
        return await self._post(
            request, lambda _: f"/dead-letters?replayed={replay_all(self.store)}"
        )


def _base(request: Request) -> str:  # the mount's path, which every link starts with
    return str(request.scope.get("root_path", "")).rstrip("/")


def _instant(text: str) -> datetime:
    """An ISO 8601 instant with its offset (``Z`` or ``+01:00``)."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArgument(f"not an instant: {text!r:.80}") from None
    if at.tzinfo is None:
        raise InvalidArgument(f"the instant {text!r:.80} has no offset (add Z or +01:00)")
    return at


def _headers(app: ASGIApp) -> ASGIApp:
    """``app`` adding the Content Security Policy, ``nosniff``, ``same-origin`` referrers
    and the ``Server-Timing`` of the request to every response."""

    async def with_headers(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.perf_counter()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - started) * 1000
                message["headers"] = [
                    *message.get("headers", []),
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                    (b"server-timing", f"app;dur={ms:.1f}".encode()),
                ]
            await send(message)

        await app(scope, receive, sending)

    return with_headers


def _token_gate(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` behind ``token``: only requests carrying it (``Authorization: Bearer`` or
    the :data:`TOKEN_COOKIE`, which a ``?token=`` visit sets) get through; others get 401."""

    async def gated(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            rest = urllib.parse.urlencode(
                [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            )
            path = "/" + request.url.path.lstrip("/")  # never //host: no redirect off-site
            target = path + ("?" + rest if rest else "")
            response: Response = RedirectResponse(target, 303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        bearer = request.headers.get("authorization", "")
        carried = bearer[7:] if bearer.lower().startswith("bearer ") else ""
        carried = carried or request.cookies.get(TOKEN_COOKIE, "")
        if carried and hmac.compare_digest(carried.encode(), token.encode()):
            await app(scope, receive, send)
            return
        await PlainTextResponse(
            "this console needs its access token: open it once with ?token=<token>,"
            " or send Authorization: Bearer <token>",
            401,
        )(scope, receive, send)

    return gated


def _status_of(exc: Exception) -> int:
    """An action's error status: 404 no such schedule, 400 a bad value (an id, an
    instant), else 409 refused."""
    if isinstance(exc, LookupError):
        return 404
    bad_value = isinstance(exc, InvalidArgument) or not isinstance(exc, SchedulerError)
    return 400 if bad_value else 409
