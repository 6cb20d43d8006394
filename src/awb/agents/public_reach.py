"""An HTTP client that connects only to public addresses, for MCP servers named by whoever may not reach
this machine's own network (a blueprint posted over HTTP to a server bound off loopback).

The check is made where the connection is opened, on the address actually dialled: a name is resolved
once, every address it has must be public, and the connection goes to the address that was checked (TLS
still verifies the name). So a redirect to an internal address, or a name that resolves to a public
address for the check and an internal one for the connection (DNS rebinding), is refused too.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2
import httpx2

from awb.agents.addresses import is_public

#: Why a connection was refused; part of the error the caller sees.
NOT_PUBLIC = "is not a public address (blueprints.allow_private_mcp_urls is off)"


async def public_address(host: str, port: int) -> str:
    """The address to dial for `host`: every address it resolves to must be public."""
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise httpcore2.ConnectError(f"cannot resolve {host!r}: {err}") from None
    addresses = [str(info[4][0]) for info in found]
    refused = [a for a in addresses if not is_public(a)]
    if refused or not addresses:
        raise httpcore2.ConnectError(f"{host} ({refused[0] if refused else 'no address'}) {NOT_PUBLIC}")
    return addresses[0]


class _PublicOnlyBackend(httpcore2.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        address = await public_address(host, port)
        return await self._backend.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError(f"unix socket {path} {NOT_PUBLIC}")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class PublicOnlyTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport, its connection pool dialling through `_PublicOnlyBackend`."""

    def __init__(self) -> None:
        super().__init__(trust_env=False)
        # The pool is the transport's only use of the network; httpx2 takes no backend argument itself.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=False), network_backend=_PublicOnlyBackend()
        )
