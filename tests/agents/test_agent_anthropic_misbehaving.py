"""A Messages server that behaves like real models do: prose, several tool uses, hidden tools,
arguments that are not an object, overload then success, 429 with retry-after, a slow reply."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from awb.agents import ModelSettings, run_agent
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.functions import PROSE_REPLY

from .agent_fixtures import (
    FakeProvider,
    Reader,
    WaitRecorder,
    anthropic_uses,
    files_server,
    math_server,
)

pytestmark = pytest.mark.anyio


def model(provider: FakeProvider) -> AnthropicModel:
    return AnthropicModel("claude-fake", base_url=provider.url, api_key="sk-test-misbehaving", backoff_seconds=0)


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


async def run(provider: FakeProvider, settings: ModelSettings | None = None, adapter: Any = None) -> Any:
    with anyio.fail_after(15):
        return await run_agent(
            Reader,
            "q",
            model=adapter or model(provider),
            servers={"files": files_server(), "math": math_server()},
            model_settings=settings,
        )


async def test_prose_without_a_tool_use_is_fed_back(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"content": [{"type": "text", "text": "I would say 42."}], "usage": {}})
    fake_provider.reply(anthropic_uses(("done", {"answer": "42"})))
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert PROSE_REPLY in user_text(fake_provider.bodies()[1])


async def test_two_tool_uses_run_the_first_and_report_the_second(fake_provider: FakeProvider) -> None:
    fake_provider.reply(anthropic_uses(("files__listing", {}), ("files__read", {"path": "notes.txt"})))
    fake_provider.reply(anthropic_uses(("done", {"answer": "two"})))
    result = await run(fake_provider, ModelSettings(parallel_tool_calls=False))
    assert result.ok
    assert [c.name for c in result.tool_calls] == ["files.listing"]
    assert result.steps[0].not_run == ["files__read"]
    assert "not run: ['files__read']" in user_text(fake_provider.bodies()[1])
    assert fake_provider.bodies()[0]["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


async def test_a_hidden_tool_is_an_observation_not_a_crash(fake_provider: FakeProvider) -> None:
    fake_provider.reply(anthropic_uses(("math__add", {"a": 1, "b": 2})))
    fake_provider.reply(anthropic_uses(("done", {"answer": "a"})))
    result = await run(fake_provider)
    assert result.ok
    assert "no tool named 'math.add' is available" in user_text(fake_provider.bodies()[1])


async def test_arguments_that_are_not_an_object_are_fed_back(fake_provider: FakeProvider) -> None:
    fake_provider.reply(anthropic_uses(("files__read", ["notes.txt"])))
    fake_provider.reply(anthropic_uses(("done", {"answer": "a"})))
    result = await run(fake_provider)
    assert result.ok
    assert "arguments of 'files__read' must be a JSON object" in user_text(fake_provider.bodies()[1])


async def test_overloaded_then_success_counts_both_requests(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529)
    fake_provider.reply(anthropic_uses(("done", {"answer": "a"})))
    result = await run(fake_provider)
    assert result.ok
    assert (result.usage.requests, result.usage.failed_requests) == (2, 1)


async def test_429_retry_after_is_honoured(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"error": {"message": "slow down"}}, status=429, headers={"retry-after": "1"})
    fake_provider.reply(anthropic_uses(("done", {"answer": "a"})))
    adapter = model(fake_provider)
    recorder = WaitRecorder()
    adapter.http.sleep = recorder
    result = await run(fake_provider, adapter=adapter)
    assert result.ok
    assert recorder.waits == [1.0]


async def test_a_reply_slower_than_the_timeout_ends_in_model_error(fake_provider: FakeProvider) -> None:
    fake_provider.reply(anthropic_uses(("done", {"answer": "late"})), hold=True)
    result = await run(fake_provider, ModelSettings(timeout_seconds=0.2, max_retries=0))
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "did not answer within 0.2 s" in result.error["message"]
    assert result.partial is not None


async def test_a_reply_stopped_at_max_tokens_is_fed_back_as_cut_off(fake_provider: FakeProvider) -> None:
    cut = {"content": [{"type": "text", "text": "Let me first think about th"}], "stop_reason": "max_tokens"}
    fake_provider.reply({**cut, "usage": {"input_tokens": 7, "output_tokens": 20}})
    fake_provider.reply(anthropic_uses(("done", {"answer": "short"})))
    result = await run(fake_provider, ModelSettings(max_tokens=20))
    assert (result.termination_reason, result.output) == ("done", {"answer": "short"})
    assert result.steps[0].rejected[0].message.startswith("the reply was cut off at the max_tokens limit (20)")
    assert "cut off at the max_tokens limit (20)" in user_text(fake_provider.bodies()[1])


async def test_a_refusal_ends_the_run_refused_with_the_models_words(fake_provider: FakeProvider) -> None:
    words = {"content": [{"type": "text", "text": "I won't do that."}], "stop_reason": "refusal", "usage": {}}
    fake_provider.reply(words)
    result = await run(fake_provider)
    assert result.termination_reason == "refused"
    assert result.error is not None and result.error["code"] == "refused"
    assert (result.error["message"], len(fake_provider.requests)) == ("the model refused: I won't do that.", 1)
