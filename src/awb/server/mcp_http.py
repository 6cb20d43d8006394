"""The MCP face as an ASGI app for streamable HTTP: the SDK's app with the workbench's middleware.

Importing this module imports the MCP SDK's server side (most of what `awb start` loads), which is why
`awb.server.transports` does not: `awb start --transport http` imports it in a worker thread once the
server serves (`awb.server.deferred_faces`).
"""

from __future__ import annotations

from starlette.types import ASGIApp

from awb.config import Config
from awb.server.address import MCP_PATH
from awb.server.hangup import HangUpCancels
from awb.server.http_guard import guard_http, transport_security
from awb.server.http_streams import StreamShare, stream_limit
from awb.server.mcp import McpFace
from awb.server.request_ids import RequestIdCheck
from awb.server.session_room import SessionOpeners, make_room_for_new_sessions


def mcp_app(face: McpFace, config: Config) -> ASGIApp:
    """The MCP face's ASGI app, with the SDK's own DNS-rebinding check set from the same allowlist.
    A request whose client hangs up is let go (`HangUpCancels`); notification streams may hold at most
    half the connections (`StreamShare`); a handshake-era request whose id MCP does not take is answered
    -32600, not 202 (`RequestIdCheck`); at `http.max_sessions`, or at a remote client's share of them, a
    new session ends the stalest idle ones (`make_room_for_new_sessions`, told who opens it by
    `SessionOpeners`).

    Its lifespan runs the SDK's session manager; whoever serves it without that lifespan runs
    `face.server.session_manager.run()` around it instead."""
    settings = transport_security(config)
    app = face.server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=config.host,
        transport_security=settings,
        stateless_http=config.stateless_http,
        json_response=config.http.json_response,
        max_sessions=config.http.max_sessions,
        session_idle_timeout=config.http.session_idle_timeout_seconds,
    )
    make_room_for_new_sessions(face.server.session_manager)
    checked = RequestIdCheck(app, max_body=face.server.session_manager.max_request_body_size)
    return StreamShare(
        SessionOpeners(HangUpCancels(checked, listen=config.http.json_response)),
        stream_limit(config.http.max_connections),
    )


def http_app(face: McpFace, config: Config) -> ASGIApp:
    """The MCP face alone behind the Host/Origin/token gate. `serve_http` serves REST and the panel beside
    it, inside `guard_http` too: faces go inside the guard, never around it."""
    return guard_http(mcp_app(face, config), config)


__all__ = ["http_app", "mcp_app"]
