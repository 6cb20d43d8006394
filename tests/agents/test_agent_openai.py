"""The real OpenAI-compatible adapter against a fake chat-completions server on loopback."""

from __future__ import annotations

import json
import logging
import ssl
from typing import Any

import anyio
import pytest

from awb.agents import run_agent
from awb.agents.models.functions import PROSE_REPLY
from awb.agents.models.openai import OpenAIModel

from .agent_fixtures import FakeProvider, Reader, files_server

pytestmark = pytest.mark.anyio

KEY = "sk-test-very-secret-key-123"


def tool_call(name: str, arguments: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}],
    }
    return {"choices": [{"message": message}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}


def text_reply(content: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def model(provider: FakeProvider, **options: Any) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=provider.url, api_key=KEY, backoff_seconds=0, **options)


async def test_openai_adapter_turns_tool_calls_into_actions_and_finishes(fake_provider: FakeProvider) -> None:
    fake_provider.reply(tool_call("files__read", json.dumps({"path": "notes.txt"})))
    fake_provider.reply(tool_call("done", json.dumps({"answer": "42"})))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert [c.name for c in result.tool_calls] == ["files.read"]
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (20, 6, 2)
    first = fake_provider.requests[0]
    assert first["path"] == "/chat/completions"
    assert first["headers"]["Authorization"] == f"Bearer {KEY}"
    functions = {t["function"]["name"] for t in first["body"]["tools"]}
    assert functions == {"done", "files__read", "files__listing"}
    assert "the answer is 42" in fake_provider.requests[1]["body"]["messages"][1]["content"]


async def test_openai_json_fallback_reads_one_action_from_the_reply_text(fake_provider: FakeProvider) -> None:
    fake_provider.reply(text_reply('{"action": "call_tool", "tool": "files.listing", "arguments": {}}'))
    fake_provider.reply(text_reply('```json\n{"action": "done", "output": {"answer": "two files"}}\n```'))
    with anyio.fail_after(10):
        result = await run_agent(
            Reader, "q", model=model(fake_provider, native_tools=False), servers={"files": files_server()}
        )
    assert (result.termination_reason, result.output) == ("done", {"answer": "two files"})
    first = fake_provider.requests[0]["body"]
    assert "tools" not in first
    assert "files.listing" in first["messages"][1]["content"]


async def test_openai_malformed_json_is_fed_back_and_retried(fake_provider: FakeProvider) -> None:
    fake_provider.reply(tool_call("files__read", '{"path": "notes.txt"'))
    fake_provider.reply(text_reply("I think the answer is 42"))
    fake_provider.reply(tool_call("done", '{"answer": "42"}'))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert result.tool_calls == []
    feedback = fake_provider.requests[1]["body"]["messages"][1]["content"]
    assert "arguments of 'files__read' are not valid JSON" in feedback


async def test_openai_server_error_is_retried_then_reported_as_model_error(fake_provider: FakeProvider) -> None:
    for _ in range(3):
        fake_provider.reply({"error": {"message": "the engine is overloaded"}}, status=500)
    with anyio.fail_after(10):
        result = await run_agent(
            Reader, "q", model=model(fake_provider, max_retries=2), servers={"files": files_server()}
        )
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "HTTP 500: the engine is overloaded" in result.error["message"]
    assert len(fake_provider.requests) == 3


async def test_openai_transient_server_error_is_retried_and_the_run_succeeds(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"error": {"message": "try again"}}, status=503)
    fake_provider.reply(tool_call("done", '{"answer": "fine"}'))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "fine"})


async def test_api_key_never_appears_in_results_or_logs(
    fake_provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    fake_provider.reply({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status=401)
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "Incorrect API key provided: ***" in result.error["message"]
    assert len(fake_provider.requests) == 1
    assert KEY not in result.model_dump_json()
    assert KEY not in caplog.text
    assert KEY not in repr(model(fake_provider))


@pytest.mark.parametrize(
    "text",
    [
        '<think>The file says 42, so I am done.</think>\n{"action": "done", "output": {"answer": "42"}}',
        'Here is my action:\n```json\n{"action": "done", "output": {"answer": "42"}}\n```\nThat finishes it.',
        'I have the answer {from notes.txt}. {"action": "done", "output": {"answer": "42"}} I hope this helps.',
    ],
    ids=["thinking-first", "fence-inside-prose", "object-inside-prose"],
)
async def test_openai_json_fallback_finds_the_action_in_what_models_write_around_it(
    fake_provider: FakeProvider, text: str
) -> None:
    fake_provider.reply(text_reply(text))
    with anyio.fail_after(10):
        result = await run_agent(
            Reader, "q", model=model(fake_provider, native_tools=False), servers={"files": files_server()}
        )
    assert (result.termination_reason, result.output, len(fake_provider.requests)) == ("done", {"answer": "42"}, 1)


async def test_a_thinking_block_before_prose_is_still_prose_to_a_model_offered_functions(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.reply(text_reply("<think>hmm</think>\nThe answer is 42."))
    fake_provider.reply(text_reply('<think>right</think>{"action": "done", "output": {"answer": "42"}}'))
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers={"files": files_server()})
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert result.steps[0].rejected[0].message == PROSE_REPLY


async def test_a_models_requests_share_one_tls_context(fake_provider: FakeProvider, monkeypatch: Any) -> None:
    """httpx loads the CA bundle into a new TLS context for every client (20-25 ms of CPU), and the model
    makes a client for each request: a run's every model request paid for it."""
    made: list[int] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    chat = model(fake_provider)
    with anyio.fail_after(10):
        for _ in range(3):
            fake_provider.reply(text_reply("hi"))
            await chat.http.post("/chat/completions", {"model": "fake-model", "messages": []})
    assert len(fake_provider.requests) == 3
    assert len(made) <= 1  # none when an earlier test of the process made it
