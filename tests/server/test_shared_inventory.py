"""Two `awb start --transport http` processes on one PostgreSQL inventory, through the official SDK client.

A craft through one server is found and called through the other, and its toasts reach the web panel's
event stream of the other; an equip through one reaches a client of the other as a tool-list change
within a second (LISTEN/NOTIFY, no polling); eight clients
calling one tool through both servers leave the exact usage count; and stateless replicas answer a
client whose every request goes to the other one, as behind a round-robin load balancer.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_PROTOCOL_VERSION
from test_equip_mcp import listening

from journey import call
from support import add_tool, awb_env, awb_http

pytestmark = pytest.mark.anyio


@contextmanager
def server(tmp_path: Path, url: str, **env: str) -> Iterator[str]:
    """One `awb start --transport http` on the shared inventory `url`; yields its MCP URL."""
    folder = Path(tempfile.mkdtemp(prefix="server-", dir=tmp_path))
    with awb_http(folder, awb_env(folder, AWB_INVENTORY_URL=url, **env)) as base:
        yield f"{base}/mcp"


@pytest.fixture
def two_servers(tmp_path: Path, clean_pg_url: str) -> Iterator[tuple[str, str]]:
    with ExitStack() as stack:
        first = stack.enter_context(server(tmp_path, clean_pg_url))
        second = stack.enter_context(server(tmp_path, clean_pg_url))
        yield first, second


async def test_a_tool_crafted_through_one_server_is_found_and_called_through_the_other(
    two_servers: tuple[str, str],
) -> None:
    first, second = two_servers
    with anyio.fail_after(60):
        async with Client(first, cache=None) as one, Client(second, cache=None) as other:
            crafted = await call(one, "awb_craft", add_tool("shared_adder"))
            assert crafted["name"] == "shared_adder"
            found = await call(other, "awb_search", {"query": "add two numbers"})
            assert [hit["name"] for hit in found["results"]][:1] == ["shared_adder"]
            result = await call(other, "awb_call", {"name": "shared_adder", "params": {"a": 2, "b": 5}})
            assert result["result"] == 7
            clash = await call(other, "awb_craft", add_tool("shared_adder"))
            assert clash["error"]["code"] == "name_conflict"


async def test_a_craft_through_one_server_shows_its_toasts_on_the_panel_of_the_other(
    two_servers: tuple[str, str],
) -> None:
    first, second = two_servers
    events_url = second.removesuffix("/mcp") + "/events"
    kinds: list[str] = []
    with anyio.fail_after(60):
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
            http.stream("GET", events_url) as response,
            Client(first, cache=None) as one,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.aiter_lines()
            assert await anext(lines) == "retry: 1000"  # the stream is open: later events are ours
            await call(one, "awb_craft", add_tool("toasted"))
            with anyio.fail_after(5):
                async for line in lines:
                    if line.startswith("data: "):
                        frame = json.loads(line.removeprefix("data: "))
                        kinds.append(frame["kind"])
                        if frame["kind"] == "crafted":
                            assert frame["toast"]["text"].startswith("toasted v1 ready and sandboxed")
                            break
    assert kinds == ["craft_started", "crafted"]


async def test_an_equip_through_one_server_reaches_a_client_of_the_other(
    two_servers: tuple[str, str],
) -> None:
    first, second = two_servers
    with anyio.fail_after(60):
        async with Client(first, cache=None) as one, Client(second, cache=None) as other:
            await call(one, "awb_craft", add_tool("to_equip"))
            async with listening(other) as (next_change, forget):
                forget()
                await call(one, "awb_equip", {"name": "to_equip"})
                with anyio.fail_after(10):  # a bound for a hang, not a timing
                    await next_change()
                assert "to_equip" in {tool.name for tool in (await other.list_tools()).tools}
                await call(one, "awb_unequip", {"name": "to_equip"})
                with anyio.fail_after(10):  # a bound for a hang, not a timing
                    await next_change()
                assert "to_equip" not in {tool.name for tool in (await other.list_tools()).tools}


async def test_eight_clients_calling_one_tool_through_both_servers_leave_the_exact_usage_count(
    two_servers: tuple[str, str],
) -> None:
    calls_each = 10
    with anyio.fail_after(120):
        async with Client(two_servers[0], cache=None) as setup:
            await call(setup, "awb_craft", add_tool("busy"))

        async def client(url: str) -> None:
            async with Client(url, cache=None) as session:
                for i in range(calls_each):
                    result = await call(session, "awb_call", {"name": "busy", "params": {"a": i, "b": 1}})
                    assert result["result"] == i + 1

        async with anyio.create_task_group() as tasks:
            for n in range(8):
                tasks.start_soon(client, two_servers[n % 2])
        async with Client(two_servers[1], cache=None) as check:
            inspected = await call(check, "awb_inspect", {"name": "busy"})
    assert inspected["tool"]["usage_count"] == 8 * calls_each
    assert inspected["tool"]["success_count"] == 8 * calls_each
    assert inspected["tool"]["memory_level"] == "long_term"  # 80 calls pass both promotion thresholds


class RoundRobin(httpx2.AsyncHTTPTransport):
    """A client-side load balancer: each request goes to the next replica's port."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self._ports = itertools.cycle([httpx2.URL(url).port for url in urls])
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._ports)
        assert port is not None
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await super().handle_async_request(request)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stateless_replicas_answer_a_session_whose_requests_alternate_between_them(
    tmp_path: Path, clean_pg_url: str, mode: str
) -> None:
    """`legacy`: a 2025-11-25 client (initialize handshake); `auto`: the SDK client's default, which
    discovers the server and speaks the newest protocol both know."""
    with (
        server(tmp_path, clean_pg_url, AWB_STATELESS_HTTP="true") as first,
        server(tmp_path, clean_pg_url, AWB_STATELESS_HTTP="true") as second,
    ):
        balancer = RoundRobin([first, second])
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(transport=balancer, timeout=httpx2.Timeout(30, read=120)) as http,
                Client(streamable_http_client(first, http_client=http), mode=mode, cache=None) as client,
            ):
                assert client.protocol_version == (
                    LATEST_HANDSHAKE_VERSION if mode == "legacy" else LATEST_PROTOCOL_VERSION
                )
                await call(client, "awb_craft", add_tool("balanced"))
                for i in range(4):
                    assert (await call(client, "awb_call", {"name": "balanced", "params": {"a": i, "b": i}}))[
                        "result"
                    ] == 2 * i
                inspected = await call(client, "awb_inspect", {"name": "balanced"})
        assert inspected["tool"]["usage_count"] == 4
        assert len(set(balancer.sent)) == 2  # both replicas answered


def test_a_server_whose_inventory_cannot_be_reached_says_so_in_one_line_and_exits(tmp_path: Path) -> None:
    url = "postgresql://awb:s3cret@127.0.0.1:1/awb"  # nothing listens on port 1
    done = subprocess.run(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", "0"],
        env=awb_env(tmp_path, AWB_INVENTORY_URL=url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error (config_invalid): cannot reach the inventory at"), lines
    assert "postgresql://awb:***@127.0.0.1:1/awb" in lines[0] and "s3cret" not in done.stderr
