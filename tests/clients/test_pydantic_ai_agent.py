"""A whole PydanticAI agent run against a real `awb start` over stdio, the model played by `FunctionModel`:
it crafts a tool, equips it, and calls it as a tool of its own on the next turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai", reason="the clients extra is not installed: pip install -e '.[clients]'")
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

pytestmark = pytest.mark.anyio

WORD_COUNT = {
    "name": "word_count",
    "description": "Count the words of a text",
    "code": "def run(params):\n    return {'words': len(params['text'].split())}\n",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]},
    "examples": [{"params": {"text": "a b"}, "expected": {"words": 2}}],
}


def toolset(tmp_path: Path, **settings: Any) -> MCPToolset[Any]:
    awb = str(Path(sys.executable).parent / "awb")
    return MCPToolset(
        StdioTransport(awb, ["start", "--transport", "stdio"], cwd=str(tmp_path)), init_timeout=60, **settings
    )


class Scripted:
    """The model: one planned tool call per turn, then the last tool result as text; records what it was offered."""

    def __init__(self, plan: list[tuple[str, dict[str, Any]]]) -> None:
        self.plan = plan
        self.offered: list[set[str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append({tool.name for tool in info.function_tools})
        turn = len(self.offered) - 1
        if turn < len(self.plan):
            name, arguments = self.plan[turn]
            return ModelResponse(parts=[ToolCallPart(name, arguments, tool_call_id=f"call-{turn}")])
        returned = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(json.dumps(returned[-1].content, sort_keys=True))])


CRAFT_AND_EQUIP = [("awb_craft", WORD_COUNT), ("awb_equip", {"name": "word_count"})]


async def test_an_agent_with_cache_tools_off_calls_the_tool_it_crafted_and_equipped_on_its_next_turn(
    tmp_path: Path,
) -> None:
    model = Scripted([*CRAFT_AND_EQUIP, ("word_count", {"text": "one two three"})])
    agent = Agent(FunctionModel(model), toolsets=[toolset(tmp_path, cache_tools=False)])
    with anyio.fail_after(90):
        run = await agent.run("How many words are in 'one two three'? Make a tool for it.")
    assert run.output == '{"words": 3}'
    assert [("word_count" in offered, "awb_craft" in offered) for offered in model.offered] == [
        (False, True),  # crafts
        (False, True),  # equips
        (True, True),  # the next turn: offered as a tool of its own, and called
        (True, True),
    ]


async def test_with_default_cache_tools_the_equipped_tool_is_not_offered_but_awb_call_reaches_it(
    tmp_path: Path,
) -> None:
    """Why docs/clients.md says `cache_tools=False`: the cached list never sees the equip on 2026-07-28."""
    call_by_name = ("awb_call", {"name": "word_count", "params": {"text": "one two"}})
    model = Scripted([*CRAFT_AND_EQUIP, call_by_name])
    agent = Agent(FunctionModel(model), toolsets=[toolset(tmp_path)])
    with anyio.fail_after(90):
        run = await agent.run("Count the words in 'one two'.")
    assert not any("word_count" in offered for offered in model.offered)
    assert json.loads(run.output)["result"] == {"words": 2}
