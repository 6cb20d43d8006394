"""An agent that crafts its own tool on the workbench, then uses it. Runs offline: the workbench is
served in-process and a scripted model plays the part a real model would.

    python examples/crafting_agent.py                 # scripted model, temporary inventory
    awb agents run crafter '{"n": 21}' --agents-dir examples --model openai:gpt-4o-mini \\
        --server "awb=awb start"                     # a real model and a workbench over stdio
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from awb.agents import Agent, RunEvent, RunResult, run_agent
from awb.agents.models import Model, Prompt, ScriptedModel
from awb.agents.toolbox import ToolSpec
from awb.config import Config
from awb.server.mcp import McpFace
from awb.workbench import Workbench


class Number(BaseModel):
    n: int


class Doubled(BaseModel):
    result: int


class Crafter(Agent):
    mode = "crafter"
    tools = ("awb",)
    system_prompt = "Craft a tool that doubles an integer with awb_craft, call it with awb_call, return its result."
    Input = Number
    Output = Doubled


DOUBLE = {
    "name": "double",
    "description": "Double an integer.",
    "code": "def run(params):\n    return params['n'] * 2\n",
    "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "examples": [{"params": {"n": 2}, "expected": 4}],
}


def play(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """What a real model would do here: craft, call, then answer with what the call returned."""
    results = [line for line in prompt.body.splitlines() if line.startswith("- tool_result (")]
    if not results:
        return {"action": "call_tool", "tool": "awb.awb_craft", "arguments": DOUBLE}
    if len(results) == 1:
        return {"action": "call_tool", "tool": "awb.awb_call", "arguments": {"name": "double", "params": {"n": 21}}}
    called = json.loads(results[-1].split(": ", 1)[1])
    return {"action": "done", "output": {"result": called["result"]}}


def scripted() -> ScriptedModel:
    return ScriptedModel(play)


def show(event: RunEvent) -> None:
    if event.type == "tool_result":
        print(f"step {event.step}: {event.data['tool']} ok={event.data['ok']}")


async def main(model: Model | str | None = None, inventory: Path | None = None) -> RunResult:
    with tempfile.TemporaryDirectory() as scratch:
        config = Config(inventory_path=inventory or Path(scratch) / "inventory.db")
        async with Workbench(config) as workbench:
            servers = {"awb": McpFace(workbench).server}
            result = await run_agent(Crafter, {"n": 21}, model=model or scripted(), servers=servers, on_event=show)
    print(result.model_dump_json(indent=2, include={"output", "termination_reason", "tool_calls", "usage"}))
    return result


if __name__ == "__main__":
    anyio.run(main)
