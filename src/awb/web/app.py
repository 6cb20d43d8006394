"""The Active Tools panel: server-rendered pages (Jinja2, a little vanilla JS, no build step, no CDN) over
one workbench, served by `awb start --transport http` at `/` beside `/mcp` and `/api`.

Reads run in a worker thread (search may embed, highlighting and diffs take CPU); changes (equip, delete,
rollback, apply) run on the event loop like the MCP face's, since the workbench's event listeners expect it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from awb import __version__, panel_access, sign_in_limit
from awb.errors import AwbError, InvalidParams
from awb.feed import EventFeed, open_feed
from awb.inventory.models import MEMORY_LEVELS
from awb.meta_tools import MetaVerb, meta_tool_name, worded_by
from awb.safe_text import visible, visible_json
from awb.sandbox import staging
from awb.shares import Shares, client_address, share_key
from awb.sign_outs import SCOPE_KEY as SIGN_OUTS_KEY
from awb.sign_outs import SignOuts
from awb.text import cap_text
from awb.web import security, stream, views
from awb.web.code_view import code_css
from awb.web.numbers import whole_number
from awb.web.runs import run_logs
from awb.workbench import Workbench

HERE = Path(__file__).parent
#: Largest form body the panel reads; its forms carry a version number or a token.
MAX_FORM_BYTES = 16 * 1024

Handler = Callable[[Request], Awaitable[Response]]
#: The panel's own control for each meta-tool's action it has: what its error pages tell a person to use.
#: The others (craft, call, update) are named as an MCP client reaches them (`meta_tools.worded_by`).
PANEL_CONTROLS: dict[MetaVerb, str] = {
    "list": "the Active Tools page",
    "search": "the Active Tools page's Search box",
    "inspect": "the tool's page",
    "equip": "the Equip button",
    "unequip": "the Unequip button",
    "delete": "the Delete button",
    "rollback": "a version's Roll back button on the tool's page",
}

#: The panel's pages load only their own script and style sheets and post only to themselves; nothing
#: inline runs, so text a tool wrote that ever slipped past escaping could not run either, nor could
#: another site frame a page to borrow its buttons.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_PANEL_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
)


class Panel:
    """The panel's ASGI app and what it holds open (the feed's and the run logs' connections)."""

    def __init__(self, workbench: Workbench, *, feed: EventFeed | None = None) -> None:
        self.workbench = workbench
        self.config = workbench.config
        self.feed = feed or open_feed(workbench.store, workbench.events)
        self.runs = run_logs(workbench)
        # One remote client (an address: `awb.shares`) holds at most three quarters of the event streams,
        # or an agent that has the token could take them all and lock the operator's panel out.
        self.streams = Shares(stream.MAX_STREAMS)
        # Used when the panel is served without the server's guard, which hands `/login` its own limiter.
        self.sign_in_limit = sign_in_limit.limit_for(self.config)
        # Passes signed out, when served without the guard; behind it, the guard's (it refuses them first).
        self.sign_outs = SignOuts()
        self.meta_names = worded_by(PANEL_CONTROLS, self.config.tool_names)
        env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
        env.globals.update(
            version=__version__,
            tiers=views.TIER_LABELS,
            runtimes=views.RUNTIME_LABELS,
            craft_tool=meta_tool_name("craft", self.config.tool_names),
        )
        # Text tools wrote (paths, names, descriptions, messages) goes through `|visible` where it is shown.
        env.filters["visible"] = visible
        env.filters["visible_json"] = visible_json
        self.templates = Jinja2Templates(env=env)
        # Routing's own refusals are pages like every other refusal, not a bare "Not Found" in plain text.
        self.app = Starlette(routes=self._routes(), exception_handlers=dict.fromkeys((404, 405), self._routing_error))

    def close(self) -> None:
        self.feed.close()
        if self.runs is not None:
            self.runs.close()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            # Set here, not only by the server's guard: the panel may be served without one.
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                headers += [header for header in _PANEL_HEADERS if header[0] not in names]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)

    # --- plumbing -------------------------------------------------------------------------------------

    def _routes(self) -> list[Route | Mount]:
        page, change = self._page, self._change
        return [
            Route("/", page(self.tools_page)),
            Route("/tools/{ref}", page(self.tool_page)),
            Route("/tools/{ref}/delete", page(self.confirm_delete)),
            Route("/tools/{ref}/delete", change(self.delete), methods=["POST"]),
            Route("/tools/{ref}/equip", change(self.equip), methods=["POST"]),
            Route("/tools/{ref}/unequip", change(self.unequip), methods=["POST"]),
            Route("/tools/{ref}/rollback", change(self.rollback), methods=["POST"]),
            Route("/staged", page(self.staged_page)),
            Route("/staged/{staged_id}", page(self.staged_write_page)),
            Route("/staged/{staged_id}/apply", change(self.apply), methods=["POST"]),
            Route("/staged/{staged_id}/discard", change(self.discard), methods=["POST"]),
            Route("/runs", page(self.runs_page)),
            Route("/runs/{session_id}", page(self.run_page)),
            Route("/events", self._guarded(self.events), methods=["GET"]),
            Route("/login", self._login_page, methods=["GET"]),
            Route("/login", self._login, methods=["POST"]),
            Route("/logout", change(self.sign_out), methods=["POST"]),
            Route("/static/code.css", self._code_css, methods=["GET"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]

    def _render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        token = security.configured_token(self.config)
        context.update(
            signed_in=security.signed_in(request, token, self._sign_outs(request)),
            token_required=token is not None,
            notice=_notice(request),
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status)

    def _refusal(self, request: Request, refused: security.Refused) -> Response:
        return self._render(request, "error.html", refused.status, code=refused.code, message=refused.message)

    async def _routing_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            code, message = "method_not_allowed", f"this page takes {allowed or 'other methods'}, not {request.method}"
        else:
            code, message = "not_found", "there is no page at this address"
        page = self._render(request, "error.html", exc.status_code, code=code, message=message)
        page.headers.update(exc.headers or {})
        return page

    def _guarded(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            if not security.host_allowed(request.headers.get("host", ""), self.config):
                return PlainTextResponse("this Host is not served here", status_code=421)
            token = security.configured_token(self.config)
            if not security.signed_in(request, token, self._sign_outs(request)):
                return RedirectResponse(security.sign_in_location(request), status_code=303)
            try:
                return await handler(request)
            except security.Refused as refused:
                return self._refusal(request, refused)
            except AwbError as exc:
                status = exc.http_status if 400 <= exc.http_status < 600 else 500
                return self._render(request, "error.html", status, code=exc.code, message=exc.message)

        return guarded

    def _sign_outs(self, request: Request) -> SignOuts:
        sign_outs: SignOuts = request.scope.get(SIGN_OUTS_KEY, self.sign_outs)
        return sign_outs

    def _page(self, handler: Handler) -> Handler:
        return self._guarded(handler)

    def _change(self, handler: Handler) -> Handler:
        async def change(request: Request) -> Response:
            security.check_same_origin(request)
            return await handler(request)

        return self._guarded(change)

    async def _code_css(self, request: Request) -> Response:
        return Response(code_css(), media_type="text/css")

    # --- Active Tools ---------------------------------------------------------------------------------

    async def tools_page(self, request: Request) -> Response:
        query = views.ListQuery.parse(request.query_params)
        listing = await self.workbench.lane.work(views.tool_list, self.workbench, query)
        return self._render(
            request, "tools.html", listing=listing, sorts=views.SORTS, levels=MEMORY_LEVELS, view="tools"
        )

    async def tool_page(self, request: Request) -> Response:
        raw = request.query_params.get("version", "")
        version = whole_number(raw)
        if raw and version is None:
            raise InvalidParams(
                f"there is no version {_quoted(raw)}: versions are numbered 1, 2, 3, …", field="version"
            )
        try:
            found = await self.workbench.lane.work(
                views.inspection, self.workbench, request.path_params["ref"], version
            )
        except views.NoSuchVersion as missing:
            raise security.Refused(404, "version_not_found", str(missing)) from None
        return self._render(request, "tool.html", t=found, view="tools")

    async def confirm_delete(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.resolve, request.path_params["ref"])
        return self._render(request, "confirm_delete.html", tool=tool, view="tools")

    async def delete(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.delete, request.path_params["ref"])
        return _back("/", "deleted", tool.name)

    async def equip(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.equip, request.path_params["ref"], names=self.meta_names)
        return _back(await _return_to(request), "equipped", tool.name)

    async def unequip(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.unequip, request.path_params["ref"])
        return _back(await _return_to(request), "unequipped", tool.name)

    async def rollback(self, request: Request) -> Response:
        form = await _form(request)
        version = whole_number(form.get("version"))
        if version is None:
            raise InvalidParams("choose a version to roll back to", field="version")
        tool = await self.workbench.lane.call(self.workbench.rollback, request.path_params["ref"], version)
        return _back(f"/tools/{quote(tool.tool_id)}", "rolled_back", f"{tool.name} v{tool.version}")

    # --- staged writes --------------------------------------------------------------------------------

    async def staged_page(self, request: Request) -> Response:
        status = request.query_params.get("status", staging.PENDING)
        if status not in (staging.PENDING, staging.APPLIED, staging.DISCARDED, "all"):
            status = staging.PENDING
        after = whole_number(request.query_params.get("after"))
        before = None if after is not None else whole_number(request.query_params.get("before"))
        found = await self.workbench.lane.work(
            views.staged_views, self.workbench, None if status == "all" else status, after=after, before=before
        )
        return self._render(
            request,
            "staged.html",
            writes=found.views,
            page=found,
            paged=after is not None or before is not None,
            shown_status=status,
            view="staged",
        )

    async def staged_write_page(self, request: Request) -> Response:
        found = await self.workbench.lane.work(views.staged_view, self.workbench, _staged_id(request))
        return self._render(request, "staged_write.html", w=found, view="staged")

    async def apply(self, request: Request) -> Response:
        store: Any = self.workbench.store
        config = self.workbench.config
        # The same checks as `awb staged apply`: the configuration's grants as they are now, and every
        # file the configuration says is awb's (without the list, only .awb/ and awb.config.json were).
        apply = partial(staging.apply_staged, grants=config.sandbox.grants, protected=staging.protected_paths(config))
        write = await self.workbench.lane.work(apply, store, _staged_id(request))
        return _back("/staged", "applied", write.path)

    async def discard(self, request: Request) -> Response:
        store: Any = self.workbench.store
        write = await self.workbench.lane.work(staging.discard_staged, store, _staged_id(request))
        return _back("/staged", "discarded", write.path)

    # --- agent runs -----------------------------------------------------------------------------------

    async def runs_page(self, request: Request) -> Response:
        sessions = await self.workbench.lane.work(self.runs.sessions) if self.runs else []
        return self._render(request, "runs.html", sessions=sessions, available=self.runs is not None, view="runs")

    async def run_page(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        entries = await self.workbench.lane.work(self.runs.logs, session_id) if self.runs else []
        return self._render(request, "run.html", session_id=session_id, entries=entries, view="runs")

    # --- the creation moment --------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        if request.method == "HEAD":
            # Headers only, at once: streamed, a HEAD ran unseen for STREAM_SECONDS, holding a stream and
            # keeping the client's next request on that connection waiting behind it.
            return Response(media_type="text/event-stream", headers=stream.HEADERS)
        cursor = stream.start_cursor(request, self.feed)
        client = share_key(client_address(request.scope), None)
        refused = self.streams.take(client)
        if refused is not None:
            return PlainTextResponse(
                stream.refusal(self.streams, refused), status_code=503, headers=stream.RETRY_HEADERS
            )

        # The stream lasts no longer than the sign-in it was let in with: Sign out, or the pass's expiry,
        # ends it (a bearer token is good for as long as the server runs).
        token = security.configured_token(self.config)
        sign_outs = self._sign_outs(request)
        sign_in = sign_outs.watch(None if security.bearer(request) else security.good_pass(request, token))

        def release() -> None:
            sign_outs.forget(sign_in)
            self.streams.give_back(client)

        return stream.HeldStream(
            stream.event_stream(request, self.feed, cursor, sign_in),
            release=release,
            media_type="text/event-stream",
            headers=stream.HEADERS,
        )

    # --- signing in (only when an API token is configured) ----------------------------------------------

    async def _login_page(self, request: Request) -> Response:
        return self._render(request, "login.html", next=_safe_next(request.query_params.get("next", "/")))

    async def _login(self, request: Request) -> Response:
        # Open to anyone (no `_guarded` around it): every refusal is answered here, never raised as a 500.
        try:
            security.check_same_origin(request)
            form = await _form(request)
        except security.Refused as refused:
            return self._refusal(request, refused)
        expected = security.configured_token(self.config)
        target = _safe_next(form.get("next", "/"))
        if expected is None:
            return RedirectResponse(target, status_code=303)
        presented = form.get("token", "")
        if not presented:
            return self._render(request, "login.html", 401, next=target, failed=True)
        # The guard's limiter when behind it, so a guess here and a guess at /api count alike.
        limit: sign_in_limit.SignInLimit = request.scope.get(sign_in_limit.SCOPE_KEY, self.sign_in_limit)
        address = client_address(request.scope)
        wait = limit.retry_after(address)
        if wait:
            message = sign_in_limit.too_many_failures_message(wait)
            page = self._render(request, "login.html", 429, next=target, locked=message)
            page.headers["Retry-After"] = str(wait)
            return page
        if not security.token_ok(expected, presented):
            limit.failed(address)
            return self._render(request, "login.html", 401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        # A pass, not the token: every server on this host name, whatever its port, is sent the cookie.
        # Its name is this server's own, so it leaves other servers' passes alone.
        response.set_cookie(
            panel_access.pass_cookie(request.scope),
            panel_access.issue_pass(expected),
            max_age=panel_access.PASS_SECONDS,
            httponly=True,
            samesite="strict",
            path="/",
            # Signed in over https (through a TLS proxy in `http.trusted_proxies`, the only way this
            # server hears of https): the browser must never send the pass over plain http.
            secure=request.url.scheme == "https",
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        """End this browser's sign-in (a change, so from the panel's own pages only): the server refuses its
        pass from now on, ends the event streams it opened, and the browser is told to drop it."""
        presented = security.good_pass(request, security.configured_token(self.config))
        if presented is not None:
            await self._sign_outs(request).sign_out(presented)
        response = _back(panel_access.PANEL_LOGIN, "signed_out", "")
        response.delete_cookie(
            panel_access.pass_cookie(request.scope),
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response


#: Notices a change leaves for the page it returns to: `?done=<key>&what=<name>`.
NOTICES = {
    "signed_out": "Signed out.",
    "deleted": "Deleted {}.",
    "equipped": "Equipped {}.",
    "unequipped": "Unequipped {}.",
    "rolled_back": "Rolled back: {} is current.",
    "applied": "Applied: wrote {}.",
    "discarded": "Discarded the staged write to {}.",
}


def _notice(request: Request) -> str | None:
    template = NOTICES.get(request.query_params.get("done", ""))
    # `what` is a path or a name a tool chose, and anyone can link here with one: shown escaped.
    return template.format(visible(request.query_params.get("what", "")[:300])) if template else None


def _back(path: str, done: str, what: str) -> RedirectResponse:
    separator = "&" if "?" in path else "?"
    return RedirectResponse(f"{path}{separator}done={done}&what={quote(what)}", status_code=303)


def _safe_next(target: str) -> str:
    """Only a path on this server: never `//host` or a full URL (no open redirect)."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def _quoted(raw: str) -> str:
    # What a person typed, short enough for an error page (it may be thousands of digits).
    return repr(cap_text(raw, 40))


def _staged_id(request: Request) -> int:
    raw = request.path_params["staged_id"]
    staged_id = whole_number(raw)
    if staged_id is None:
        # The same answer as for a number that names no write: there is no staged write by that id.
        raise InvalidParams(f"no staged write with id {_quoted(raw)}", field="id")
    return staged_id


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise security.Refused(413, "limit_exceeded", f"the form is over {MAX_FORM_BYTES} bytes")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[0] for key, values in fields.items()}


async def _return_to(request: Request) -> str:
    form = await _form(request)
    return _safe_next(form.get("return_to", "/"))


def create_panel(workbench: Workbench, *, feed: EventFeed | None = None) -> Panel:
    """The web panel for `workbench`; mount it as `HttpApp`'s fallback and `close()` it when the server stops."""
    return Panel(workbench, feed=feed)
