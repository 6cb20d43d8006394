"""LangChain's MCP adapters against `awb start` over stdio: craft, call, search, equip, call directly.

    pip install -r examples/clients/langchain-requirements.txt   # its own venv: the adapters pin mcp < 2
    python examples/clients/langchain_adapters.py

`load_mcp_tools(session)` lists the server's tools each time it is called (and `client.get_tools()`
opens a new session each time), so an equipped tool is there once you load the tools again, as
LangGraph agents do when you rebuild them for the next turn.
"""

import json
import os
import tempfile

import anyio
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

AWB = os.environ.get("WORKBENCH_BIN", "awb")  # the awb executable; a fresh workspace per run
SERVERS = {
    "awb": {"transport": "stdio", "command": AWB, "args": ["start", "--transport", "stdio"], "cwd": tempfile.mkdtemp()}
}

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


async def call(tools: list, name: str, arguments: dict) -> dict:
    """Invoke the LangChain tool of that name and read the JSON it returns."""
    tool = next(tool for tool in tools if tool.name == name)
    blocks = await tool.ainvoke(arguments)
    return json.loads(blocks[0]["text"])


async def main() -> None:
    client = MultiServerMCPClient(SERVERS)
    async with client.session("awb", auto_initialize=False) as session:
        print("protocol:", (await session.initialize()).protocolVersion)
        tools = await load_mcp_tools(session)
        crafted = await call(tools, "awb_craft", WORD_COUNT)
        print("craft:", crafted["name"])
        called = await call(tools, "awb_call", {"name": "word_count", "params": {"text": "to be or not"}})
        print("call:", json.dumps(called["result"], sort_keys=True))
        found = await call(tools, "awb_search", {"query": "count words in a text"})
        print("search:", found["results"][0]["name"])
        equipped = await call(tools, "awb_equip", {"name": "word_count"})
        print("equip:", equipped["equipped_tools"])
        tools = await load_mcp_tools(session)  # the next turn's tools
        print("listed:", "word_count" in [tool.name for tool in tools])
        direct = await call(tools, "word_count", {"text": "the quick brown fox"})
        print("direct:", json.dumps(direct, sort_keys=True))


if __name__ == "__main__":
    anyio.run(main)
