"""The connections of the Agno target: its MCP arms as fastmcp clients over awb's own capped transports, and
its head's HTTP client, whose replies are capped as the awb runtime's provider replies are.

Agno connects `MCPTools` through fastmcp's transports, which read what a server sends without a cap: an HTTP
reply whole, a stdio line whole. `ArmTools` connects through these instead, so an Agno run holds no more of
a server's message than an awb run does (`awb.agents.mcp_http`, `awb.agents.mcp_stdio`): a reply over the
cap fails its call, and Agno reports that call's error to the model.

Importing this module imports fastmcp (which the `agno` extra brings).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
from fastmcp.client.transports import ClientTransport, StreamableHttpTransport
from fastmcp.client.transports.base import TransportOptions
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters

from awb.agents.mcp_http import mcp_http_client, reply_cap
from awb.agents.mcp_stdio import capped_stdio_client
from awb.agents.models import http as provider_http


class CappedStdioTransport(ClientTransport):
    """A fastmcp transport that starts its server through `awb.agents.mcp_stdio`; the server lives as long
    as the connection (fastmcp's `keep_alive=False`)."""

    def __init__(self, server: StdioServerParameters) -> None:
        self.server = server

    @asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Any
    ) -> AsyncIterator[ClientSession]:
        options = transport_options or TransportOptions()
        async with (
            capped_stdio_client(self.server) as (read, write),
            options.session_class(read, write, **session_kwargs) as session,
        ):
            yield session

    def __repr__(self) -> str:
        return f"<CappedStdio(command={self.server.command!r})>"


def _capped_http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: Any = None,
    *,
    public_only: bool = False,
    **_: Any,
) -> httpx2.AsyncClient:
    """fastmcp's client factory, answered with awb's: the SDK's timeouts (as awb runs have), no redirects, no
    auth (an arm's credentials are its headers), its replies capped, and with `public_only` dialling public
    addresses only (`awb.agents.public_reach`)."""
    return mcp_http_client(headers, public_only=public_only)


def capped_transport(server: StdioServerParameters | Any, *, public_only: bool = False) -> ClientTransport:
    """The transport of an arm: stdio for `StdioServerParameters`, streamable HTTP for Agno's
    `StreamableHTTPClientParams` (its `url` and `headers`), dialling public addresses only with
    `public_only`."""
    if isinstance(server, StdioServerParameters):
        return CappedStdioTransport(server)
    headers = dict(server.headers or {})
    factory = partial(_capped_http_client, public_only=public_only)
    return StreamableHttpTransport(server.url, headers=headers, httpx_client_factory=factory)


def capped_provider_client() -> httpx2.AsyncClient:
    """The HTTP client an Agno head's provider SDK is given (both SDKs speak httpx2): each reply but an event
    stream read through the awb runtime's cap on a provider's reply
    (`awb.agents.models.http.DEFAULT_MAX_REPLY_BYTES`), asked for uncompressed and a compressed one refused,
    as `awb.agents.mcp_http` does for MCP servers. The SDK passes its own timeout with each request; the run's
    `timeout_seconds` bounds them all."""
    cap = reply_cap(provider_http.DEFAULT_MAX_REPLY_BYTES, party="the model provider")
    return httpx2.AsyncClient(headers={"Accept-Encoding": "identity"}, event_hooks={"response": [cap]})
