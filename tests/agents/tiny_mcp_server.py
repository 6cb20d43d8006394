"""A tiny MCP server over stdio, spawned by the agent tests: `python tests/agents/tiny_mcp_server.py`."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("tiny")


@server.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


if __name__ == "__main__":
    server.run("stdio")
