"""Slow clients cannot take the HTTP server: headers have a deadline, open connections are capped, and
a normal client is served while a slowloris client holds many half-sent requests (127.0.0.1 only)."""

from __future__ import annotations

import anyio
import httpx
import pytest
from anyio.abc import SocketStream
from http_support import INITIALIZE, MCP_HEADERS, Running, serving

from awb.config import Config
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

HALF_REQUEST = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def limited(
    config: Config, *, max_connections: int = 20, header_timeout: float = 30.0, body_timeout: float = 30.0
) -> Config:
    config = config.model_copy(deep=True)
    config.http.max_connections = max_connections
    config.http.header_timeout_seconds = header_timeout
    config.http.body_timeout_seconds = body_timeout
    return config


async def closed_by_server(stream: SocketStream, trickle: bytes) -> None:
    """Trickle bytes until the server hangs up (the caller bounds the wait)."""
    with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError)):
        while True:
            await stream.send(trickle)
            with anyio.move_on_after(0.05):
                await stream.receive()


async def half_sent(running: Running) -> SocketStream:
    stream = await anyio.connect_tcp("127.0.0.1", running.port)
    await stream.send(HALF_REQUEST)
    return stream


async def served(running: Running) -> int:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(running.url + "/nothing-here")).status_code


async def test_a_slowloris_client_cannot_stop_a_normal_client_from_being_served(
    workbench: Workbench, config: Config
) -> None:
    slow: list[SocketStream] = []
    with anyio.fail_after(60):
        async with serving(workbench, limited(config)) as running:
            try:
                slow.extend([await half_sent(running) for _ in range(150)])
                assert await served(running) == 404
                # The attack goes on while the normal client keeps asking.
                for _ in range(5):
                    slow.extend([await half_sent(running) for _ in range(30)])
                    assert await served(running) == 404
                assert len(running.server.server_state.connections) <= 20 + 1
            finally:
                for stream in slow:
                    await stream.aclose()


async def test_a_client_that_never_finishes_its_headers_is_disconnected(workbench: Workbench, config: Config) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, limited(config, header_timeout=0.3)) as running:
            stream = await half_sent(running)
            try:
                # Trickling bytes does not extend the deadline: it runs from the connection.
                await closed_by_server(stream, b"x")
            finally:
                await stream.aclose()
            assert await served(running) == 404


async def test_a_kept_alive_connection_gets_a_new_header_deadline_after_each_response(
    workbench: Workbench, config: Config
) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, limited(config, header_timeout=0.3)) as running:
            stream = await anyio.connect_tcp("127.0.0.1", running.port)
            try:
                await stream.send(b"GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert (await stream.receive()).startswith(b"HTTP/1.1 404")
                await stream.send(HALF_REQUEST)
                await closed_by_server(stream, b"y")
            finally:
                await stream.aclose()


async def test_a_client_that_trickles_its_body_is_disconnected(workbench: Workbench, config: Config) -> None:
    with anyio.fail_after(30):
        async with serving(workbench, limited(config, body_timeout=0.3)) as running:
            stream = await anyio.connect_tcp("127.0.0.1", running.port)
            try:
                await stream.send(
                    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{"
                )
                await closed_by_server(stream, b" ")
            finally:
                await stream.aclose()
            assert await served(running) == 404


async def test_clients_that_trickle_bodies_on_every_connection_cannot_stop_a_normal_client_from_being_served(
    workbench: Workbench, config: Config
) -> None:
    # A body keeps its connection for `body_timeout` (30 s) and the client opens another after it: with
    # every connection in the middle of a body, a new connection found none waiting for its headers to
    # close, and was closed itself, unanswered.
    slow: list[SocketStream] = []
    with anyio.fail_after(60):
        async with serving(workbench, limited(config, max_connections=10)) as running:
            try:
                for _ in range(10):
                    stream = await anyio.connect_tcp("127.0.0.1", running.port)
                    slow.append(stream)
                    await stream.send(
                        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{"
                    )
                while len(running.server.server_state.connections) < 10:
                    await anyio.sleep(0.005)
                assert await served(running) == 404
                assert len(running.server.server_state.connections) <= 10 + 1
            finally:
                for stream in slow:
                    await stream.aclose()


PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


async def test_sessions_are_capped_and_one_that_ends_makes_room(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(deep=True)
    config.http.max_sessions = 2
    with anyio.fail_after(30):
        async with serving(workbench, config) as running, httpx.AsyncClient(timeout=10) as client:
            url = running.url + "/mcp"
            opened = [await client.post(url, json=INITIALIZE, headers=MCP_HEADERS) for _ in range(2)]
            assert [r.status_code for r in opened] == [200, 200]
            sessions = [{**MCP_HEADERS, "mcp-session-id": r.headers["mcp-session-id"]} for r in opened]
            # Both in use (a GET stream each is a request in flight): a third is refused, not made room for
            # (awb.server.session_room ends idle sessions only).
            streams = [
                await client.send(
                    client.build_request("GET", url, headers={**h, "Accept": "text/event-stream"}), stream=True
                )
                for h in sessions
            ]
            refused = await client.post(url, json=INITIALIZE, headers=MCP_HEADERS)
            assert refused.status_code == 503 and "Too many open sessions" in refused.text
            # The open sessions still serve, and one the client ends makes room for a new one.
            assert (await client.post(url, json=PING, headers=sessions[0])).status_code == 200
            await streams[0].aclose()
            assert (await client.delete(url, headers=sessions[0])).status_code == 200
            assert (await client.post(url, json=INITIALIZE, headers=MCP_HEADERS)).status_code == 200
            await streams[1].aclose()


async def test_a_session_left_idle_expires(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(deep=True)
    config.http.session_idle_timeout_seconds = 0.3
    with anyio.fail_after(30):
        async with serving(workbench, config) as running, httpx.AsyncClient(timeout=10) as client:
            url = running.url + "/mcp"
            opened = await client.post(url, json=INITIALIZE, headers=MCP_HEADERS)
            headers = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
            assert (await client.post(url, json=PING, headers=headers)).status_code == 200
            # Asked less often than its timeout (a request restarts its clock), the session is found ended
            # (the wait is bounded by fail_after).
            while (await client.post(url, json=PING, headers=headers)).status_code == 200:
                await anyio.sleep(0.5)
            assert (await client.post(url, json=PING, headers=headers)).status_code == 404
