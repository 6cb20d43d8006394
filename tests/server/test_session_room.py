"""At `http.max_sessions`, a new handshake-era session ends the stalest idle one instead of being refused."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import httpx
import pytest
from http_support import INITIALIZE, MCP_HEADERS, serving
from pydantic import SecretStr

from awb.config import Config
from awb.server.session_room import _OpenedBy
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
TOKEN = "a-long-enough-proxy-token-0123"


async def open_session(http: httpx.AsyncClient, url: str) -> str:
    opened = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    assert (await http.post(url, json=INITIALIZED, headers=headers_of(session))).status_code == 202
    return session


def headers_of(session: str) -> dict[str, str]:
    return {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}


async def list_tools(http: httpx.AsyncClient, url: str, session: str) -> int:
    return (await http.post(url, json=TOOLS_LIST, headers=headers_of(session))).status_code


async def test_a_new_session_ends_the_least_recently_used_idle_one(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(deep=True)
    config.http.max_sessions = 3
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, httpx.AsyncClient(timeout=10) as http:
            url = f"{running.url}/mcp"
            kept, stale, recent = [await open_session(http, url) for _ in range(3)]
            assert await list_tools(http, url, kept) == 200  # used last: now the most recently active
            # Before: "503 Too many open sessions" for the next 30 minutes (the idle timeout).
            newcomer = await open_session(http, url)
            assert await list_tools(http, url, stale) == 404  # the one unused for longest went
            for session in (kept, recent, newcomer):
                assert await list_tools(http, url, session) == 200


async def test_sessions_in_use_are_never_ended_for_a_new_one(workbench: Workbench, config: Config) -> None:
    config = config.model_copy(deep=True)
    config.http.max_sessions = 2
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, AsyncExitStack() as stack:
            url = f"{running.url}/mcp"
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
            sessions = [await open_session(http, url) for _ in range(2)]
            for session in sessions:  # each holds a GET stream open: a request in flight
                get = http.build_request("GET", url, headers={**headers_of(session), "Accept": "text/event-stream"})
                stream = await http.send(get, stream=True)
                stack.push_async_callback(stream.aclose)
                assert stream.status_code == 200
            refused = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
            assert refused.status_code == 503
            for session in sessions:
                assert await list_tools(http, url, session) == 200


async def test_a_remote_client_that_opens_sessions_fast_ends_its_own_idle_ones_not_another_clients(
    workbench: Workbench, config: Config
) -> None:
    config = config.model_copy(deep=True, update={"auth_token": SecretStr(TOKEN)})
    config.http.max_sessions = 8  # one remote client's share: 6
    config.http.trusted_proxies = ["127.0.0.1"]

    def remote(address: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address})

    with anyio.fail_after(60):
        async with serving(workbench, config) as running, remote("203.0.113.9") as other:
            url = f"{running.url}/mcp"
            others = [await open_session(other, url) for _ in range(2)]
            # Each session from another address of one /64: one client all the same.
            flooded = []
            for n in range(20):
                async with remote(f"2001:db8::{n + 1}") as flooder:
                    flooded.append(await open_session(flooder, url))
            async with remote("2001:db8::1") as flooder:
                alive = [await list_tools(flooder, url, session) for session in flooded]
            kept = [await list_tools(other, url, session) for session in others]
    assert kept == [200, 200]
    assert alive == [404] * 14 + [200] * 6  # its newest six: its share


def test_what_clients_opened_is_forgotten_once_their_sessions_end() -> None:
    live: dict[str, object] = {}
    opened = _OpenedBy(live)
    for n in range(100):  # a hundred clients, each a session that ends before the next opens
        live.clear()
        live[f"s{n}"] = object()
        opened.add(("address", f"192.0.2.{n}"), f"s{n}", limit=10)
    assert len(opened._by_client) <= 2 * 10 + 1
    assert opened.count(("address", "192.0.2.99")) == 1
    assert opened.count(("address", "192.0.2.0")) == 0
