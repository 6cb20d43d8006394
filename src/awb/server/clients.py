"""Who an MCP request comes from, for each client's share of the execution slots
(`sandbox.max_concurrent_per_client`, enforced by `awb.sandbox.base.ExecutionSlots`)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from awb.shares import share_key


def client_of(ctx: Any) -> Hashable | None:
    """The client behind a request (`ctx`: the SDK's `ServerRequestContext`), or None for no one in
    particular, who is held only by the server-wide cap.

    From another machine, its address (`awb.shares`): the sessions it opens and the names it gives
    share that address's one share, or each would be a share of its own. From this machine, over HTTP
    with a session (handshake-era streamable HTTP), the session: its id is the server's own, checked by
    the SDK before the request got here. With none (2026-07-28 requests), the address and the client name
    and version it gives (`clientInfo`): the protocol has nothing else to tell clients apart by. A local
    request with neither (`stateless_http` after the initialize, a 2026-07-28 client that gives no name) is
    no one in particular: taking every such client behind one local proxy for a single client would hold
    them all to one share. None on stdio and in memory too, where the one client has no one to share with.
    """
    request = ctx.request  # the HTTP request (starlette's), None on the other transports
    if request is None:
        return None
    address = None if request.client is None else request.client.host
    return share_key(address, _local_client(ctx, address))


def _local_client(ctx: Any, address: str | None) -> Hashable | None:
    # The SDK keeps the session's connection on the request's session object, not as public API.
    session_id = getattr(getattr(ctx.session, "_connection", None), "session_id", None)
    if session_id is not None:
        return ("session", session_id)
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return ("client", address, info.name, info.version)


__all__ = ["client_of"]
