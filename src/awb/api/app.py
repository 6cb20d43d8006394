"""The REST app (FastAPI, routes under `/api`, OpenAPI at `/api/openapi.json`, its reference at `/api/docs`
with every asset served here) and the one ASGI app that serves it beside MCP.

`HttpApp` dispatches on the path prefix: `/mcp` to the MCP app, `/api` to the REST app, everything else
to `fallback` (the web panel's slot; 404 until there is one). Lifespan events go to the MCP app, whose
session manager must run. Middleware that guards the whole server (auth, Host checks) wraps `HttpApp`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from awb import __version__
from awb.api.errors import BodyLimit, http_error, request_invalid
from awb.api.head import HeadAsGet
from awb.api.routes import agents, blueprints, builder, tools
from awb.api.run_share import RunShare
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.schema import Blueprint
from awb.blueprints.service import BlueprintService
from awb.blueprints.session_tables import open_session_store
from awb.config import Config
from awb.sandbox.base import executing_for
from awb.server.address import MCP_PATH, is_loopback
from awb.shares import client_address, share_key
from awb.workbench import Workbench

if TYPE_CHECKING:
    from awb.agents.mcp_client import ServerTarget

API_PREFIX = "/api"
#: The API reference (Swagger UI), its assets under `/assets`.
DOCS_URL = f"{API_PREFIX}/docs"


def create_api(service: BlueprintService, workbench: Workbench | None = None) -> FastAPI:
    # Swagger UI's assets come from the fastapi-offline wheel, served under /api/docs/assets: FastAPI's own
    # page loads them from a CDN, blank offline and on an air-gapped server.
    app = FastAPIOffline(
        title="Agent Workbench API",
        version=__version__,
        description="Agent blueprints (head, arms, legs, heart, spine): validate, compile, save, run, logs.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=DOCS_URL,
        redoc_url=None,
        static_url=f"{DOCS_URL}/assets",
        swagger_ui_oauth2_redirect_url=f"{DOCS_URL}/oauth2-redirect",
        # No badge from the public validator: the page asks nothing of any other host.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.blueprints = service
    app.state.workbench = workbench
    app.state.runs = RunShare(service.config.blueprints.max_concurrent_runs)
    app.add_exception_handler(RequestValidationError, request_invalid)
    app.add_exception_handler(HTTPException, http_error)
    app.add_middleware(BodyLimit)
    app.add_middleware(HeadAsGet)
    routers = (blueprints, agents, builder) if workbench is None else (blueprints, agents, builder, tools)
    for module in routers:
        app.include_router(module.router)

    def openapi() -> dict[str, Any]:
        # Blueprint bodies are read by hand; their schema joins the document's components here.
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            blueprint = Blueprint.model_json_schema(ref_template="#/components/schemas/{model}")
            components = document.setdefault("components", {}).setdefault("schemas", {})
            components.update(blueprint.pop("$defs", {}))
            components["Blueprint"] = blueprint
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse({"error": {"code": "not_found", "message": "not found", "details": {}}}, status_code=404)
    await response(scope, receive, send)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


class HttpApp:
    """One ASGI app for the HTTP server: MCP, REST and (later) the web panel, each under its own prefix."""

    def __init__(self, mcp: ASGIApp, api: ASGIApp, fallback: ASGIApp = _not_found) -> None:
        self.mcp, self.api, self.fallback = mcp, api, fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.mcp(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if _under(path, MCP_PATH):
            await self.mcp(scope, receive, send)
        elif _under(path, API_PREFIX):
            # A run's `workbench` arm calls tools in process: they count against its caller's share of the
            # execution slots (a remote caller's address), or a client could take every slot through runs.
            client = executing_for.set(share_key(client_address(scope), None))
            try:
                await self.api(scope, receive, send)
            finally:
                executing_for.reset(client)
        else:
            await self.fallback(scope, receive, send)


def runtime_options(config: Config, mcp_server: ServerTarget | None) -> RuntimeOptions:
    """What the server lends blueprints posted to it over HTTP."""
    return RuntimeOptions(
        environ=dict(os.environ),
        tavily_base_url=config.blueprints.tavily_base_url,
        workbench_target=mcp_server,
        allow_mcp_commands=config.blueprints.allow_mcp_commands,
        # Off loopback, or behind a proxy (which serves other machines whatever address the server binds),
        # callers come from elsewhere: they may not reach this machine's network through it, nor this
        # server's own /mcp as a client on this machine (which has no share of its address's: awb.shares).
        allow_private_mcp_urls=config.blueprints.allow_private_mcp_urls
        or (is_loopback(config.host) and not config.http.trusted_proxies),
    )


def http_app(
    workbench: Workbench, mcp_app: ASGIApp, mcp_server: ServerTarget, *, panel: ASGIApp = _not_found
) -> tuple[HttpApp, BlueprintService]:
    """The server's whole HTTP app for `workbench`; `mcp_server` serves blueprints' `workbench` arms in-process,
    `panel` answers every path outside `/mcp` and `/api`.

    The caller closes the returned service (its session store) when the server stops.
    """
    config = workbench.config
    options = runtime_options(config, mcp_server)
    service = BlueprintService(config, open_session_store(config, inventory=workbench.store), options=options)
    return HttpApp(mcp_app, create_api(service, workbench), panel), service
