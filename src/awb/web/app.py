"""The Active Tools panel: server-rendered pages (Jinja2, a little vanilla JS, no build step, no CDN) over
one workbench, served by `awb start --transport http` at `/` beside `/mcp` and `/api`.

Reads run in a worker thread (search may embed, highlighting and diffs take CPU); changes (equip, delete,
rollback, apply) run on the event loop like the MCP face's, since the workbench's event listeners expect it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from awb import __version__
from awb.errors import AwbError, InvalidParams
from awb.feed import EventFeed, open_feed
from awb.inventory.models import MEMORY_LEVELS
from awb.meta_tools import MetaVerb, meta_tool_name, worded_by
from awb.safe_text import visible, visible_json
from awb.shares import Shares, client_address, share_key
from awb.sign_outs import SCOPE_KEY as SIGN_OUTS_KEY
from awb.sign_outs import SignOuts
from awb.web import forms, security, stream, views
from awb.web.code_view import code_css
from awb.web.forms import Handler
from awb.web.numbers import whole_number
from awb.web.runs import run_logs
from awb.web.sign_in import SignIn
from awb.web.staged import StagedWrites
from awb.workbench import Workbench

HERE = Path(__file__).parent
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
        self.staged = StagedWrites(workbench, self._render)
        self.sign_in = SignIn(self.config, self._render, self._sign_outs)
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
            *self.staged.routes(page, change),
            Route("/runs", page(self.runs_page)),
            Route("/runs/{session_id}", page(self.run_page)),
            Route("/events", self._guarded(self.events), methods=["GET"]),
            *self.sign_in.routes(change),
            Route("/static/code.css", self._code_css, methods=["GET"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]

    def _render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        token = security.configured_token(self.config)
        context.update(
            signed_in=security.signed_in(request, token, self._sign_outs(request)),
            token_required=token is not None,
            notice=forms.notice(request),
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
                f"there is no version {forms.quoted(raw)}: versions are numbered 1, 2, 3, …", field="version"
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
        return forms.back("/", "deleted", tool.name)

    async def equip(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.equip, request.path_params["ref"], names=self.meta_names)
        return forms.back(await forms.return_to(request), "equipped", tool.name)

    async def unequip(self, request: Request) -> Response:
        tool = await self.workbench.lane.call(self.workbench.unequip, request.path_params["ref"])
        return forms.back(await forms.return_to(request), "unequipped", tool.name)

    async def rollback(self, request: Request) -> Response:
        form = await forms.read_form(request)
        version = whole_number(form.get("version"))
        if version is None:
            raise InvalidParams("choose a version to roll back to", field="version")
        tool = await self.workbench.lane.call(self.workbench.rollback, request.path_params["ref"], version)
        return forms.back(f"/tools/{quote(tool.tool_id)}", "rolled_back", f"{tool.name} v{tool.version}")

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


def create_panel(workbench: Workbench, *, feed: EventFeed | None = None) -> Panel:
    """The web panel for `workbench`; mount it as `HttpApp`'s fallback and `close()` it when the server stops."""
    return Panel(workbench, feed=feed)
