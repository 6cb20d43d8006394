"""Every error code reaches the agent as a structured `isError` result, and bad input never hurts."""

from __future__ import annotations

import random
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.config import Config
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from journey import call
from support import ADD_SCHEMA, add_tool

pytestmark = pytest.mark.anyio


async def error_code(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await call(client, tool, arguments)
    assert result.get("is_error"), result
    assert set(result["error"]) == {"code", "message", "details"}
    assert result["error"]["message"]
    return str(result["error"]["code"])


async def test_each_error_code_is_reported_with_code_message_and_details(tmp_path: Any) -> None:
    config = Config(inventory_path=tmp_path / "inv.db", max_tools=2, max_code_bytes=200, tool_execution_timeout_ms=300)
    async with Workbench(config) as workbench, Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            assert await error_code(client, "awb_call", {"name": "ghost"}) == "tool_not_found"
            assert "is_error" not in await call(client, "awb_craft", add_tool("adder"))
            assert await error_code(client, "awb_craft", add_tool("adder")) == "name_conflict"
            assert await error_code(client, "awb_call", {"name": "adder", "params": {"a": "x"}}) == "invalid_params"
            assert await error_code(client, "awb_craft", {"name": "bad name!", "description": "d", "code": "x"}) == (
                "invalid_params"
            )
            big = add_tool("big", code="def run(params):\n    return 1\n" + "# padding\n" * 40)
            assert await error_code(client, "awb_craft", big) == "limit_exceeded"
            loop = {
                "name": "spin",
                "description": "never returns",
                "code": "def run(params):\n    while True:\n        pass\n",
                "input_schema": {"type": "object"},
            }
            assert "is_error" not in await call(client, "awb_craft", loop)
            assert await error_code(client, "awb_call", {"name": "spin"}) == "timeout"
            assert await error_code(client, "awb_craft", add_tool("third")) == "limit_exceeded"
            await call(client, "awb_delete", {"name": "spin"})
            crash = {
                "name": "divider",
                "description": "divides by zero",
                "code": "def run(params):\n    return params['a'] / 0\n",
                "input_schema": {"type": "object"},
            }
            assert "is_error" not in await call(client, "awb_craft", crash)
            result = await call(client, "awb_call", {"name": "divider", "params": {"a": 1}})
            assert result["error"]["code"] == "runtime_error"
            assert any("params['a'] / 0" in line for line in result["error"]["details"]["traceback"])
            assert await error_code(client, "awb_call", {"name": "spin"}) == "tool_deleted"


async def test_an_unknown_meta_tool_is_a_structured_error(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(10):
            assert await error_code(client, "awb_fly", {}) == "tool_not_found"


def _garbage(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["str", "int", "float", "bool", "none", "list", "dict", "huge", "unicode"]
    kind = rng.choice(kinds if depth < 3 else kinds[:5])
    if kind == "str":
        return rng.choice(["", " ", "'; DROP TABLE tools; --", "NEAR(a b)", "*", '"', "name:x OR (y", "\x00"])
    if kind == "int":
        return rng.choice([0, -1, 2**63, -(2**70), 7])
    if kind == "float":
        return rng.choice([0.5, -1e308, 1e-300])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "huge":
        return "x" * rng.choice([1000, 70_000])
    if kind == "unicode":
        return rng.choice(["画像を縮小", "🔥🔥", "ß\u200b", "\ud7ff"])
    if kind == "list":
        return [_garbage(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["name", "code", "params", "query", "limit", "tool_id", "x", "", "tags", "type", "properties"]
    return {rng.choice(keys): _garbage(rng, depth + 1)}


async def test_two_hundred_malformed_argument_sets_never_crash_the_server(workbench: Workbench) -> None:
    rng = random.Random(20261122)
    verbs = ["craft", "call", "list", "search", "delete", "inspect"]
    fields = [
        "name",
        "description",
        "code",
        "input_schema",
        "params",
        "query",
        "limit",
        "tool_id",
        "tag",
        "memory_level",
        "metadata",
        "top_k",
        "offset",
        "output_schema",
    ]
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(90):
            assert "is_error" not in await call(client, "awb_craft", add_tool("survivor"))
            for _ in range(200):
                arguments = {rng.choice(fields): _garbage(rng) for _ in range(rng.randint(0, 4))}
                result = await client.call_tool(f"awb_{rng.choice(verbs)}", arguments)
                if result.is_error:
                    assert result.structured_content is not None
                    assert result.structured_content["error"]["code"] != "internal_error", result.structured_content
            after = await call(client, "awb_call", {"name": "survivor", "params": {"a": 1, "b": 1}})
            assert after["result"] == 2
            assert (await call(client, "awb_search", {"query": "add numbers"}))["results"]


async def test_params_are_validated_against_the_tools_own_schema(workbench: Workbench) -> None:
    async with Client(McpFace(workbench).server) as client:
        await call(client, "awb_craft", add_tool("strict", input_schema=ADD_SCHEMA))
        result = await call(client, "awb_call", {"name": "strict", "params": {"a": 1}})
        assert result["error"]["code"] == "invalid_params"
        assert result["error"]["details"]["errors"][0]["message"] == "'b' is a required property"
