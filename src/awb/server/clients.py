"""Who an MCP request comes from, for each client's share of the execution slots
(`sandbox.max_concurrent_per_client`, enforced by `awb.sandbox.base.ExecutionSlots`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


def client_of(ctx: Any) -> Hashable | None:
    """The client behind a request (`ctx`: the SDK's `ServerRequestContext`).

    Over HTTP with a session (handshake-era streamable HTTP), the session: its id is the server's own,
    checked by the SDK before the request got here. With none (2026-07-28 requests, `stateless_http`),
    the address the request comes from and the client name and version it gives (`clientInfo`): the
    protocol has nothing else to tell clients apart by. None on stdio and in memory, where the one
    client has no one to share with.
    """
    request = ctx.request  # the HTTP request (starlette's), None on the other transports
    if request is None:
        return None
    # The SDK keeps the session's connection on the request's session object, not as public API.
    session_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
    if session_id is not None:
        return ("session", session_id)
    address = request.client
    params = ctx.session.client_params
    info = None if params is None else params.client_info
    name = None if info is None else (info.name, info.version)
    return ("client", None if address is None else address.host, name)


__all__ = ["client_of"]
