"""Notification streams held open by one client leave connections for everyone's requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS, serving
from pydantic import SecretStr

from awb.config import Config
from awb.server.http_streams import is_stream, stream_limit
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
TOKEN = "a-long-enough-proxy-token-0123"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "listener", "version": "1"},
}


def modern(method: str, params: dict[str, object] | None = None) -> tuple[str, dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": META}}
    return json.dumps(body), {**MCP_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}


@asynccontextmanager
async def open_stream(http: httpx.AsyncClient, url: str, kind: str) -> AsyncIterator[httpx.Response]:
    """A 2026-07-28 listen stream, or a handshake-era session's GET stream, open until the context ends."""
    if kind == "listen":
        body, headers = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        request = http.build_request("POST", url, content=body, headers=headers)
    else:
        opened = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        request = http.build_request("GET", url, headers={"Accept": "text/event-stream", **session})
    response = await http.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()


@pytest.mark.parametrize("kind", ["listen", "get"])
async def test_streams_take_at_most_half_the_connections_and_requests_are_still_served(
    workbench: Workbench, config: Config, kind: str
) -> None:
    config = config.model_copy(deep=True)
    config.http.max_connections = 6
    # One client opening as many streams as the server takes connections (before the cap, every one of
    # them was served, and the next request's connection was closed unanswered).
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, AsyncExitStack() as streams:
            url = f"{running.url}/mcp"
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
            hoarder = await streams.enter_async_context(httpx.AsyncClient(timeout=10, limits=limits))
            statuses = []
            for _ in range(config.http.max_connections):
                response = await streams.enter_async_context(open_stream(hoarder, url, kind))
                statuses.append(response.status_code)
                if response.status_code == 503:
                    error = json.loads(await response.aread())["error"]
                    assert "too many notification streams" in error["message"]
                    assert response.headers["retry-after"] == "30"
            async with httpx.AsyncClient(timeout=10) as other:
                body, headers = modern("tools/list")
                answer = await other.post(url, content=body, headers={**headers, "Mcp-Method": "tools/list"})
            assert answer.status_code == 200
            assert any(tool["name"] == "awb_craft" for tool in answer.json()["result"]["tools"])
    assert statuses.count(200) == stream_limit(config.http.max_connections) == 3
    assert statuses.count(503) == 3


@pytest.mark.parametrize("kind", ["listen", "get"])
async def test_a_remote_client_holds_at_most_its_share_of_the_streams_and_another_still_listens(
    workbench: Workbench, config: Config, kind: str
) -> None:
    config = config.model_copy(deep=True, update={"auth_token": SecretStr(TOKEN)})
    config.http.max_connections = 6  # 3 streams; one remote client's share: 2
    config.http.trusted_proxies = ["127.0.0.1"]
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, AsyncExitStack() as streams:
            url = f"{running.url}/mcp"

            async def remote(address: str) -> httpx.AsyncClient:
                headers = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}
                limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
                client = httpx.AsyncClient(timeout=10, limits=limits, headers=headers)
                return await streams.enter_async_context(client)

            # Each stream from another address of one /64: one client all the same.
            hoarder = [await remote(f"2001:db8::{n + 1}") for n in range(3)]
            statuses = []
            for client in hoarder:
                response = await streams.enter_async_context(open_stream(client, url, kind))
                statuses.append(response.status_code)
            refusal = json.loads(await response.aread())["error"]["message"] if statuses[-1] == 503 else ""
            other = await streams.enter_async_context(open_stream(await remote("203.0.113.9"), url, kind))
            statuses.append(other.status_code)
    assert statuses == [200, 200, 503, 200]
    assert refusal.startswith("this client has 2 notification streams open, its share of the 3")


def test_only_gets_and_listen_posts_count_as_streams() -> None:
    def scope(method: str, *headers: tuple[bytes, bytes]) -> dict[str, object]:
        return {"type": "http", "method": method, "headers": list(headers)}

    assert is_stream(scope("GET"))
    assert is_stream(scope("POST", (b"mcp-method", b"subscriptions/listen")))
    assert not is_stream(scope("POST", (b"mcp-method", b"tools/call")))
    assert not is_stream(scope("POST"))
    assert not is_stream(scope("DELETE"))
