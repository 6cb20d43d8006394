"""Agno's `MCPTools` against `awb start` over stdio: craft, call, search, equip, call directly.

    AGNO_TELEMETRY=false python examples/clients/agno_tools.py

`refresh_connection=True` is the setting that matters: without it `MCPTools` builds its functions once,
when it connects, and an equipped tool never reaches the agent. With it, every agent run rebuilds them
(`build_tools()`, called below the way `Agent.arun` calls it at the start of a run).
"""

import json
import os
import tempfile

import anyio
from agno.tools.mcp import MCPTools
from mcp import StdioServerParameters

AWB = os.environ.get("WORKBENCH_BIN", "awb")  # the awb executable; a fresh workspace per run
SERVER = StdioServerParameters(command=AWB, args=["start", "--transport", "stdio"], cwd=tempfile.mkdtemp())

WORD_COUNT = {
    "name": "word_count",
    "description": "Count the words of a text and find the longest one",
    "code": "def run(params):\n    words = params['text'].split()\n    return {'words': len(words), 'longest': max(words, key=len)}\n",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to count."}},
        "required": ["text"],
    },
    "output_schema": {
        "type": "object",
        "properties": {"words": {"type": "integer"}, "longest": {"type": "string"}},
        "required": ["words", "longest"],
    },
    "examples": [{"params": {"text": "a bb"}, "expected": {"words": 2, "longest": "bb"}}],
}


async def call(tools: MCPTools, name: str, arguments: dict) -> dict:
    """Call a tool through the function Agno hands the model, and read the JSON it returns."""
    result = await tools.functions[name].entrypoint(**arguments)
    return json.loads(result.content)


async def main() -> None:
    async with MCPTools(server_params=SERVER, refresh_connection=True, timeout_seconds=30) as tools:
        print("protocol:", tools.session.protocol_version)
        crafted = await call(tools, "awb_craft", WORD_COUNT)
        print("craft:", crafted["name"])
        called = await call(tools, "awb_call", {"name": "word_count", "params": {"text": "to be or not"}})
        print("call:", json.dumps(called["result"], sort_keys=True))
        found = await call(tools, "awb_search", {"query": "count words in a text"})
        print("search:", found["results"][0]["name"])
        equipped = await call(tools, "awb_equip", {"name": "word_count"})
        print("equip:", equipped["equipped_tools"])
        await tools.build_tools()  # what the next agent run does with refresh_connection=True
        print("listed:", "word_count" in tools.functions)
        direct = await call(tools, "word_count", {"text": "the quick brown fox"})
        print("direct:", json.dumps(direct, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
