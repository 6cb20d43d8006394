"""The planner with the workbench itself as a server: a tool crafted and equipped mid-task is found by the
next search and called directly."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from awb.agents.models import ScriptedModel
from awb.config import Config
from awb.planner.task import execute_mcp_task
from awb.server.mcp import McpFace
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

SLUG = 'def run(params):\n    return "-".join(params["text"].lower().split())\n'
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "action": "call_tool",
        "tool": "planner.call_tool",
        "arguments": {"server": "awb", "tool": tool, "arguments": arguments},
    }


async def test_a_tool_equipped_mid_task_is_found_by_the_next_search_and_called(config: Config) -> None:
    craft = {
        "name": "slugify_title",
        "description": "Turn a title into a URL slug",
        "code": SLUG,
        "input_schema": SCHEMA,
        "examples": [{"params": {"text": "Hello World"}, "expected": "hello-world"}],
    }
    model = ScriptedModel(
        [
            call("awb_craft", craft),
            call("awb_equip", {"name": "slugify_title"}),
            {"action": "call_tool", "tool": "planner.search_tools", "arguments": {"query": "url slug title"}},
            call("slugify_title", {"text": "Agent Workbench Rocks"}),
            {"action": "done", "output": {"summary": "slugged", "data": "agent-workbench-rocks"}},
        ]
    )
    async with Workbench(config) as workbench:
        with anyio.fail_after(60):
            result = await execute_mcp_task("make a slug", servers={"awb": McpFace(workbench).server}, model=model)
    assert result.success, result.error
    found = json.loads(model.seen[3][0].body.split("tool_result (planner.search_tools): ")[1].splitlines()[0])
    assert found[0]["server"] == "awb" and found[0]["tool"] == "slugify_title"
    assert '"agent-workbench-rocks"' in model.seen[4][0].body
