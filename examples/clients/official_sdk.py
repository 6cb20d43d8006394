"""The official MCP Python SDK (`mcp`) against `awb start` over stdio: craft, call, search, equip, call directly.

    python examples/clients/official_sdk.py

`list_tools()` asks the server every time, so an equipped tool is there on the next call. To be told
when it changes, open `client.listen(tools_list_changed=True)` (2026-07-28) or pass a `message_handler`
that watches for `notifications/tools/list_changed` (`mode="legacy"`, 2025-11-25).
"""

import json
import os
import tempfile

import anyio
from mcp import Client, StdioServerParameters

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


async def main() -> None:
    async with Client(SERVER) as client:
        print("protocol:", client.protocol_version)
        crafted = await client.call_tool("awb_craft", WORD_COUNT)
        print("craft:", crafted.structured_content["name"])
        called = await client.call_tool("awb_call", {"name": "word_count", "params": {"text": "to be or not"}})
        print("call:", json.dumps(called.structured_content["result"], sort_keys=True))
        found = await client.call_tool("awb_search", {"query": "count words in a text"})
        print("search:", found.structured_content["results"][0]["name"])
        async with client.listen(tools_list_changed=True) as changes:
            equipped = await client.call_tool("awb_equip", {"name": "word_count"})
            print("equip:", equipped.structured_content["equipped_tools"])
            with anyio.fail_after(10):
                await anext(changes)  # the server says the tool list changed
        listed = [tool.name for tool in (await client.list_tools()).tools]
        print("listed:", "word_count" in listed)
        direct = await client.call_tool("word_count", {"text": "the quick brown fox"})
        print("direct:", json.dumps(direct.structured_content, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
