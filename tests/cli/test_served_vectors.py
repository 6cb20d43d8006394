"""Tools that reach a workspace without a search vector (imported, or crafted where search was text
only) get one from the next `awb start` in the background, and then show in a listing by query."""

from __future__ import annotations

import json
import os
import queue
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from awb.config import Config, SearchConfig
from awb.workbench import Workbench
from clitools import AWB, clean_env, http_server, run_awb

pytest.importorskip("onnxruntime")

WEATHER = {
    "name": "weather_forecast",
    "description": "Tomorrow's rain and temperature for a city.",
    "code": "def run(params):\n    return {'rain': True}\n",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def craft_text_only(inventory: Path) -> None:
    config = Config(inventory_path=inventory, search=SearchConfig(mode="text"))
    async with Workbench(config) as workbench:
        await workbench.craft(WEATHER)


async def listed(url: str, query: str) -> list[str]:
    async with Client(url) as client:
        result = await client.call_tool("awb_list", {"query": query})
    assert result.structured_content is not None and not result.is_error
    return [tool["name"] for tool in result.structured_content["tools"]]


def heard_embedded(lines: queue.Queue[str], seen: list[str] | None = None) -> None:
    """Wait (at most a minute) for the server's log line saying it embedded the one tool."""
    seen = [] if seen is None else seen
    while True:
        try:
            line = lines.get(timeout=60)
        except queue.Empty:
            raise AssertionError(f"the server never embedded the tool: {seen}") from None
        assert line, f"the server exited: {seen}"
        seen.append(line)
        if "search: embedded" in line:
            assert "search: embedded 1 tools" in line
            return


def test_a_tool_without_a_vector_is_embedded_by_the_server_and_then_listed_by_query(tmp_path: Path) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    anyio.run(craft_text_only, tmp_path / ".awb" / "inventory.db")
    assert "a serving awb makes them in the background" in search_row(tmp_path)
    with http_server(tmp_path) as server:
        heard_embedded(server.lines, server.seen)
        assert anyio.run(listed, server.url, "weather forecast") == ["weather_forecast"]
    assert "reindex" not in search_row(tmp_path)


def search_row(root: Path) -> str:
    doctor = run_awb(root, "doctor", "--quick", "--json")
    return next(check["detail"] for check in json.loads(doctor.stdout)["checks"] if check["check"] == "search")


def test_over_stdio_too(tmp_path: Path) -> None:
    assert run_awb(tmp_path, "init").returncode == 0
    anyio.run(craft_text_only, tmp_path / ".awb" / "inventory.db")
    read_end, write_end = os.pipe()
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        with os.fdopen(read_end) as stream:
            for line in stream:
                lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    params = StdioServerParameters(command=AWB, args=["start", "--transport", "stdio"], env=clean_env(), cwd=tmp_path)

    async def session() -> list[str]:
        with anyio.fail_after(90), os.fdopen(write_end, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await anyio.to_thread.run_sync(heard_embedded, lines)
                result = await client.call_tool("awb_list", {"query": "weather forecast"})
        assert result.structured_content is not None and not result.is_error
        return [tool["name"] for tool in result.structured_content["tools"]]

    assert anyio.run(session) == ["weather_forecast"]
