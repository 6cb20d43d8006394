"""Text no UTF-8 wire can carry, sent by a client: a lone surrogate written as JSON's `\\ud800` escape.

The 2026-07-28 HTTP path parses bodies with `json.loads`, which accepts one (the handshake-era path and
stdio refuse it as a parse error). The SDK's client cannot send one (it encodes UTF-8), so these tests
POST raw bodies to the real app.
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import httpx
import pytest
from http_support import MCP_HEADERS, serving

from awb.config import Config
from awb.server.mcp import McpFace
from awb.text import unencodable_path
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio

LONE = "x\ud800"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "1"},
}


async def post_call(http: httpx.AsyncClient, url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 tools/call; the JSON-RPC answer. json.dumps writes a lone surrogate as `\\ud800`."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    body["params"]["_meta"] = META  # type: ignore[index]
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
    answer = await http.post(f"{url}/mcp", content=json.dumps(body), headers=headers)
    reply: dict[str, Any] = answer.json()
    return reply


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        ("awb_search", {"query": LONE}, "/query"),  # was a JSON-RPC internal error: the result echoes the query
        ("awb_inspect", {"name": LONE}, "/name"),  # was internal_error, from SQLite's encoder
        ("awb_list", {"tag": LONE}, "/tag"),
        ("awb_call", {"name": "add_numbers", "params": {"a": 1, LONE: 2}}, "/params/x\\ud800"),
        ("add_numbers", {"a": LONE, "b": 2}, "/a"),  # an equipped tool, by its own name
        # was a JSON-RPC internal error: the examples run, and their report echoes the params
        (
            "awb_craft",
            {**add_tool("other"), "examples": [{"params": {"a": LONE}, "expected": 1}]},
            "/examples/0/params/a",
        ),
    ],
)
async def test_a_lone_surrogate_in_arguments_is_invalid_params_at_its_path(
    workbench: Workbench, config: Config, tool: str, arguments: dict[str, Any], path: str
) -> None:
    await workbench.craft(add_tool())
    workbench.equip("add_numbers")
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, httpx.AsyncClient(timeout=30) as http:
            reply = await post_call(http, running.url, tool, arguments)
            assert "error" not in reply, reply  # a tool result, not a JSON-RPC error
            assert reply["result"]["isError"] is True
            error = reply["result"]["structuredContent"]["error"]
            assert error["code"] == "invalid_params"
            assert error["details"]["errors"] == [{"path": path, "message": error["details"]["errors"][0]["message"]}]
            assert "lone surrogate" in error["message"]
            # Nothing was stored, and the server goes on.
            assert workbench.store.get_by_name("other") is None
            after = await post_call(http, running.url, "awb_call", {"name": "add_numbers", "params": {"a": 1, "b": 2}})
            assert after["result"]["structuredContent"]["result"] == 3


async def test_a_lone_surrogate_in_a_tool_name_is_invalid_params(workbench: Workbench) -> None:
    # Over HTTP the SDK refuses it first (no Mcp-Name header can match it); a library caller can pass one.
    result = await McpFace(workbench).call(LONE, {})
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == "invalid_params"
    assert error["details"]["name"] == "x\\ud800"


def test_unencodable_path_finds_keys_and_values_at_any_depth() -> None:
    assert unencodable_path({"a": ["ok", "é", {"b": 1}]}) is None
    assert unencodable_path({"a": ["ok", {"b": "\udfff"}]}) == ["a", 1, "b"]
    assert unencodable_path({"a": {"\ud800": 1}}) == ["a", "\ud800"]
    assert unencodable_path("\ud800") == []


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        # was the tool's failure (invalid_output, or a SyntaxError in JavaScript), counted against the tool
        ("awb_call", {"name": "add_numbers", "params": {"a": None, "b": 2}}, "/params/a"),
        ("add_numbers", {"a": None, "b": 2}, "/a"),
        # was stored with `"maximum": null` in its place
        (
            "awb_craft",
            {**add_tool("other"), "input_schema": {"type": "object", "maximum": None}},
            "/input_schema/maximum",
        ),
    ],
)
async def test_a_number_json_cannot_carry_is_invalid_params_at_its_path(
    workbench: Workbench, config: Config, tool: str, arguments: dict[str, Any], path: str, number: float
) -> None:
    """`NaN`, `Infinity` and a number past the float range (`1e309`, which decodes to Infinity) are read by
    every transport's parser; json.dumps writes the first two as such tokens."""
    await workbench.craft(add_tool())
    workbench.equip("add_numbers")
    arguments = json.loads(json.dumps(arguments).replace("null", json.dumps(number)))
    with anyio.fail_after(60):
        async with serving(workbench, config) as running, httpx.AsyncClient(timeout=30) as http:
            reply = await post_call(http, running.url, tool, arguments)
            assert reply["result"]["isError"] is True
            error = reply["result"]["structuredContent"]["error"]
            assert error["code"] == "invalid_params" and error["details"]["errors"][0]["path"] == path, error
            assert "a number JSON cannot carry" in error["message"]
    assert workbench.store.get_by_name("other") is None
    assert workbench.inspect("add_numbers").tool.failure_count == 0
