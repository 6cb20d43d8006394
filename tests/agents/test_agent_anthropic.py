"""The real Anthropic adapter against a fake Messages endpoint on loopback."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awb.agents import run_agent
from awb.agents.models.anthropic import AnthropicModel

from .agent_fixtures import FakeProvider, Reader, files_server

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-secret-456"


def tool_use(name: str, arguments: Any) -> dict[str, Any]:
    content = [
        {"type": "text", "text": "Let me see."},
        {"type": "tool_use", "id": "t1", "name": name, "input": arguments},
    ]
    return {"content": content, "stop_reason": "tool_use", "usage": {"input_tokens": 7, "output_tokens": 2}}


def model(provider: FakeProvider, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-fake", base_url=provider.url, api_key=KEY, backoff_seconds=0, **options)


async def test_anthropic_adapter_turns_tool_use_into_actions_and_finishes(fake_provider: FakeProvider) -> None:
    fake_provider.reply(tool_use("files__read", {"path": "notes.txt"}))
    fake_provider.reply(tool_use("done", {"answer": "42"}))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert [c.name for c in result.tool_calls] == ["files.read"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (14, 4)
    first = fake_provider.requests[0]
    assert first["path"] == "/v1/messages"
    assert first["headers"]["x-api-key"] == KEY
    assert first["headers"]["anthropic-version"] == "2023-06-01"
    assert first["body"]["system"] == "Read documents and answer."
    assert {t["name"] for t in first["body"]["tools"]} == {"done", "files__read", "files__listing"}


async def test_anthropic_malformed_reply_is_fed_back_and_retried(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"content": [{"type": "text", "text": "{not json"}]})
    fake_provider.reply(tool_use("done", {"answer": "ok"}))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "ok"})
    assert "malformed_action" in fake_provider.requests[1]["body"]["messages"][0]["content"]


async def test_anthropic_server_error_is_retried_then_reported_as_model_error(fake_provider: FakeProvider) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    for _ in range(2):
        fake_provider.reply(overloaded, status=529)
    with anyio.fail_after(10):
        result = await run_agent(
            Reader, "q", model=model(fake_provider, max_retries=1), servers={"files": files_server()}
        )
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "HTTP 529: Overloaded" in result.error["message"]
    assert len(fake_provider.requests) == 2
    assert KEY not in result.model_dump_json()
