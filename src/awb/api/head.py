"""HEAD on the REST API: answered as GET is, headers only.

A server that takes GET takes HEAD (RFC 9110), and monitors and proxies check a URL with it; FastAPI's
routes take only the methods they name, so HEAD of every GET endpoint was a 405.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """ASGI middleware: a HEAD request goes to the app as a GET, and its response goes out without a body
    (the headers, Content-Length included, are the GET's)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
