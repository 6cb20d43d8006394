"""A bare MCP server with one echo tool, on the official SDK's low-level API: the baseline that
`ops.py` compares the workbench against over the same transport."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ECHO = types.Tool(
    name="echo",
    description="Return the arguments.",
    input_schema={"type": "object"},
    output_schema={"type": "object"},
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(arguments))], structured_content=arguments
    )


async def main() -> None:
    server: Server[Any] = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
