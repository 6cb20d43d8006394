"""Providers take at most MAX_FUNCTIONS functions a request; an agent offering more is refused before any
request, with the count and what to do, instead of failing at the first model call with the provider's error."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from awb.agents import Agent, run_agent
from awb.agents.errors import TooManyFunctions
from awb.agents.loop import run_loop
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.functions import MAX_FUNCTIONS
from awb.agents.models.openai import OpenAIModel
from awb.agents.toolbox import Toolbox, ToolOutcome, ToolSpec

from .agent_fixtures import FakeProvider

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


class Wide(Agent):
    mode = "wide"
    tools = ("big",)
    system_prompt = "Use the tools."
    Input = Question
    Output = Answer


def big_server(tools: int) -> MCPServer:
    server = MCPServer("big")
    for index in range(tools):

        def ping() -> str:
            return "pong"

        server.add_tool(ping, name=f"ping_{index}", description="Answer pong.")
    return server


def big_toolbox(tools: int) -> Toolbox:
    async def ping(arguments: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(ok=True, payload="pong")

    toolbox = Toolbox()
    for index in range(tools):
        toolbox.add(ToolSpec(f"big.ping_{index}", "Answer pong.", {"type": "object"}, "big"), ping)
    return toolbox


def openai(provider: FakeProvider, **options: Any) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=provider.url, api_key="sk-test", backoff_seconds=0, **options)


def done_reply() -> dict[str, Any]:
    call = {"id": "c", "type": "function", "function": {"name": "done", "arguments": json.dumps({"answer": "ok"})}}
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}


async def test_an_agent_offering_more_functions_than_providers_take_is_refused_before_any_request(
    fake_provider: FakeProvider,
) -> None:
    with anyio.fail_after(30), pytest.raises(TooManyFunctions) as raised:
        await run_agent(Wide, "q", model=openai(fake_provider), servers={"big": big_server(MAX_FUNCTIONS)})
    assert fake_provider.requests == []
    error = raised.value
    assert error.code == "too_many_functions" and error.exit_code == 2
    assert error.details == {"agent": "wide", "functions": MAX_FUNCTIONS + 1, "limit": MAX_FUNCTIONS, "tools": 128}
    assert error.message.startswith(f"agent 'wide' would offer the model {MAX_FUNCTIONS + 1} functions")
    for advice in ("Allow fewer servers", "equip fewer tools", "execute_mcp_task"):
        assert advice in error.message


async def test_an_agent_at_the_cap_sends_every_function(fake_provider: FakeProvider) -> None:
    fake_provider.reply(done_reply())
    with anyio.fail_after(30):
        result = await run_agent(Wide, "q", model=openai(fake_provider), servers={"big": big_server(MAX_FUNCTIONS - 1)})
    assert result.ok, result.error
    assert len(fake_provider.requests[0]["body"]["tools"]) == MAX_FUNCTIONS


async def test_a_model_reading_actions_as_text_has_no_function_cap(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"choices": [{"message": {"content": '{"action": "done", "output": {"answer": "ok"}}'}}]})
    with anyio.fail_after(30):
        result = await run_agent(
            Wide, "q", model=openai(fake_provider, native_tools=False), servers={"big": big_server(MAX_FUNCTIONS)}
        )
    assert result.ok, result.error


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_run_whose_tools_pass_the_cap_ends_with_the_error_and_sends_nothing(
    fake_provider: FakeProvider, provider: str
) -> None:
    """Callers of the loop itself (blueprints), and servers that add tools mid-run, meet the cap at the model."""
    model = (
        openai(fake_provider)
        if provider == "openai"
        else AnthropicModel("fake", base_url=fake_provider.url, api_key="k", backoff_seconds=0)
    )
    with anyio.fail_after(30):
        result = await run_loop(Wide, Question(question="q"), model, big_toolbox(MAX_FUNCTIONS + 5))
    assert fake_provider.requests == []
    assert result.termination_reason == "model_error"
    assert result.error is not None and result.error["code"] == "too_many_functions"
    assert result.error["details"]["functions"] == MAX_FUNCTIONS + 6


async def test_a_blueprint_run_that_meets_the_cap_is_the_blueprints_error_not_the_providers(
    fake_provider: FakeProvider,
) -> None:
    """A blueprint run reports a run ended by the cap as `too_many_functions` (HTTP 422: the blueprint's
    tools are to change), not as a model provider's failure (502)."""
    from awb.blueprints.runner import _failure

    with anyio.fail_after(30):
        result = await run_loop(Wide, Question(question="q"), openai(fake_provider), big_toolbox(MAX_FUNCTIONS + 5))
    error = _failure(result, None)  # type: ignore[arg-type]  # a model error never reads the blueprint
    assert isinstance(error, TooManyFunctions) and error.http_status == 422
    assert error.details["functions"] == MAX_FUNCTIONS + 6 and "128" in str(error)
