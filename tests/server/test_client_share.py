"""Each HTTP client's share of the execution slots (`sandbox.max_concurrent_per_client`), with real SDK
clients: one client that fills its share is refused more, and another is still served. On loopback a
client is its session or name; from another machine (here: named by a trusted proxy) it is its address,
however many sessions, names or addresses of its /64 it uses."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from http_support import serving
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp_types import Implementation

from awb.config import Config, SearchConfig
from awb.workbench import Workbench
from journey import call
from support import add_tool, announcing

pytestmark = pytest.mark.anyio

ADD = {"name": "add_numbers", "params": {"a": 2, "b": 3}}
TOKEN = "a-long-enough-proxy-token-0123"


def _client(url: str, mode: str, name: str) -> Client:
    # A handshake-era client is its session; a 2026-07-28 client has none, and is told apart by its name.
    return Client(url, mode=mode, cache=None, client_info=Implementation(name=name, version="1"))  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_fills_its_share_is_busy_and_another_client_is_still_served(
    tmp_path: Path, mode: str
) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db", search=SearchConfig(mode="text"))
    config.sandbox.max_concurrent = 4  # a client's share: 3 by default
    async with Workbench(config) as workbench:
        await announcing(workbench)
        await workbench.craft(add_tool())
        slots = workbench.slots
        with anyio.fail_after(60):
            async with (
                serving(workbench, config) as running,
                _client(f"{running.url}/mcp", mode, "agent-a") as greedy,
                _client(f"{running.url}/mcp", mode, "agent-b") as other,
            ):
                async with anyio.create_task_group() as calls:
                    for _ in range(3):
                        calls.start_soon(greedy.call_tool, "awb_call", {"name": "waits"})
                    while slots.active < 3:  # the three calls run, each in its slot
                        await anyio.sleep(0.005)
                    refused = await call(greedy, "awb_call", ADD)
                    served = await call(other, "awb_call", ADD)
                    calls.cancel_scope.cancel()  # the client gives up its waiting calls
                while slots.active:
                    await anyio.sleep(0.005)
    assert refused["is_error"] and refused["error"]["code"] == "busy"
    assert refused["error"]["details"] == {"limit": 4, "per_client": 3, "scope": "client"}
    assert served["result"] == 5


async def test_clients_that_give_the_same_name_from_one_address_share_one_share(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inventory.db", search=SearchConfig(mode="text"))
    config.sandbox.max_concurrent = 4
    async with Workbench(config) as workbench:
        await announcing(workbench)
        await workbench.craft(add_tool())
        slots = workbench.slots
        with anyio.fail_after(60):
            async with (
                serving(workbench, config) as running,
                _client(f"{running.url}/mcp", "auto", "agent-a") as first,
                _client(f"{running.url}/mcp", "auto", "agent-a") as twin,
            ):
                async with anyio.create_task_group() as calls:
                    for _ in range(3):
                        calls.start_soon(first.call_tool, "awb_call", {"name": "waits"})
                    while slots.active < 3:
                        await anyio.sleep(0.005)
                    refused = await call(twin, "awb_call", ADD)
                    calls.cancel_scope.cancel()
                while slots.active:
                    await anyio.sleep(0.005)
    assert refused["error"]["details"]["scope"] == "client"


async def test_clients_a_stateless_server_cannot_tell_apart_are_held_only_by_the_server_cap(tmp_path: Path) -> None:
    # Behind one address (a load balancer's), they would otherwise all be one client with one share.
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        search=SearchConfig(mode="text"),
        stateless_http=True,
        tool_execution_timeout_ms=1000,  # the waiting calls end by their time limit, not by cancelling
    )
    config.sandbox.max_concurrent = 4
    async with Workbench(config) as workbench:
        await announcing(workbench)
        await workbench.craft(add_tool())
        slots = workbench.slots
        with anyio.fail_after(60):
            async with (
                serving(workbench, config) as running,
                _client(f"{running.url}/mcp", "legacy", "agent-a") as client,
            ):
                async with anyio.create_task_group() as calls:
                    for _ in range(3):
                        calls.start_soon(client.call_tool, "awb_call", {"name": "waits"})
                    while slots.active < 3:
                        await anyio.sleep(0.005)
                    served = await call(client, "awb_call", ADD)
                    # No cancelling: a stateless server answers the waiting calls at their time limit, and
                    # a client closed before those answers arrive fails in the SDK (ClosedResourceError).
                while slots.active:
                    await anyio.sleep(0.005)
    assert served["result"] == 5


async def _remote(stack: AsyncExitStack, url: str, mode: str, name: str, address: str) -> Client:
    """A client on another machine, at `address`, as the trusted proxy on 127.0.0.1 names it."""
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}
    http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
    client = Client(
        streamable_http_client(url, http_client=http),
        mode=mode,  # type: ignore[arg-type]
        cache=None,
        client_info=Implementation(name=name, version="1"),
    )
    return await stack.enter_async_context(client)


#: One remote client dressed as four: each of its four callers has a session (handshake-era), a name
#: (2026-07-28), or an IPv6 address of one /64 of its own; or the server is stateless, and tells no one apart.
ESCAPES = {
    "sessions": ("legacy", ["agent-a"] * 4, ["198.51.100.7"] * 4),
    "names": ("auto", [f"agent-{n}" for n in range(4)], ["198.51.100.7"] * 4),
    "ipv6 addresses": ("auto", ["agent-a"] * 4, [f"2001:db8::{n + 1}" for n in range(4)]),
    "stateless": ("legacy", ["agent-a"] * 4, ["198.51.100.7"] * 4),
}


@pytest.mark.parametrize("escape", list(ESCAPES))
async def test_a_remote_client_with_many_sessions_names_or_addresses_of_its_64_cannot_starve_another(
    tmp_path: Path, escape: str
) -> None:
    mode, names, addresses = ESCAPES[escape]
    config = Config(
        inventory_path=tmp_path / "inventory.db",
        search=SearchConfig(mode="text"),
        auth_token=TOKEN,
        http={"trusted_proxies": ["127.0.0.1"]},
        stateless_http=escape == "stateless",
        # A stateless server answers the waiting calls at their time limit (the client cannot cancel them).
        tool_execution_timeout_ms=1000 if escape == "stateless" else 30_000,
    )
    config.sandbox.max_concurrent = 4  # a client's share: 3
    async with Workbench(config) as workbench:
        await announcing(workbench)
        await workbench.craft(add_tool())
        slots = workbench.slots
        outcomes: list[dict[str, Any]] = []

        async def hold(client: Client) -> None:
            outcomes.append(await call(client, "awb_call", {"name": "waits"}))  # only a refusal comes back

        with anyio.fail_after(60):
            async with serving(workbench, config) as running, AsyncExitStack() as stack:
                url = f"{running.url}/mcp"
                greedy = [
                    await _remote(stack, url, mode, name, address)
                    for name, address in zip(names, addresses, strict=True)
                ]
                other = await _remote(stack, url, "auto", "agent-z", "203.0.113.9")
                async with anyio.create_task_group() as calls:
                    for client in greedy:
                        calls.start_soon(hold, client)
                    while slots.active + len(outcomes) < len(greedy):  # each call runs, or is refused
                        await anyio.sleep(0.005)
                    served = await call(other, "awb_call", ADD)
                    refused = list(outcomes)
                    if escape != "stateless":
                        calls.cancel_scope.cancel()
                while slots.active:
                    await anyio.sleep(0.005)
    assert served.get("result") == 5, served
    assert [outcome["error"]["details"] for outcome in refused] == [{"limit": 4, "per_client": 3, "scope": "client"}]
