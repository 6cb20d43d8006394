"""A JSON answer sent straight on an ASGI channel, for the middleware that answers before any app does
(the HTTP guard, the shares, the request-id check, the faces that did not start)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import Send


async def send_json(send: Send, status: int, payload: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """`payload` as the whole JSON body of a `status` response, with `headers` beside its length and type."""
    body = json.dumps(payload).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


__all__ = ["send_json"]
