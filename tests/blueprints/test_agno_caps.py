"""What an MCP server may make an Agno run hold: the Agno target's arms connect through awb's capped transports,
so a reply over the cap fails its call (the model is told why) and the server stays in use, over stdio and
over streamable HTTP, as in the awb runtime. fastmcp's transports, which Agno uses, read a reply whole."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from agno_replies import calls, text, tool_results
from mcp.server.mcpserver import MCPServer
from starlette.types import Receive, Scope, Send

from api.fakes import FakeServer, serving, uvicorn_serving
from awb.agents import mcp_http
from awb.agents.models import http as provider_http
from awb.blueprints.agno_target import compile_to_agno, run_agno
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import validate_blueprint

pytestmark = pytest.mark.anyio

HOSTILE_SERVER = Path(__file__).parents[1] / "agents" / "hostile_stdio_server.py"
LIMIT = 256 * 1024
CHUNK = 64 * 1024


@pytest.fixture(autouse=True)
def small_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_http, "MAX_REPLY_BYTES", LIMIT)


@pytest.fixture
def model() -> Iterator[FakeServer]:
    with serving(FakeServer()) as fake:
        yield fake


async def run_with_arm(model: FakeServer, arm: dict[str, Any]) -> RunJournal:
    """A run that calls `far_flood`, then `far_echo` with "still here", then answers."""
    model.queue(calls("far_flood", {}), calls("far_echo", {"text": "still here"}, "t2"), text("done"))
    data = {
        "name": "scout",
        "head": {"provider": "openai", "model": "gpt-4o-mini", "system_prompt": "Be brief."},
        "legs": {"mode": "single_agent"},
        "arms": [{"type": "mcp", "name": "far", **arm}],
    }
    blueprint = validate_blueprint(data)
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "sk-test-agno"}
    options = RuntimeOptions(environ=env, allow_mcp_commands=True)
    journal = RunJournal("run", blueprint.spine.max_tool_calls, options.secrets())
    target = compile_to_agno(blueprint, options, journal=journal)
    with anyio.fail_after(60):
        assert await run_agno(target, blueprint, "go", journal=journal) == "done"
    return journal


def assert_flood_failed_and_echo_answered(model: FakeServer, journal: RunJournal) -> None:
    flooded, echoed = tool_results(model.requests[2]["body"])
    assert f"over the {LIMIT}-byte limit" in flooded
    assert echoed == "still here"
    assert [(e.data["tool"], e.data["success"]) for e in journal.entries if e.kind == "tool_call"] == [
        ("far_flood", False),
        ("far_echo", True),
    ]


async def test_a_stdio_arms_reply_over_the_cap_fails_its_call_and_the_run_goes_on(model: FakeServer) -> None:
    journal = await run_with_arm(model, {"command": [sys.executable, str(HOSTILE_SERVER), str(8 * LIMIT)]})
    assert_flood_failed_and_echo_answered(model, journal)


async def test_an_http_arms_reply_over_the_cap_fails_its_call_and_the_run_goes_on(model: FakeServer) -> None:
    server = MCPServer("far")

    @server.tool()
    def flood() -> str:
        """A reply four caps long."""
        return "x" * (4 * LIMIT)

    @server.tool()
    def echo(text: str) -> str:
        """The text back."""
        return text

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    # JSON replies, not event streams: the SDK caps each event of a stream itself (at 1 MB).
    app = server.streamable_http_app(json_response=True)
    http = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(http.serve, [sock])
        try:
            journal = await run_with_arm(model, {"url": f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"})
        finally:
            http.should_exit = True
    sock.close()
    assert_flood_failed_and_echo_answered(model, journal)


ANTHROPIC_FLOODED = {
    "id": "m1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [{"type": "text", "text": "flooded"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 2},
}


class FloodingProvider:
    """An OpenAI- or Anthropic-compatible endpoint whose every reply is a valid answer ("flooded") padded to
    `size` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        reply = ANTHROPIC_FLOODED if scope["path"].endswith("/messages") else text("flooded")[1]
        body = json.dumps(reply).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        for _ in range(self.size // CHUNK):
            await send({"type": "http.response.body", "body": b" " * CHUNK, "more_body": True})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.parametrize(
    ("provider", "model", "environ"),
    [
        ("openai", "gpt-4o-mini", {"OPENAI_BASE_URL": "{url}/v1", "OPENAI_API_KEY": "sk-test-agno"}),
        ("anthropic", "claude-haiku-4-5", {"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "sk-ant-test"}),
    ],
)
async def test_a_provider_reply_over_the_cap_ends_the_run_saying_why(
    monkeypatch: pytest.MonkeyPatch, provider: str, model: str, environ: dict[str, str]
) -> None:
    monkeypatch.setattr(provider_http, "DEFAULT_MAX_REPLY_BYTES", LIMIT)
    data = {
        "name": "scout",
        "head": {"provider": provider, "model": model, "system_prompt": "Be brief."},
        "legs": {"mode": "single_agent"},
    }
    blueprint = validate_blueprint(data)
    with uvicorn_serving(FloodingProvider(8 * LIMIT)) as url:
        options = RuntimeOptions(environ={name: value.format(url=url) for name, value in environ.items()})
        journal = RunJournal("run", blueprint.spine.max_tool_calls, options.secrets())
        target = compile_to_agno(blueprint, options, journal=journal)
        with anyio.fail_after(60):
            answer = await run_agno(target, blueprint, "go", journal=journal)
    # Agno ends a run whose model failed with the failure as its answer, as it does for any provider error; the
    # Anthropic SDK reports a body that failed as it was read as a connection error, whatever the reason.
    assert (
        answer
        == {
            "openai": f"the model provider's reply is over the {LIMIT}-byte limit",
            "anthropic": "Connection error.",
        }[provider]
    )
