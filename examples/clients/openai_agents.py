"""The OpenAI Agents SDK's `MCPServerStdio` against `awb start` over stdio: craft, call, search, equip, call
directly.

    python examples/clients/openai_agents.py

`cache_tools_list=False` (the default) re-lists tools on every agent turn, so an equipped tool is offered
on the next one; with `cache_tools_list=True`, call `server.invalidate_tools_cache()` after awb_equip.
An agent built with `Agent(name, mcp_servers=[server])` gets the same list and calls as below.
"""

import json
import os
import tempfile

import anyio
from agents.mcp import MCPServerStdio

AWB = os.environ.get("WORKBENCH_BIN", "awb")  # the awb executable; a fresh workspace per run
PARAMS = {"command": AWB, "args": ["start", "--transport", "stdio"], "cwd": tempfile.mkdtemp()}

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
    server = MCPServerStdio(
        PARAMS, cache_tools_list=False, use_structured_content=True, client_session_timeout_seconds=30
    )
    async with server:
        print("protocol:", server.session.protocol_version)
        crafted = await server.call_tool("awb_craft", WORD_COUNT)
        print("craft:", crafted.structured_content["name"])
        called = await server.call_tool("awb_call", {"name": "word_count", "params": {"text": "to be or not"}})
        print("call:", json.dumps(called.structured_content["result"], sort_keys=True))
        found = await server.call_tool("awb_search", {"query": "count words in a text"})
        print("search:", found.structured_content["results"][0]["name"])
        equipped = await server.call_tool("awb_equip", {"name": "word_count"})
        print("equip:", equipped.structured_content["equipped_tools"])
        listed = [tool.name for tool in await server.list_tools()]
        print("listed:", "word_count" in listed)
        direct = await server.call_tool("word_count", {"text": "the quick brown fox"})
        print("direct:", json.dumps(direct.structured_content, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
