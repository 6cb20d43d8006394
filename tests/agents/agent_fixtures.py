"""Helpers the agent runtime tests share: small MCP servers and a scripted fake provider."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def files_server() -> MCPServer:
    server = MCPServer("files")
    documents = {"notes.txt": "the answer is 42", "empty.txt": ""}

    @server.tool()
    def read(path: str) -> str:
        """Read a document by path."""
        if path not in documents:
            raise ToolError(f"no such file: {path}")
        return documents[path]

    @server.tool()
    def listing() -> list[str]:
        """List document paths."""
        return sorted(documents)

    return server


def math_server() -> MCPServer:
    server = MCPServer("math")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server


@dataclass
class FakeProvider:
    """A loopback HTTP server that answers each POST with the next scripted (status, body)."""

    url: str
    replies: list[tuple[int, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def reply(self, body: Any, status: int = 200) -> None:
        self.replies.append((status, body))
