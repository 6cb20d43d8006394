"""An equipped tool whose result is not an object still answers with `structuredContent`, wrapped as
`{"result": ...}` the way the MCP SDK wraps such results, so frameworks read a typed value, not text."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

AWB = str(Path(sys.executable).parent / "awb")
ADD = {
    "name": "add",
    "description": "Add two integers",
    "code": "def run(params):\n    return params['a'] + params['b']\n",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    "output_schema": {"type": "integer"},
    "examples": [{"params": {"a": 1, "b": 2}, "expected": 3}],
}


async def test_an_equipped_tool_with_a_non_object_result_answers_structured_content_every_framework_reads(
    tmp_path: Path,
) -> None:
    pydantic_ai_mcp = pytest.importorskip("pydantic_ai.mcp", reason="the clients extra is not installed")
    from fastmcp.client.transports import StdioTransport

    server = StdioServerParameters(command=AWB, args=["start", "--transport", "stdio"], cwd=tmp_path)
    with anyio.fail_after(90):
        async with Client(server) as client:
            for tool, arguments in (("awb_craft", ADD), ("awb_equip", {"name": "add"})):
                assert not (await client.call_tool(tool, arguments)).is_error
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            output_schema: dict[str, Any] | None = listed["add"].output_schema
            assert output_schema is not None and output_schema["type"] == "object"
            assert output_schema["properties"]["result"] == {"type": "integer"}
            direct = await client.call_tool("add", {"a": 20, "b": 22})
            assert direct.structured_content == {"result": 42}

        toolset = pydantic_ai_mcp.MCPToolset(
            StdioTransport(AWB, ["start", "--transport", "stdio"], cwd=str(tmp_path)), init_timeout=60
        )
        async with toolset:
            assert await toolset.direct_call_tool("add", {"a": 20, "b": 22}) == 42  # PydanticAI unwraps {"result"}
