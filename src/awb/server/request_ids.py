"""A handshake-era HTTP request whose id MCP does not take (1.5, true, null, an object) is answered -32600.

MCP ids are strings or integers. The SDK's message model reads `{"id": 1.5, "method": "ping"}` as a
notification (it drops the id), and its handshake-era streamable HTTP answers a notification with an
empty 202: the client waits for ever for a response. stdio answers such a request with JSON-RPC's
Invalid Request (`awb.server.stdio`), as the SDK does on the 2026-07-28 path; `RequestIdCheck` answers
it so on this path too (HTTP 400, `id: null`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pydantic_core
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from awb.server.hangup import single_exchange
from awb.text import cap_text

log = logging.getLogger("awb.server")

#: JSON-RPC 2.0's code for valid JSON that is not a valid request.
INVALID_REQUEST = -32600


def bad_id_message(method: object) -> str:
    """What the error says (in the words stdio's says it)."""
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
    """ASGI middleware around the MCP app: a handshake-era POST the SDK answers 202 (it took the message
    for a notification or a response) is answered -32600 instead when the message is a request with an id
    of the wrong type.

    Only a 202's body is parsed (the SDK parses every body itself: parsing each twice would cost a
    request ~1-15 ms a megabyte). The SDK still hands such a message to the session as the notification
    it took it for, before or after this answer, as it did before: a request's method has no
    notification handler there, and the session drops it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or single_exchange(scope):
            await self.app(scope, receive, send)
            return
        # The body is read here, whole, and handed on as one message: the SDK reads it whole anyway
        # (one chunk: starlette joins nothing), and it is at hand if the SDK answers 202.
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left while sending: the app hears it
                await self.app(scope, _replay(message, receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        del chunks
        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            if answered:
                return  # the rest of the SDK's empty 202
            if message["type"] == "http.response.start" and message["status"] == 202:
                method = bad_id_method(body)
                if method is not None:
                    answered = True
                    log.warning("answered a request whose id is neither a string nor an integer")
                    await _invalid_request(send, bad_id_message(method))
                    return
            await send(message)

        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay(whole, receive), sending)


def _replay(first: Message, receive: Receive) -> Receive:
    """`receive` with `first` given before anything it has."""
    pending: list[Message] = [first]

    async def receiving() -> Message:
        return pending.pop() if pending else await receive()

    return receiving


async def _invalid_request(send: Send, message: str) -> None:
    answer: dict[str, Any] = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["RequestIdCheck", "bad_id_message", "bad_id_method"]
