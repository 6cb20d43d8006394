"""Who an MCP request comes from, for each client's share of the execution slots
(`sandbox.max_concurrent_per_client`, enforced by `awb.sandbox.base.ExecutionSlots`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


def client_of(ctx: Any) -> Hashable | None:
    """The client behind a request (`ctx`: the SDK's `ServerRequestContext`), or None for no one in
    particular, who is held only by the server-wide cap.

    Over HTTP with a session (handshake-era streamable HTTP), the session: its id is the server's own,
    checked by the SDK before the request got here. With none (2026-07-28 requests), the address the
    request comes from and the client name and version it gives (`clientInfo`): the protocol has
    nothing else to tell clients apart by. A request with neither (`stateless_http` after the
    initialize, a 2026-07-28 client that gives no name) is no one in particular: taking every such
    client behind one address (a load balancer's) for a single client would hold them all to one share.
    None on stdio and in memory too, where the one client has no one to share with.
    """
    request = ctx.request  # the HTTP request (starlette's), None on the other transports
    if request is None:
        return None
    # The SDK keeps the session's connection on the request's session object, not as public API.
    session_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
    if session_id is not None:
        return ("session", session_id)
    params = ctx.session.client_params
    if params is None:
        return None
    address = request.client
    info = params.client_info
    return ("client", None if address is None else address.host, info.name, info.version)


__all__ = ["client_of"]
