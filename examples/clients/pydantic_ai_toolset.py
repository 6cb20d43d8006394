"""PydanticAI's `MCPToolset` against `awb start` over stdio: craft, call, search, equip, call directly.

    python examples/clients/pydantic_ai_toolset.py

`cache_tools=False` is the setting that matters: by default the toolset lists tools once and waits for
`notifications/tools/list_changed`, which a 2026-07-28 session (what it negotiates) never carries without
a listen stream, so an equipped tool would stay invisible to the agent. An agent built with
`Agent(model, toolsets=[toolset])` gets the same list and the same calls as below on every step.
"""

import json
import os
import tempfile

import anyio
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset

AWB = os.environ.get("WORKBENCH_BIN", "awb")  # the awb executable; a fresh workspace per run
SERVER = StdioTransport(AWB, ["start", "--transport", "stdio"], cwd=tempfile.mkdtemp())

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


async def main() -> None:
    toolset = MCPToolset(SERVER, cache_tools=False, init_timeout=60)  # cache_tools=False: equipped tools show up
    async with toolset:
        print("protocol:", toolset.client.protocol_version)
        crafted = await toolset.direct_call_tool("awb_craft", WORD_COUNT)
        print("craft:", crafted["name"])
        called = await toolset.direct_call_tool("awb_call", {"name": "word_count", "params": {"text": "to be or not"}})
        print("call:", json.dumps(called["result"], sort_keys=True))
        found = await toolset.direct_call_tool("awb_search", {"query": "count words in a text"})
        print("search:", found["results"][0]["name"])
        equipped = await toolset.direct_call_tool("awb_equip", {"name": "word_count"})
        print("equip:", equipped["equipped_tools"])
        listed = [tool.name for tool in await toolset.list_tools()]
        print("listed:", "word_count" in listed)
        direct = await toolset.direct_call_tool("word_count", {"text": "the quick brown fox"})
        print("direct:", json.dumps(direct, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
