"""What a run records and tells: steps, events, subagents' models and shared limits, token and cost
budgets, and the partial output of a run that did not finish."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from awb.agents import Agent, Budget, RunEvent, run_agent, run_agent_stream
from awb.agents.actions import Action
from awb.agents.errors import AgentDefinitionError
from awb.agents.models import Prompt, ScriptedModel
from awb.agents.toolbox import ToolSpec
from awb.errors import ConfigError

from .agent_fixtures import files_server, math_server

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    question: str


class Answer(BaseModel):
    answer: str


class Arithmetic(Agent):
    mode = "arithmetic"
    tools = ("math",)
    system_prompt = "Do sums."
    Input = Question
    Output = Answer


class Lead(Agent):
    mode = "lead"
    tools = ("files", "math")
    system_prompt = "Delegate sums."
    Input = Question
    Output = Answer
    subagents = (Arithmetic,)


def servers() -> dict[str, Any]:
    return {"files": files_server(), "math": math_server()}


class PricedModel(ScriptedModel):
    """A scripted model that reports tokens and names a model the price table knows."""

    provider = "openai"
    model = "gpt-4o-mini"

    def __init__(self, script: Any, tokens: tuple[int, int] = (100_000, 10_000)) -> None:
        super().__init__(script)
        self.tokens = tokens

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        self.usage.input_tokens += self.tokens[0]
        self.usage.output_tokens += self.tokens[1]
        return await super().call(prompt, tools)


def delegating(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
    if prompt.system == "Do sums.":
        if "tool_result" not in prompt.body:
            return {"action": "call_tool", "tool": "math.add", "arguments": {"a": 40, "b": 2}}
        return {"action": "done", "output": {"answer": "42"}}
    if "subagent_output" not in prompt.body:
        return {"action": "spawn_subagent", "agent": "arithmetic", "input": "40 + 2"}
    return {"action": "done", "output": {"answer": "lead: 42"}}


async def test_every_step_is_recorded_with_nested_subagent_steps_and_durations() -> None:
    with anyio.fail_after(10):
        result = await run_agent(Lead, "sum", model=ScriptedModel(delegating), servers=servers())
    assert result.ok
    assert [step.action["action"] for step in result.steps if step.action] == ["spawn_subagent", "done"]
    nested = result.steps[0].subagent
    assert nested is not None
    assert [step.action["action"] for step in nested.steps if step.action] == ["call_tool", "done"]
    assert nested.steps[0].tool_call is not None
    assert nested.steps[0].tool_call.name == "math.add"
    assert result.duration_seconds >= sum(step.duration_seconds for step in result.steps) > 0
    assert result.usage.requests == 4


async def test_on_event_sees_steps_replies_tool_calls_subagents_and_done_in_order() -> None:
    events: list[RunEvent] = []
    with anyio.fail_after(10):
        await run_agent(Lead, "sum", model=ScriptedModel(delegating), servers=servers(), on_event=events.append)
    seen = [(event.depth, event.type) for event in events]
    assert seen == [
        (0, "step_started"),
        (0, "model_reply"),
        (0, "subagent"),
        (1, "step_started"),
        (1, "model_reply"),
        (1, "tool_call"),
        (1, "tool_result"),
        (1, "step_started"),
        (1, "model_reply"),
        (1, "done"),
        (0, "subagent"),
        (0, "step_started"),
        (0, "model_reply"),
        (0, "done"),
    ]
    assert events[-1].data["result"]["output"] == {"answer": "lead: 42"}
    assert events[6].data["ok"] is True


async def test_run_agent_stream_yields_the_same_events_ending_with_the_result() -> None:
    types = []
    with anyio.fail_after(10):
        async for event in run_agent_stream(Lead, "sum", model=ScriptedModel(delegating), servers=servers()):
            types.append(event.type)
    assert types[0] == "step_started"
    assert types[-1] == "done"
    assert event.data["result"]["termination_reason"] == "done"


async def test_a_subagent_uses_its_own_model() -> None:
    own = ScriptedModel(
        [
            {"action": "call_tool", "tool": "math.add", "arguments": {"a": 1, "b": 1}},
            {"action": "done", "output": {"answer": "2"}},
        ]
    )

    class Precise(Arithmetic):
        mode = "precise"
        model = own

    class Boss(Lead):
        subagents = (Precise,)

    parent = ScriptedModel(
        [
            {"action": "spawn_subagent", "agent": "precise", "input": "1 + 1"},
            {"action": "done", "output": {"answer": "2"}},
        ]
    )
    with anyio.fail_after(10):
        result = await run_agent(Boss, "sum", model=parent, servers=servers())
    assert result.ok
    assert (len(parent.seen), len(own.seen)) == (2, 2)
    assert {spec.name for spec in own.seen[0][1]} == {"math.add"}


async def test_subagent_tool_calls_count_toward_the_parents_limit() -> None:
    class Frugal(Lead):
        budget = Budget(max_tool_calls=1)

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        if prompt.system == "Do sums.":
            return {"action": "call_tool", "tool": "math.add", "arguments": {"a": 1, "b": 1}}
        if "subagent_error" not in prompt.body:
            return {"action": "spawn_subagent", "agent": "arithmetic", "input": "sum"}
        return {"action": "call_tool", "tool": "files.listing"}

    with anyio.fail_after(10):
        result = await run_agent(Frugal, "sum", model=ScriptedModel(script), servers=servers())
    [call] = result.subagent_calls
    assert call.termination_reason == "max_tool_calls"
    assert len(call.tool_calls) == 1
    assert result.termination_reason == "max_tool_calls"
    assert result.tool_calls == []


async def test_a_subagent_stopped_by_the_runs_spent_tool_calls_ends_the_run_as_a_whole() -> None:
    class Delegating(Lead):
        budget = Budget(max_tool_calls=2, max_iterations=10)

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        if prompt.system == "Do sums.":
            return {"action": "call_tool", "tool": "math.add", "arguments": {"a": 1, "b": 1}}
        return {"action": "spawn_subagent", "agent": "arithmetic", "input": "sum"}

    model = ScriptedModel(script)
    with anyio.fail_after(10):
        result = await run_agent(Delegating, "sum", model=model, servers=servers())
    # Not a lead spawning members that can call nothing, one model request after another, until its
    # iterations run out: the budget is the run's.
    [call] = result.subagent_calls
    assert call.termination_reason == "max_tool_calls" and len(call.tool_calls) == 2
    assert result.termination_reason == "max_tool_calls"
    assert result.iterations == 1
    assert len(model.seen) == 4  # the lead's spawn, the member's two calls and the one refused


async def test_a_token_budget_ends_the_run_with_the_best_partial_output() -> None:
    class Thrifty(Lead):
        budget = Budget(max_total_tokens=150_000)

    model = PricedModel(
        [
            {"action": "done", "output": {"wrong": "shape"}},
            {"action": "call_tool", "tool": "files.read", "arguments": {"path": "notes.txt"}},
            {"action": "call_tool", "tool": "files.listing"},
        ]
    )
    with anyio.fail_after(10):
        result = await run_agent(Thrifty, "q", model=model, servers=servers())
    assert result.termination_reason == "max_tokens"
    assert result.error is not None
    assert result.error["details"]["limit"] == "max_total_tokens"
    assert result.output is None
    assert result.partial is not None
    assert result.partial.last_output == {"wrong": "shape"}
    assert result.partial.valid is False
    assert any("the answer is 42" in line for line in result.partial.observations)


async def test_a_budget_spent_by_a_rejected_reply_ends_the_run_before_the_correction_is_asked() -> None:
    class Thrifty(Lead):
        budget = Budget(max_total_tokens=100_000)
        output_retries = 5

    model = PricedModel(lambda prompt, tools: {"action": "dance"})
    with anyio.fail_after(10):
        result = await run_agent(Thrifty, "q", model=model, servers=servers())
    assert result.termination_reason == "max_tokens"
    assert (result.usage.requests, result.usage.total_tokens) == (1, 110_000)
    assert [rejected.code for rejected in result.steps[0].rejected] == ["malformed_action"]


async def test_max_cost_ends_the_run_and_usage_reports_the_cost() -> None:
    class Capped(Lead):
        budget = Budget(max_cost_usd=0.02)

    model = PricedModel(lambda prompt, tools: {"action": "call_tool", "tool": "files.listing"})
    with anyio.fail_after(10):
        result = await run_agent(Capped, "q", model=model, servers=servers())
    assert result.termination_reason == "max_cost"
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output: $0.021 per call here.
    assert result.usage.cost_usd == pytest.approx(0.021)
    assert result.iterations == 1


async def test_max_cost_with_a_model_the_price_table_does_not_know_is_refused_up_front() -> None:
    class Capped(Lead):
        budget = Budget(max_cost_usd=1)

    with pytest.raises(ConfigError, match="price table does not know"):
        await run_agent(Capped, "q", model=ScriptedModel([]), servers=servers())


async def test_input_token_budget_counts_subagent_requests_too() -> None:
    class Thrifty(Lead):
        budget = Budget(max_input_tokens=250_000)

    with anyio.fail_after(10):
        result = await run_agent(Thrifty, "q", model=PricedModel(delegating), servers=servers())
    assert result.termination_reason == "max_tokens"
    assert result.usage.input_tokens == 300_000
    assert result.subagent_calls[0].usage.input_tokens == 200_000


async def test_tool_errors_keep_their_code_and_message() -> None:
    model = ScriptedModel(
        [
            {"action": "call_tool", "tool": "files.read", "arguments": {"path": "missing.txt"}},
            {"action": "done", "output": {"answer": "none"}},
        ]
    )
    with anyio.fail_after(10):
        result = await run_agent(Lead, "q", model=model, servers=servers())
    [call] = result.tool_calls
    assert call.error is not None
    assert call.error.code == "tool_error"
    assert "no such file: missing.txt" in call.error.message


async def test_leaving_run_agent_stream_early_stops_the_run() -> None:
    seen = []
    model = ScriptedModel(lambda prompt, tools: {"action": "call_tool", "tool": "files.listing"})
    with anyio.fail_after(10):
        async with aclosing(run_agent_stream(Lead, "sum", model=model, servers=servers())) as events:
            async for event in events:
                seen.append(event.type)
                if event.type == "tool_result":
                    break
    assert seen == ["step_started", "model_reply", "tool_call", "tool_result"]
    assert len(model.seen) <= 2


async def test_run_agent_stream_raises_errors_from_before_the_start_as_they_are() -> None:
    class Bare(Agent):
        tools = ()

    with anyio.fail_after(10), pytest.raises(AgentDefinitionError):
        async for _ in run_agent_stream(Bare, "x", model=ScriptedModel([]), servers={}):
            pass


async def test_max_output_tokens_ends_the_run_before_the_next_request() -> None:
    class Terse(Lead):
        budget = Budget(max_output_tokens=15_000)

    model = PricedModel(lambda prompt, tools: {"action": "call_tool", "tool": "files.listing"})
    with anyio.fail_after(10):
        result = await run_agent(Terse, "q", model=model, servers=servers())
    assert result.termination_reason == "max_tokens"
    assert result.error is not None
    assert result.error["details"] == {"limit": "max_output_tokens", "max": 15_000, "used": 20_000}
    assert result.usage.requests == 2
    assert len(result.tool_calls) == 2
