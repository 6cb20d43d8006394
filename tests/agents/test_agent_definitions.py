"""Agent classes that cannot work fail when they are defined or when the run starts, with one message."""

from __future__ import annotations

import anyio
import pytest
from pydantic import BaseModel

from awb.agents import Agent, run_agent
from awb.agents.errors import AgentDefinitionError
from awb.agents.models import ScriptedModel

from .agent_fixtures import files_server, math_server

pytestmark = pytest.mark.anyio


class Text(BaseModel):
    text: str


class Sums(Agent):
    mode = "sums"
    tools = ("math",)
    Input = Text
    Output = Text


def test_a_subagent_allowed_tools_its_parent_is_not_fails_at_class_definition() -> None:
    with pytest.raises(AgentDefinitionError) as caught:

        class Reader(Agent):
            tools = ("files",)
            Input = Text
            Output = Text
            subagents = (Sums,)

    assert "subagent 'sums' allows tools ['math'] that 'Reader' does not" in caught.value.message
    assert caught.value.details["namespaces"] == ["math"]


def test_input_that_is_not_a_pydantic_model_fails_at_class_definition() -> None:
    with pytest.raises(AgentDefinitionError, match="Input must be a pydantic BaseModel subclass"):

        class Broken(Agent):
            Input = dict  # type: ignore[assignment]
            Output = Text


async def test_an_agent_without_input_and_output_models_fails_when_the_run_starts() -> None:
    class Bare(Agent):
        tools = ()

    with pytest.raises(AgentDefinitionError, match="declares no Input or Output model"):
        await run_agent(Bare, "x", model=ScriptedModel([]), servers={})


async def test_a_namespace_no_server_provides_fails_when_the_run_starts() -> None:
    class Lead(Agent):
        tools = ("files", "math")
        Input = Text
        Output = Text
        subagents = (Sums,)

    with pytest.raises(AgentDefinitionError) as caught:
        await run_agent(Lead, "x", model=ScriptedModel([]), servers={"files": files_server()})
    assert "agent 'Lead' allows tools from ['math'], but no server of that name is configured" in caught.value.message
    assert caught.value.code == "agent_invalid"


async def test_only_servers_some_agent_of_the_run_may_use_are_started() -> None:
    class Reader(Agent):
        tools = ("files",)
        Input = Text
        Output = Text

    broken = "/nonexistent/command/that/would/fail"
    model = ScriptedModel([{"action": "done", "output": {"text": "ok"}}])
    with anyio.fail_after(10):
        result = await run_agent(Reader, "x", model=model, servers={"files": files_server(), "other": broken})
    assert result.ok
    assert {spec.namespace for spec in model.seen[0][1]} == {"files"}


async def test_a_subagents_servers_are_started_for_its_parent() -> None:
    class Lead(Agent):
        tools = ("files", "math")
        Input = Text
        Output = Text
        subagents = (Sums,)

    model = ScriptedModel([{"action": "done", "output": {"text": "ok"}}])
    with anyio.fail_after(10):
        result = await run_agent(Lead, "x", model=model, servers={"files": files_server(), "math": math_server()})
    assert result.ok
    assert {spec.name for spec in model.seen[0][1]} >= {"math.add", "files.read", "sums"}
