"""A handshake-era HTTP request whose id MCP does not take (1.5, true, null, an object) is answered -32600.

MCP ids are strings or integers. The SDK's message model reads `{"id": 1.5, "method": "ping"}` as a
notification (it drops the id), and its handshake-era streamable HTTP answers a notification with an
empty 202: the client waits for ever for a response. stdio answers such a request with JSON-RPC's
Invalid Request (`awb.server.stdio`), as the SDK does on the 2026-07-28 path; `RequestIdCheck` answers
it so on this path too (HTTP 400, `id: null`).
"""

from __future__ import annotations

import logging
from typing import Any

import pydantic_core
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from awb.log_limit import PER_REQUEST
from awb.server.hangup import single_exchange
from awb.server.raw_reply import send_json
from awb.text import cap_text

log = logging.getLogger("awb.server")

#: JSON-RPC 2.0's code for valid JSON that is not a valid request.
INVALID_REQUEST = -32600


def bad_id_message(method: object) -> str:
    """What the error says, on stdio and over HTTP alike (the method named, cut to 100 characters)."""
    named = cap_text(repr(method), 100)
    return f"Invalid Request: the id of a {named} request must be a string or an integer"


def bad_id_method(body: bytes) -> object | None:
    """The method of a request in `body` whose id MCP does not take; None for anything else (a valid
    request, a notification, a response, or what the SDK refuses itself: not JSON, not an object)."""
    try:
        message: object = pydantic_core.from_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    request_id = message["id"]
    # As the SDK's model reads them: JSON strings and integers only (not 1.0, not true).
    if isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return None
    method: object = message["method"]
    return method


class RequestIdCheck:
    """ASGI middleware around the MCP app: a handshake-era POST is read whole, and one that holds a request
    with an id of the wrong type is answered -32600 before the SDK sees it; any other is passed on, its
    body as one message (the SDK reads it whole anyway).

    Each body is parsed here as well as by the SDK: ~2.5 us for a small request in all, 0.06-10 ms a
    megabyte (as much as the SDK's own parse, a small part of what it does with a request). A body past
    the SDK's own limit (`max_body`, which it answers 413) is not kept or parsed here."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or single_exchange(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left while sending: the app hears it
                await self.app(scope, _replay(message, receive), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = bool(message.get("more_body", False))
            if size > self.max_body:  # the SDK refuses it as it reads on
                begun: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": more}
                await self.app(scope, _replay(begun, receive), send)
                return
            if not more:
                break
        body = b"".join(chunks)
        del chunks
        method = bad_id_method(body)
        if method is not None:
            log.warning("answered a request whose id is neither a string nor an integer", extra=PER_REQUEST)
            await _invalid_request(send, bad_id_message(method))
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay(whole, receive), send)


def _replay(first: Message, receive: Receive) -> Receive:
    """`receive` with `first` given before anything it has."""
    pending: list[Message] = [first]

    async def receiving() -> Message:
        return pending.pop() if pending else await receive()

    return receiving


async def _invalid_request(send: Send, message: str) -> None:
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    await send_json(send, 400, answer)


__all__ = ["INVALID_REQUEST", "RequestIdCheck", "bad_id_message", "bad_id_method"]
