"""A cap on the MCP streams a server holds open, so they cannot take every connection.

A notification stream (a handshake-era session's GET stream, a 2026-07-28 `subscriptions/listen`
POST) holds its connection for as long as the client likes. The connection cap (`awb.server.http_limits`)
makes room by closing connections still waiting for their headers, never one being served, so a client
that opened `http.max_connections` streams (one session each, or listen requests) left no connection
for anyone else's requests: every new connection was closed unanswered. `StreamShare` lets streams hold
at most half the connections; a stream past that is refused with a JSON-RPC error (503), and requests
are served as before. A client without its stream still has every meta-tool, and re-lists tools.
A client on another machine holds at most three quarters of them (its address: `awb.shares`), or one
client could take every stream and leave none for anyone else's; clients on this machine are held only
by the cap.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from awb.log_limit import PER_REQUEST
from awb.server.raw_reply import send_json
from awb.shares import Shares, client_address, share_key

log = logging.getLogger("awb.server.http_streams")

_LISTEN = b"subscriptions/listen"
#: JSON-RPC's code for a server-side failure, as the SDK answers a full session table.
_INTERNAL_ERROR = -32603
RETRY_AFTER_SECONDS = 30


def stream_limit(max_connections: int) -> int:
    """How many notification streams may be open at once: half the connections, so requests keep the rest."""
    return max(1, max_connections // 2)


def is_stream(scope: Scope) -> bool:
    """A request whose answer is a stream held open: any GET to the MCP endpoint (a session's standalone
    stream; the SDK answers the others at once), or a POST of `subscriptions/listen`, which the SDK
    serves only when its `Mcp-Method` header names that method."""
    if scope["method"] == "GET":
        return True
    if scope["method"] != "POST":
        return False
    return any(name == b"mcp-method" and value.strip() == _LISTEN for name, value in scope["headers"])


class StreamShare:
    """ASGI middleware around the MCP app: at most `limit` notification streams open at once, and at most
    three quarters of them for one remote client."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.streams = Shares(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_stream(scope):
            await self.app(scope, receive, send)
            return
        client = share_key(client_address(scope), None)
        refused = self.streams.take(client)
        if refused is not None:
            log.warning(
                "refused a notification stream: %d are open, %d of them this client's (the cap is half of "
                "http.max_connections, one remote client's share three quarters of that)",
                self.streams.open,
                self.streams.held_by(client),
                extra=PER_REQUEST,
            )
            await _refuse(send, self.streams, refused)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.streams.give_back(client)


async def _refuse(send: Send, streams: Shares, scope: str) -> None:
    if scope == "client":
        message = (
            f"this client has {streams.share} notification streams open, its share of the {streams.limit} "
            "this server holds (half of http.max_connections); requests are still served: call tools and "
            "list them again instead of listening, or close a stream"
        )
    else:
        message = (
            f"too many notification streams open ({streams.limit}, half of http.max_connections); requests "
            "are still served: call tools and list them again instead of listening, or open the stream later"
        )
    answer = {"jsonrpc": "2.0", "id": None, "error": {"code": _INTERNAL_ERROR, "message": message}}
    await send_json(send, 503, answer, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])


__all__ = ["StreamShare", "is_stream", "stream_limit"]
