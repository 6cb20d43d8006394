"""The HTTP server's listening socket: connections accepted on it send small writes at once."""

from __future__ import annotations

import asyncio
import socket

import pytest

from awb.errors import StartupFailed
from awb.server.transports import bind


@pytest.mark.anyio
async def test_accepted_connections_turn_nagle_off() -> None:
    # uvicorn serves the socket `bind` made through asyncio, which sets TCP_NODELAY only on sockets
    # whose proto is TCP. With Nagle on, a response written in two parts waits for the client's
    # delayed ACK, ~40 ms on every request.
    listener = bind("127.0.0.1", 0)
    accepted: asyncio.Queue[asyncio.BaseTransport] = asyncio.Queue()

    class Keep(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.put_nowait(transport)

    server = await asyncio.get_running_loop().create_server(Keep, sock=listener)
    _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
    try:
        transport = await asyncio.wait_for(accepted.get(), timeout=10)
        served: socket.socket = transport.get_extra_info("socket")
        nodelay = served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        transport.close()
    finally:
        writer.close()
        server.close()
        await server.wait_closed()
    assert nodelay != 0


def test_a_taken_port_is_one_clear_error() -> None:
    first = bind("127.0.0.1", 0)
    try:
        with pytest.raises(StartupFailed, match="already in use"):
            bind("127.0.0.1", first.getsockname()[1])
    finally:
        first.close()
