"""An agent using an MCP server through the real streamable HTTP transport on loopback."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from awb.agents import Agent, mcp_http, run_agent
from awb.agents.mcp_client import connect_servers
from awb.agents.models import Prompt, ScriptedModel
from awb.agents.toolbox import ToolSpec

from .agent_fixtures import math_server

pytestmark = pytest.mark.anyio


class Pair(BaseModel):
    a: int
    b: int


class Sum(BaseModel):
    total: int


class Adder(Agent):
    mode = "adder"
    tools = ("math",)
    system_prompt = "Add the numbers with the math tool."
    Input = Pair
    Output = Sum


async def test_agent_calls_a_tool_over_streamable_http() -> None:
    # Bound and listening before uvicorn starts, so the client can connect without waiting for it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    app = math_server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, object]:
        if "tool_result" not in prompt.body:
            return {"action": "call_tool", "tool": "math.add", "arguments": {"a": 40, "b": 2}}
        return {"action": "done", "output": {"total": 42 if "42" in prompt.body else 0}}

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                result = await run_agent(
                    Adder,
                    {"a": 40, "b": 2},
                    model=ScriptedModel(script),
                    servers={"math": f"http://127.0.0.1:{port}/mcp"},
                )
            finally:
                server.should_exit = True
    sock.close()
    assert result.termination_reason == "done"
    assert result.output == {"total": 42}
    assert [c.name for c in result.tool_calls] == ["math.add"]


async def test_a_server_that_goes_away_mid_run_fails_the_next_call_not_the_run() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(math_server().streamable_http_app(), log_level="warning", lifespan="on"))
    gone = anyio.Event()

    async def serve() -> None:
        await server.serve([sock])
        sock.close()
        gone.set()

    async def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, object]:
        calls = prompt.body.count("(math.add)")
        if calls == 1:  # the first call went through: the server goes away before the second
            server.should_exit = server.force_exit = True
            await gone.wait()
        if calls < 2:
            return {"action": "call_tool", "tool": "math.add", "arguments": {"a": 40, "b": 2}}
        return {"action": "done", "output": {"total": 42}}

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                result = await run_agent(
                    Adder,
                    {"a": 40, "b": 2},
                    model=ScriptedModel(script),
                    servers={"math": f"http://127.0.0.1:{port}/mcp"},
                )
            finally:
                server.should_exit = True
    assert result.termination_reason == "done"
    assert [call.ok for call in result.tool_calls] == [True, False]
    error = result.tool_calls[1].error
    assert error is not None
    assert error.code == "server_unavailable"
    assert error.message.startswith("MCP server 'math' is no longer reachable: ")


async def test_a_tool_reply_over_the_size_limit_fails_that_call_not_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mcp_http, "MAX_REPLY_BYTES", 100_000)
    server = MCPServer("big")

    @server.tool()
    def huge(size: int) -> str:
        """A reply of `size` bytes."""
        return "x" * size

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on"))
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(http.serve, [sock])
            try:
                async with connect_servers({"big": f"http://127.0.0.1:{port}/mcp"}) as box:
                    spec = box.resolve("big.huge", "tool")
                    assert spec is not None
                    small = await box.call(spec, {"size": 1000})
                    big = await box.call(spec, {"size": 1_000_000})
                    after = await box.call(spec, {"size": 1000})
            finally:
                http.should_exit = True
    sock.close()
    assert small.ok
    assert (big.ok, big.error_code) == (False, "transport_error")
    assert "over the 100000-byte limit" in big.message()
    assert after.ok  # the server was not given up for it
