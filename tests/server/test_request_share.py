"""One remote client's share of the requests in flight (`awb.server.request_share`): a client on another
machine whose requests take long to answer cannot hold every connection and leave none for others."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from http_support import MCP_HEADERS, serving

from awb.config import Config, SearchConfig
from awb.workbench import Workbench
from support import announcing

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-proxy-token-0123"
MODERN = "2026-07-28"


def _call(name: str) -> tuple[str, dict[str, str]]:
    """A 2026-07-28 `tools/call` of `awb_call` (no session to open first)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hoarder", "version": "1"},
    }
    params: dict[str, Any] = {"name": "awb_call", "arguments": {"name": name}, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "awb_call"}
    return json.dumps(body), headers


async def test_a_remote_client_with_slow_requests_on_every_connection_leaves_room_for_another(tmp_path: Any) -> None:
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        search=SearchConfig(mode="text"),
        auth_token=TOKEN,
        http={"trusted_proxies": ["127.0.0.1"], "max_connections": 8},  # one remote client's share: 6
        sandbox={"max_concurrent": 16, "max_concurrent_per_client": 16},  # no share of the slots to stop it
        tool_execution_timeout_ms=30_000,
    )
    statuses: list[int] = []
    async with Workbench(config) as workbench:
        await announcing(workbench)
        slots = workbench.slots
        with anyio.fail_after(60):
            async with serving(workbench, config) as running:
                url = f"{running.url}/mcp"
                limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)

                async def post(address: str, name: str) -> None:
                    headers = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}
                    body, mcp = _call(name)
                    async with httpx.AsyncClient(timeout=30, limits=limits, headers=headers) as http:
                        statuses.append((await http.post(url, content=body, headers=mcp)).status_code)

                async with anyio.create_task_group() as hoarder:
                    # Each request from another address of one /64: one client all the same.
                    for n in range(8):
                        hoarder.start_soon(post, f"2001:db8::{n + 1}", "waits")
                    while slots.active + len(statuses) < 8:  # each call runs, or is refused
                        await anyio.sleep(0.005)
                    refused = list(statuses)
                    try:
                        await post("203.0.113.9", "waits_not")  # another client: any answer will do
                        other = statuses[-1]
                    except httpx.TransportError as error:  # its connection closed unanswered
                        other = type(error).__name__
                    hoarder.cancel_scope.cancel()
                while slots.active:
                    await anyio.sleep(0.005)
    assert other == 200
    assert refused == [429, 429]
