"""Helpers the agent runtime tests share: small MCP servers, a scripted fake provider and the reader agent
over the files server."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from awb.agents import Agent


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


class Reader(Agent):
    mode = "reader"
    tools = ("files",)
    system_prompt = "Read documents and answer."
    Input = Question
    Output = Answer


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
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    #: Hold the answer until the test ends: a provider slower than any timeout.
    hold: bool = False
    #: Send the headers and half the body, then hold the rest: a stream that stops mid-way.
    stall_body: bool = False


@dataclass
class FakeProvider:
    """A loopback HTTP server that answers each POST with the next scripted reply."""

    url: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Set when the test ends, so held replies stop waiting.
    release: threading.Event = field(default_factory=threading.Event)

    def reply(
        self,
        body: Any,
        status: int = 200,
        headers: dict[str, str] | None = None,
        hold: bool = False,
        stall_body: bool = False,
    ) -> None:
        self.replies.append(Reply(status, body, headers or {}, hold, stall_body))

    def bodies(self) -> list[dict[str, Any]]:
        return [request["body"] for request in self.requests]


def openai_calls(*calls: tuple[str, str], usage: tuple[int, int] = (10, 3)) -> dict[str, Any]:
    """A chat-completions reply with these (function name, JSON arguments) tool calls."""
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for i, (name, arguments) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {"choices": [{"message": message}], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}


def openai_text(content: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def anthropic_uses(*calls: tuple[str, Any], text: str = "Let me see.") -> dict[str, Any]:
    """A Messages reply with a text block and these (tool name, input) tool_use blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [
        {"type": "tool_use", "id": f"t{i}", "name": name, "input": args} for i, (name, args) in enumerate(calls)
    ]
    return {"content": content, "stop_reason": "tool_use", "usage": {"input_tokens": 7, "output_tokens": 2}}


class WaitRecorder:
    """Stands in for the provider client's sleep: records each wait, takes none."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
