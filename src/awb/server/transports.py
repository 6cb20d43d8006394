"""Serving the MCP face over stdio or streamable HTTP, with the workbench's life cycle around it."""

from __future__ import annotations

import gc
import logging
import sys

import anyio
import uvicorn

from awb.server.mcp import McpFace
from awb.server.stdio import serve_stdio_streams
from awb.workbench import Workbench

log = logging.getLogger("awb.server")

MCP_PATH = "/mcp"


def _settle() -> None:
    """After start-up: move everything loaded so far out of the collector's sight. A long-lived server
    otherwise re-walks its whole import-time heap (SDK, pydantic schemas) in every full collection."""
    gc.collect()
    gc.freeze()


async def serve_stdio(workbench: Workbench) -> None:
    """Serve one client on stdin/stdout until it disconnects. Nothing else may write to stdout."""
    face = McpFace(workbench)
    await workbench.start(warm_all=True)
    _settle()
    sdk_transport = workbench.config.stdio_transport == "sdk"
    # Requests read before stdin closed are answered; a tool call may take its whole timeout.
    drain_seconds = workbench.config.tool_execution_timeout_ms / 1000 + 5
    streams = serve_stdio_streams(sdk_transport=sdk_transport, drain_seconds=drain_seconds)
    async with workbench, streams as (read_stream, write_stream):
        await face.server.run(read_stream, write_stream, face.initialization_options())


async def serve_http(workbench: Workbench, host: str, port: int) -> None:
    """Serve streamable HTTP at http://host:port/mcp until stopped (SIGINT/SIGTERM)."""
    face = McpFace(workbench)
    app = face.server.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, stateless_http=workbench.config.stateless_http
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    await workbench.start(warm_all=True)
    _settle()
    async with workbench, anyio.create_task_group() as tasks:
        tasks.start_soon(_announce_when_ready, server, f"http://{host}:{port}{MCP_PATH}")
        await server.serve()
        tasks.cancel_scope.cancel()


async def _announce_when_ready(server: uvicorn.Server, url: str) -> None:
    # One line on stderr once the socket is bound: scripts and tests wait for it instead of polling.
    while not server.started:
        await anyio.sleep(0.01)
    log.info("serving MCP on %s", url)
    sys.stderr.write(f"awb: ready on {url}\n")
    sys.stderr.flush()
