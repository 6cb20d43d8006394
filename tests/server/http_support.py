"""An in-process awb HTTP server on 127.0.0.1 for the HTTP tests (the real app, gate and limits)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import uvicorn
from starlette.types import ASGIApp

from awb.config import Config
from awb.server.http_limits import uvicorn_config
from awb.server.mcp import McpFace
from awb.server.mcp_http import http_app
from awb.server.transports import bind
from awb.workbench import Workbench

#: An MCP client's opening request, and the headers every MCP POST carries.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Running:
    url: str
    port: int
    server: uvicorn.Server


@asynccontextmanager
async def serving(workbench: Workbench, config: Config) -> AsyncIterator[Running]:
    """Serve `workbench` over HTTP under `config` on a socket bound before the server starts (so
    clients can connect at once, without waiting for a ready signal)."""
    async with serving_app(lambda config: http_app(McpFace(workbench), config), config) as running:
        yield running


@asynccontextmanager
async def serving_app(app: Callable[[Config], ASGIApp], config: Config) -> AsyncIterator[Running]:
    """Serve the ASGI app `app(config)` makes (given the bound port) as `serving` serves MCP."""
    sock = bind(config.host, 0)  # as `awb start` binds it (Nagle off on every connection)
    port = sock.getsockname()[1]
    config = config.model_copy(update={"port": port})
    server = uvicorn.Server(uvicorn_config(app(config), config, port=port))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        try:
            yield Running(f"http://{config.host}:{port}", port, server)
        finally:
            server.should_exit = True
    sock.close()
