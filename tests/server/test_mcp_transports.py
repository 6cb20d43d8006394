"""The full journey through a real SDK client: in memory, over stdio and over streamable HTTP."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from awb.config import Config
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call, run_journey
from support import add_tool, awb_env

pytestmark = pytest.mark.anyio


def stdio_params(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=awb_env(tmp_path), cwd=tmp_path
    )


async def test_journey_in_memory(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server) as client:
            await run_journey(client)


async def test_journey_in_memory_on_the_2025_handshake(workbench: Workbench) -> None:
    with anyio.fail_after(30):
        async with Client(McpFace(workbench).server, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            await run_journey(client)


async def test_journey_over_stdio(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_params(tmp_path)) as client:
            await run_journey(client)


async def test_journey_over_streamable_http(http_server: str) -> None:
    with anyio.fail_after(60):
        async with Client(http_server) as client:
            await run_journey(client)


async def test_tools_survive_a_server_restart_over_stdio(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_params(tmp_path)) as client:
            crafted = await call(client, "awb_craft", add_tool("keeper"))
            assert "is_error" not in crafted
        async with Client(stdio_params(tmp_path)) as client:
            called = await call(client, "awb_call", {"name": "keeper", "params": {"a": 20, "b": 22}})
            assert called["result"] == 42
            assert called["tool_id"] == crafted["tool_id"]


async def test_dotted_tool_names_are_served_when_configured(tmp_path: Path) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", tool_names="dotted")
    with anyio.fail_after(30):
        async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "awb.craft" in names and "awb_craft" not in names
            found = await call(client, "awb.search", {"query": "anything"})
            assert found["results"] == []
