"""Whole Agno agent runs against a real `awb start` over stdio, the model a fake OpenAI-compatible server on
127.0.0.1: the first run crafts and equips a tool; the next run is offered it only with `refresh_connection=True`."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import pytest

from support import loopback_http

pytest.importorskip("agno.tools.mcp", reason="the clients extra is not installed: pip install -e '.[clients]'")
from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.tools.mcp import MCPTools
from mcp import StdioServerParameters

pytestmark = pytest.mark.anyio

WORD_COUNT = {
    "name": "word_count",
    "description": "Count the words of a text",
    "code": "def run(params):\n    return {'words': len(params['text'].split())}\n",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]},
    "examples": [{"params": {"text": "a b"}, "expected": {"words": 2}}],
}


class FakeChat:
    """Chat completions on loopback: each request gets the next scripted tool call (or text once the script
    is spent); records the tool names each request offered."""

    def __init__(self) -> None:
        self.script: list[tuple[str, dict[str, Any]]] = []
        self.offered: list[set[str]] = []
        self.url = ""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.offered.append({tool["function"]["name"] for tool in body.get("tools", [])})
        if self.script and body["messages"][-1]["role"] != "tool":
            name, arguments = self.script.pop(0)
            call = {"id": f"call{len(self.offered)}", "type": "function"}
            call["function"] = {"name": name, "arguments": json.dumps(arguments)}
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": str(body["messages"][-1]["content"])}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "fake", "choices": [choice]}


@pytest.fixture
def fake_chat() -> Iterator[FakeChat]:
    chat = FakeChat()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            data = json.dumps(chat.answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    with loopback_http(Handler) as server:
        chat.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        yield chat


async def runs(chat: FakeChat, tmp_path: Path, refresh_connection: bool) -> tuple[list[set[str]], set[str]]:
    """Run 1 crafts, run 2 equips, run 3 asks once: the tools run 3's request offered, and what the server lists."""
    awb = str(Path(sys.executable).parent / "awb")
    server = StdioServerParameters(command=awb, args=["start", "--transport", "stdio"], cwd=tmp_path)
    model = OpenAIChat(id="fake", base_url=chat.url, api_key="test-key")
    with anyio.fail_after(120):
        async with MCPTools(server_params=server, refresh_connection=refresh_connection, timeout_seconds=30) as tools:
            agent = Agent(model=model, tools=[tools], telemetry=False)
            chat.script = [("awb_craft", WORD_COUNT)]
            await agent.arun("Make a word counter.")
            chat.script = [("awb_equip", {"name": "word_count"})]
            await agent.arun("Equip it.")
            first = len(chat.offered)
            chat.script = []
            await agent.arun("Which tools do you have?")
            listed = {tool.name for tool in await tools.session.list_tools()}
            return chat.offered[first:], listed


async def test_agno_with_refresh_connection_offers_the_equipped_tool_on_the_next_run(
    fake_chat: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGNO_TELEMETRY", "false")
    offered, listed = await runs(fake_chat, tmp_path, refresh_connection=True)
    assert "word_count" in listed
    assert len(offered) == 1 and {"word_count", "awb_call"} <= offered[0]


async def test_agno_by_default_never_offers_a_tool_equipped_after_it_connected(
    fake_chat: FakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why docs/clients.md says `refresh_connection=True`."""
    monkeypatch.setenv("AGNO_TELEMETRY", "false")
    offered, listed = await runs(fake_chat, tmp_path, refresh_connection=False)
    assert "word_count" in listed  # equipped, and the server lists it
    assert len(offered) == 1 and "word_count" not in offered[0] and "awb_call" in offered[0]
