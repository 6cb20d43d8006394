"""A runnable example agent that greets someone through an MCP tool.

    python examples/hello_agent.py              # runs the agent with a scripted model, no network
    python examples/hello_agent.py serve        # serves the `greeter` MCP tool over stdio
    awb agents run hello "Ada" --agents-dir examples --model openai:gpt-4o-mini \\
        --server "greeter=python examples/hello_agent.py serve"
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from awb.agents import Agent, RunResult, run_agent
from awb.agents.models import Model, ScriptedModel

greeter = MCPServer("greeter")


@greeter.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


class Person(BaseModel):
    name: str


class Greeting(BaseModel):
    greeting: str


class Hello(Agent):
    mode = "hello"
    tools = ("greeter",)
    system_prompt = "Greet the person with the greeter tool, then return the greeting."
    Input = Person
    Output = Greeting


def scripted() -> ScriptedModel:
    """What a real model would do here, played back: one tool call, then the typed answer."""
    return ScriptedModel(
        [
            {"action": "call_tool", "tool": "greeter.greet", "arguments": {"name": "Ada"}},
            {"action": "done", "output": {"greeting": "Hello, Ada!"}},
        ]
    )


async def main(model: Model | str | None = None) -> RunResult:
    result = await run_agent(Hello, "Ada", model=model or scripted(), servers={"greeter": greeter})
    print(result.model_dump_json(indent=2))
    return result


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        greeter.run("stdio")
    else:
        anyio.run(main)
