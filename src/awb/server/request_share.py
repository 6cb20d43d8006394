"""One remote client's share of the requests the server has in flight, and so of its connections.

Every HTTP/1.1 connection carries one request at a time, and the connection cap (`awb.server.http_limits`)
makes room only by closing connections whose request has not all arrived: a connection being served is
never closed. A client on another machine with the token could hold every connection with requests that
take long to answer (agent runs of up to 300 s, tool calls where the slots have no per-client share), and
every other client's new connection was closed unanswered. `RequestShare` lets one remote client (its
address: `awb.shares`) have at most three quarters of `http.max_connections` requests in flight; past them
a request is answered 429 at once. Clients on this machine are not counted.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from awb.server.raw_reply import send_json
from awb.shares import Shares, client_address, default_share, share_key

RETRY_AFTER_SECONDS = 5


class RequestShare:
    """ASGI middleware: at most `share` requests in flight from one remote client (no cap for the others:
    the connection cap holds them)."""

    def __init__(self, app: ASGIApp, max_connections: int) -> None:
        self.app = app
        # No cap of its own: with a request per connection, the connection cap is the cap.
        self.requests = Shares(None, share=default_share(max_connections))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = share_key(client_address(scope), None) if scope["type"] == "http" else None
        if client is None:
            await self.app(scope, receive, send)
            return
        if self.requests.take(client) is not None:
            await _refuse(send, self.requests.share)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.requests.give_back(client)


async def _refuse(send: Send, share: int) -> None:
    message = (
        f"this client has {share} requests in flight, its share of the server's connections "
        "(three quarters of http.max_connections); send more once one is answered"
    )
    details = {"scope": "client", "per_client": share}
    answer = {"error": {"code": "busy", "message": message, "details": details}}
    await send_json(send, 429, answer, [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])


__all__ = ["RequestShare"]
