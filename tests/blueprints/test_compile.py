"""Compiling: what each execution mode becomes, and what a server refuses to compile."""

from __future__ import annotations

import pytest

from awb.blueprints.compile import RuntimeOptions, compile_blueprint
from awb.blueprints.errors import BlueprintInvalid
from awb.blueprints.schema import validate_blueprint

HEAD = {"provider": "openai", "model": "gpt-4o", "system_prompt": "Be helpful.", "temperature": 0.1}


def test_team_compiles_to_a_coordinator_whose_members_are_subagents() -> None:
    members = [
        {"name": "searcher", "role": "Finds sources", "instructions": "Search."},
        {"name": "writer", "role": "Writes", "instructions": "Write."},
    ]
    data = {"head": HEAD, "arms": [{"type": "tavily_search"}], "legs": {"mode": "team", "members": members}}
    compiled = compile_blueprint(validate_blueprint(data), RuntimeOptions())
    (coordinator,) = compiled.agents
    assert coordinator.mode == "coordinator"
    assert [sub.mode for sub in coordinator.subagents] == ["searcher", "writer"]
    assert all(sub.tools == ("tavily",) for sub in coordinator.subagents)
    assert "searcher: Finds sources" in coordinator.system_prompt
    assert compiled.settings == {"temperature": 0.1} and compiled.model_spec == "openai:gpt-4o"


def test_spine_limits_become_each_agents_budget() -> None:
    data = {"head": HEAD, "legs": {"mode": "single_agent"}, "spine": {"max_tool_calls": 4, "timeout_seconds": 9}}
    (agent,) = compile_blueprint(validate_blueprint(data), RuntimeOptions()).agents
    assert (agent.budget.max_tool_calls, agent.budget.timeout_seconds) == (4, 9)


def test_mcp_commands_and_workbench_arms_need_the_servers_consent() -> None:
    arms = [{"type": "mcp", "name": "local", "command": ["rm", "-rf", "/"]}, {"type": "workbench"}]
    blueprint = validate_blueprint({"head": HEAD, "legs": {"mode": "single_agent"}, "arms": arms})
    with pytest.raises(BlueprintInvalid) as caught:
        compile_blueprint(blueprint, RuntimeOptions())
    assert [e["path"] for e in caught.value.details["errors"]] == ["arms[0].command", "arms[1]"]
    assert compile_blueprint(
        blueprint, RuntimeOptions(allow_mcp_commands=True, workbench_target="http://127.0.0.1:9/mcp")
    )
