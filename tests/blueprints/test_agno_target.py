"""The Agno target against a fake OpenAI-compatible server and a fake Tavily on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from api.fakes import FakeServer, serving
from awb.agents.errors import ModelError
from awb.blueprints.agno_target import compile_to_agno, run_agno
from awb.blueprints.compile import RuntimeOptions
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import validate_blueprint

pytestmark = pytest.mark.anyio


def _completion(message: dict[str, Any]) -> tuple[int, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini", "choices": [choice]}
    return 200, body | {"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def _text(content: str) -> tuple[int, Any]:
    return _completion({"content": content})


def _search(query: str) -> tuple[int, Any]:
    call = {
        "id": "t1",
        "type": "function",
        "function": {"name": "tavily_search", "arguments": json.dumps({"query": query})},
    }
    return _completion({"content": None, "tool_calls": [call]})


@pytest.fixture
def fakes() -> Iterator[tuple[FakeServer, FakeServer]]:
    with serving(FakeServer()) as model, serving(FakeServer()) as tavily:
        yield model, tavily


def _blueprint(**parts: Any) -> Any:
    data: dict[str, Any] = {
        "name": "scout",
        "head": {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "system_prompt": "Be brief.",
            "temperature": 0.4,
            "max_tokens": 64,
        },
        "legs": {"mode": "single_agent"},
    }
    return validate_blueprint(data | parts)


async def test_agno_agent_sends_the_heads_settings_and_uses_the_tavily_arm(
    fakes: tuple[FakeServer, FakeServer],
) -> None:
    model, tavily = fakes
    model.queue(_search("agno"), _text("Found it."))
    tavily.queue(
        (
            200,
            {
                "results": [
                    {"title": "a", "url": "https://docs.example.com/a", "content": "x"},
                    {"title": "b", "url": "https://other.test/b", "content": "y"},
                ]
            },
        )
    )
    blueprint = _blueprint(arms=[{"type": "tavily_search"}], spine={"allowed_domains": ["example.com"]})
    journal = RunJournal("run", blueprint.spine.max_tool_calls)
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "sk-test", "TAVILY_API_KEY": "tvly-test"}
    target = compile_to_agno(blueprint, RuntimeOptions(environ=env, tavily_base_url=tavily.url), journal=journal)
    assert type(target).__name__ == "Agent" and os.environ["AGNO_TELEMETRY"] == "false" and target.telemetry is False
    with anyio.fail_after(60):
        answer = await run_agno(target, blueprint, "search agno", journal=journal)
    assert answer == "Found it."
    first = model.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert (first["body"]["model"], first["body"]["temperature"], first["body"]["max_tokens"]) == (
        "gpt-4o-mini",
        0.4,
        64,
    )
    assert "Be brief." in json.dumps(first["body"]["messages"])
    assert tavily.requests[0]["body"]["include_domains"] == ["example.com"]
    assert [e.kind for e in journal.entries] == ["guardrail_violation", "tool_call"]
    assert "docs.example.com" in json.dumps(model.requests[1]["body"]) and "other.test" not in json.dumps(
        model.requests[1]["body"]
    )


async def test_agno_team_and_workflow_have_the_blueprints_members_and_steps(
    fakes: tuple[FakeServer, FakeServer],
) -> None:
    model, _ = fakes
    env = {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "sk-test"}
    team_legs = {"mode": "team", "members": [{"name": "critic", "role": "Critiques", "instructions": "Find flaws."}]}
    team_bp = _blueprint(legs=team_legs)
    team = compile_to_agno(team_bp, RuntimeOptions(environ=env), journal=RunJournal("t", 10))
    assert type(team).__name__ == "Team" and [m.name for m in team.members] == ["critic"]
    flow_legs = {
        "mode": "workflow",
        "steps": [{"name": "a", "instructions": "Do A."}, {"name": "b", "instructions": "Do B."}],
    }
    flow_bp = _blueprint(legs=flow_legs)
    flow = compile_to_agno(flow_bp, RuntimeOptions(environ=env), journal=RunJournal("w", 10))
    assert type(flow).__name__ == "Workflow" and [s.name for s in flow.steps] == ["a", "b"]
    model.queue(_text("after A"), _text("after B"))
    with anyio.fail_after(60):
        answer = await run_agno(flow, flow_bp, "start", journal=RunJournal("w", 10))
    assert answer == "after B"
    assert "after A" in json.dumps(model.requests[1]["body"]["messages"])


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5")])
def test_the_hosted_api_without_its_key_is_refused_before_agno_asks_it(provider: str, model: str) -> None:
    head = {"provider": provider, "model": model, "system_prompt": "Be brief."}
    blueprint = _blueprint(head=head)
    with pytest.raises(ModelError, match=f"{provider.upper()}_API_KEY is not set"):
        compile_to_agno(blueprint, RuntimeOptions(environ={}), journal=RunJournal("k", 10))
    # A server of one's own is taken without a key.
    own = {f"{provider.upper()}_BASE_URL": "http://127.0.0.1:9/v1"}
    assert compile_to_agno(blueprint, RuntimeOptions(environ=own), journal=RunJournal("k", 10)) is not None
