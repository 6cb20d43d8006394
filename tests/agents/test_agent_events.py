"""A run's events mask the secrets in what they carry (a tool's arguments, its error, the run's result),
while the model and the run's own result keep what the run needs."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from awb.agents import RunEvent, run_agent, run_agent_stream
from awb.agents.models import ScriptedModel
from awb.redaction import MASK
from support import MAX_MASKED_ON_LOOP, run_while_ticking

from .agent_fixtures import Answer, Question, Reader

pytestmark = pytest.mark.anyio

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
KEY = "sk-proj-" + "K" * 32
GITHUB = "ghp_" + "G" * 36
#: The most CPU the loop's thread may spend between two ticks while a run tells its result (see tests/planner/test_big_results).
MAX_GAP_SECONDS = 0.75


class Caller(Reader):
    mode = "caller"
    tools = ("vault",)
    Input = Question
    Output = Answer


def vault_server() -> MCPServer:
    server = MCPServer("vault")

    @server.tool()
    def login(header: str) -> str:
        """Log in with an Authorization header."""
        raise ToolError(f"refused {header}; try the key {KEY}")

    return server


SCRIPT = [
    {"action": "call_tool", "tool": "vault.login", "arguments": {"header": f"Bearer {TOKEN}"}},
    {"action": "done", "output": {"answer": f"use {GITHUB}"}},
]


def leaked(events: list[RunEvent]) -> list[str]:
    text = json.dumps([event.model_dump(mode="json") for event in events])
    return [secret for secret in (TOKEN, KEY, GITHUB) if secret[:12] in text]


async def test_events_mask_credentials_in_arguments_tool_errors_and_the_result_which_the_run_keeps() -> None:
    events: list[RunEvent] = []
    model = ScriptedModel(SCRIPT)
    with anyio.fail_after(10):
        result = await run_agent(Caller, "go", model=model, servers={"vault": vault_server()}, on_event=events.append)
    assert leaked(events) == []
    [call] = [event for event in events if event.type == "tool_call"]
    assert call.data["arguments"] == {"header": MASK}
    [failed] = [event for event in events if event.type == "tool_result"]
    assert failed.data["ok"] is False and f"try the key {MASK}" in failed.data["error"]["message"]
    done = events[-1].data["result"]
    assert done["output"] == {"answer": f"use {MASK}"}
    # The run's own result, and the model within the run, keep what they were given.
    assert result.output == {"answer": f"use {GITHUB}"}
    assert result.tool_calls[0].arguments == {"header": f"Bearer {TOKEN}"}
    assert KEY in model.seen[1][0].body


async def test_the_event_stream_is_masked_too() -> None:
    with anyio.fail_after(10):
        events = [
            event
            async for event in run_agent_stream(
                Caller, "go", model=ScriptedModel(SCRIPT), servers={"vault": vault_server()}
            )
        ]
    assert events[-1].type == "done" and leaked(events) == []


@pytest.mark.timeout(120)
async def test_a_result_of_20_mb_is_told_masked_while_the_event_loop_goes_on() -> None:
    text = "lorem ipsum " * 1_700_000 + f"Bearer {TOKEN}"
    events: list[RunEvent] = []
    model = ScriptedModel([{"action": "done", "output": {"answer": text}}])
    result, loop = await run_while_ticking(
        lambda: run_agent(Caller, "go", model=model, servers={"vault": vault_server()}, on_event=events.append)
    )
    assert loop.held < MAX_GAP_SECONDS, f"the event loop was held {loop.held:.2f} s of CPU"
    assert loop.masked_on_loop < MAX_MASKED_ON_LOOP, f"the event loop masked {loop.masked_on_loop} characters itself"
    answer = events[-1].data["result"]["output"]["answer"]
    assert answer.endswith(f"lorem ipsum {MASK}") and len(answer) > 20_000_000
    assert result.output == {"answer": text}
