"""An agent of the loop with `code_mode = True` runs `run_code` plans over its own tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from awb.agents import Agent, run_agent
from awb.agents.budget import Budget
from awb.agents.models import ScriptedModel
from awb.agents.models.base import Prompt
from awb.agents.toolbox import ToolSpec

from .test_task import servers

pytestmark = pytest.mark.anyio


class Query(BaseModel):
    label: str


class Count(BaseModel):
    count: int


class Counter(Agent):
    mode = "counter"
    tools = ("mail",)
    code_mode = True
    Input = Query
    Output = Count
    budget = Budget(max_tool_calls=5)


async def test_a_code_mode_agent_runs_a_plan_over_its_tools() -> None:
    plan = 'found = await mail.search_mail(query="x", label="billing")\nreturn len(found["messages"])'
    model = ScriptedModel([{"action": "run_code", "code": plan}, {"action": "done", "output": {"count": 1000}}])
    with anyio.fail_after(30):
        result = await run_agent(Counter, {"label": "billing"}, model=model, servers=servers())
    assert result.termination_reason == "done"
    assert '"result": 1000' in model.seen[1][0].body
    assert result.steps[0].tool_call is not None and result.steps[0].tool_call.name == "run_code"


async def test_a_plan_cannot_reach_a_server_the_agent_is_not_allowed() -> None:
    model = ScriptedModel(
        [
            {"action": "run_code", "code": "return await chat.post_message(channel='c', text='t')"},
            {"action": "done", "output": {"count": 0}},
        ]
    )
    with anyio.fail_after(30):
        await run_agent(Counter, {"label": "x"}, model=model, servers=servers())
    assert "NameError" in model.seen[1][0].body


async def test_plan_calls_count_toward_the_agents_tool_call_budget() -> None:
    plan = "for i in range(10):\n    await mail.search_mail(query='x')"
    script: list[dict[str, Any]] = [{"action": "run_code", "code": plan}, {"action": "done", "output": {"count": 0}}]
    with anyio.fail_after(30):
        result = await run_agent(Counter, {"label": "x"}, model=ScriptedModel(script), servers=servers())
    assert result.termination_reason == "max_tool_calls"


async def test_an_agent_without_code_mode_is_told_run_code_is_not_available() -> None:
    class Plain(Counter):
        mode = "plain"
        code_mode = False

    model = ScriptedModel([{"action": "run_code", "code": "return 1"}, {"action": "done", "output": {"count": 0}}])
    with anyio.fail_after(30):
        await run_agent(Plain, {"label": "x"}, model=model, servers=servers())
    assert "run_code is not available" in model.seen[1][0].body


async def test_a_plan_stopped_by_the_tool_call_limit_is_recorded_with_the_calls_it_made() -> None:
    """The plan's step had no tool call and the partial result no observation, as if the plan had done nothing."""
    plan = "for i in range(10):\n    await mail.search_mail(query='x', label='inbox')"
    script: list[dict[str, Any]] = [{"action": "run_code", "code": plan}, {"action": "done", "output": {"count": 0}}]
    with anyio.fail_after(30):
        result = await run_agent(Counter, {"label": "x"}, model=ScriptedModel(script), servers=servers())
    assert result.termination_reason == "max_tool_calls"
    record = result.steps[0].tool_call
    assert record is not None and record.name == "run_code" and not record.ok
    assert record.error is not None and record.error.code == "limit_exceeded"
    assert result.partial is not None
    assert '"calls": ["mail.search_mail ×5 ok"]' in result.partial.observations[-1]
    assert '"tool_calls": 5' in result.partial.observations[-1]


async def test_a_subagents_plan_reaches_only_the_servers_the_subagent_is_allowed() -> None:
    """The plan runner serves the parent's tools; a subagent's plan could post to `chat`, which only its
    parent may use."""

    class MailOnly(Agent):
        mode = "mail_only"
        tools = ("mail",)
        system_prompt = "sub"
        code_mode = True
        Input = Query
        Output = Count

    class Both(Agent):
        mode = "both"
        tools = ("mail", "chat")
        code_mode = True
        Input = Query
        Output = Count
        subagents = (MailOnly,)

    posted = "return await chat.post_message(channel='c', text='from the subagent')"
    counted = "found = await mail.search_mail(query='x')\nreturn found['total']"
    sub_script = iter([{"action": "run_code", "code": posted}, {"action": "run_code", "code": counted}])

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        if prompt.system == "sub":
            return next(sub_script, {"action": "done", "output": {"count": 1}})
        if "subagent_output" in prompt.body:
            return {"action": "done", "output": {"count": 0}}
        return {"action": "spawn_subagent", "agent": "mail_only", "input": {"label": "x"}}

    with anyio.fail_after(30):
        result = await run_agent(Both, {"label": "x"}, model=ScriptedModel(script), servers=servers())
    assert result.termination_reason == "done"
    steps = result.subagent_calls[0].steps
    plans = [step.tool_call for step in steps if step.tool_call is not None]
    assert [(plan.name, plan.ok) for plan in plans] == [("run_code", False), ("run_code", True)]
    assert plans[0].error is not None and "chat" in plans[0].error.message


def _spawning(sub_script: list[dict[str, Any]]) -> Any:
    """A script whose lead spawns `mail_only` once and then finishes; the subagent follows `sub_script`."""
    replies = iter(sub_script)

    def script(prompt: Prompt, tools: Sequence[ToolSpec]) -> dict[str, Any]:
        if prompt.system == "sub":
            return next(replies, {"action": "done", "output": {"count": 1}})
        if "subagent_output" in prompt.body:
            return {"action": "done", "output": {"count": 0}}
        return {"action": "spawn_subagent", "agent": "mail_only", "input": {"label": "x"}}

    return script


async def test_a_subagent_without_code_mode_gets_no_run_code_from_a_parent_that_has_it() -> None:
    """A subagent's tools are what it declares: a code-mode parent does not hand it `run_code`."""

    class MailOnly(Agent):
        mode = "mail_only"
        tools = ("mail",)
        system_prompt = "sub"
        Input = Query
        Output = Count

    class Lead(Agent):
        mode = "lead"
        tools = ("mail",)
        code_mode = True
        Input = Query
        Output = Count
        subagents = (MailOnly,)

    model = ScriptedModel(_spawning([{"action": "run_code", "code": "return 1"}]))
    with anyio.fail_after(30):
        result = await run_agent(Lead, {"label": "x"}, model=model, servers=servers())
    assert result.termination_reason == "done"
    offered = {prompt.system: prompt.code_mode for prompt, _ in model.seen}
    assert offered == {"": True, "sub": False}
    steps = result.subagent_calls[0].steps
    assert [step.tool_call for step in steps] == [None, None]
    sub_prompts = [prompt.body for prompt, _ in model.seen if prompt.system == "sub"]
    assert "run_code is not available" in sub_prompts[1]


async def test_a_subagent_with_code_mode_gets_run_code_under_a_parent_without_it() -> None:
    class MailOnly(Agent):
        mode = "mail_only"
        tools = ("mail",)
        system_prompt = "sub"
        code_mode = True
        Input = Query
        Output = Count

    class Lead(Agent):
        mode = "lead"
        tools = ("mail",)
        Input = Query
        Output = Count
        subagents = (MailOnly,)

    counted = "found = await mail.search_mail(query='x')\nreturn found['total']"
    model = ScriptedModel(_spawning([{"action": "run_code", "code": counted}]))
    with anyio.fail_after(30):
        result = await run_agent(Lead, {"label": "x"}, model=model, servers=servers())
    assert result.termination_reason == "done"
    offered = {prompt.system: prompt.code_mode for prompt, _ in model.seen}
    assert offered == {"": False, "sub": True}
    plan = result.subagent_calls[0].steps[0].tool_call
    assert plan is not None and (plan.name, plan.ok) == ("run_code", True)
