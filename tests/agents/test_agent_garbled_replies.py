"""Provider replies that are JSON but not the shape the adapters expect, JSON nested past the decoder's
stack, and usage counts that are not counts: each ends the run (or the step) with a structured error,
never an exception out of `run_agent`."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from typing import Any

import anyio
import pytest

from awb.agents import ModelSettings, run_agent
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.openai import OpenAIModel

from .agent_fixtures import FakeProvider, Reader, anthropic_uses, files_server, openai_calls

pytestmark = pytest.mark.anyio

#: Deeper than CPython's json decoder can go (it raises RecursionError, not ValueError).
DEEP = "[" * 100_000 + "]" * 100_000
DONE = openai_calls(("done", '{"answer": "a"}'))


async def run(provider: FakeProvider, adapter: Any = None) -> Any:
    adapter = adapter or OpenAIModel("fake-model", base_url=provider.url, api_key="sk-test", backoff_seconds=0)
    with anyio.fail_after(15):
        return await run_agent(
            Reader, "q", model=adapter, servers={"files": files_server()}, model_settings=ModelSettings(max_retries=0)
        )


def chat(message: Any, usage: Any = None) -> dict[str, Any]:
    return {"choices": [{"message": message}], "usage": usage}


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (chat("not an object"), "no choices[0].message"),
        ({"choices": "abc"}, "no choices[0].message"),
        (chat({"tool_calls": 5}), "neither a tool call nor text"),
        (chat({"tool_calls": [{"function": "files__read"}]}), "neither a tool call nor text"),
        (chat({"tool_calls": [{"function": {"name": "files__read", "arguments": DEEP}}]}), "not valid JSON"),
    ],
)
async def test_a_reply_of_the_wrong_shape_is_a_structured_error(
    fake_provider: FakeProvider, reply: dict[str, Any], message: str
) -> None:
    for _ in range(3):
        fake_provider.reply(reply)
    result = await run(fake_provider)
    assert result.termination_reason in ("model_error", "output_invalid")
    assert message in str(result.error) + str([r.message for s in result.steps for r in s.rejected])


async def test_a_reply_body_nested_past_the_decoder_is_a_model_error(fake_provider: FakeProvider) -> None:
    fake_provider.reply(DEEP)
    result = await run(fake_provider)
    assert result.termination_reason == "model_error"
    assert result.error is not None and "not JSON" in result.error["message"]


async def test_an_error_body_nested_past_the_decoder_is_a_model_error(fake_provider: FakeProvider) -> None:
    fake_provider.reply(DEEP, status=401)
    result = await run(fake_provider)
    assert result.termination_reason == "model_error"
    assert result.error is not None and result.error["details"]["status"] == 401


@pytest.mark.parametrize("count", ["abc", [1], -100_000, 1e999, True])
async def test_usage_that_is_not_a_count_is_estimated(fake_provider: FakeProvider, count: Any) -> None:
    fake_provider.reply({**DONE, "usage": {"prompt_tokens": count, "completion_tokens": 3}})
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "a"})
    assert (result.usage.output_tokens, result.usage.estimated_replies) == (3, 1)
    assert 0 < result.usage.input_tokens < 100_000


async def test_anthropic_usage_that_is_not_a_count_is_estimated(fake_provider: FakeProvider) -> None:
    reply = anthropic_uses(("done", {"answer": "a"}))
    reply["usage"] = {"input_tokens": "many", "output_tokens": -5}
    fake_provider.reply(reply)
    result = await run(fake_provider, AnthropicModel("claude-fake", base_url=fake_provider.url, api_key="k"))
    assert (result.termination_reason, result.output) == ("done", {"answer": "a"})
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.usage.estimated_replies == 1


async def test_a_model_that_raises_something_unexpected_ends_the_run_in_model_error() -> None:
    class Broken:
        def __init__(self) -> None:
            from awb.agents.result import Usage

            self.usage = Usage()

        async def call(self, prompt: Any, tools: Any) -> Any:
            raise KeyError("choices")

    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=Broken(), servers={"files": files_server()})
    assert result.termination_reason == "model_error"
    assert result.error is not None and "KeyError" in result.error["message"]


async def test_a_reply_over_the_size_limit_is_cut_off_and_not_retried(fake_provider: FakeProvider) -> None:
    huge = {**DONE, "padding": "x" * 200_000}
    fake_provider.reply(huge)
    fake_provider.reply(huge)
    adapter = OpenAIModel("fake-model", base_url=fake_provider.url, api_key="sk-test", backoff_seconds=0)
    adapter.http.max_reply_bytes = 100_000
    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=adapter, servers={"files": files_server()})
    assert result.termination_reason == "model_error"
    assert result.error is not None and "over the 100000-byte limit" in result.error["message"]
    assert (result.usage.requests, result.usage.failed_requests) == (1, 1)


async def test_a_compressed_reply_is_read_decoded(fake_provider: FakeProvider) -> None:
    fake_provider.reply(gzip.compress(json.dumps(DONE).encode()), headers={"Content-Encoding": "gzip"})
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "a"})


async def test_a_compressed_reply_that_inflates_past_the_limit_is_cut_off(fake_provider: FakeProvider) -> None:
    bomb = gzip.compress(b'{"padding": "' + b"0" * 64_000_000 + b'"}')
    assert len(bomb) < 100_000
    fake_provider.reply(bomb, headers={"Content-Encoding": "gzip"})
    result = await run(fake_provider)
    assert result.termination_reason == "model_error"
    assert result.error is not None and "-byte limit" in result.error["message"]


async def test_a_compressed_reply_is_inflated_no_further_than_the_limit(fake_provider: FakeProvider) -> None:
    """httpx inflates each chunk whole: 64 KB of gzip was 64 MB in memory before it could be counted."""
    fake_provider.reply(gzip.compress(b"0" * 64_000_000), headers={"Content-Encoding": "gzip"})
    adapter = OpenAIModel("fake-model", base_url=fake_provider.url, api_key="sk-test", backoff_seconds=0)
    adapter.http.max_reply_bytes = 1_000_000
    tracemalloc.start()
    try:
        result = await run(fake_provider, adapter)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.error is not None and "over the 1000000-byte limit" in result.error["message"]
    assert peak < 4_000_000


async def test_a_reply_in_an_encoding_not_asked_for_is_refused(fake_provider: FakeProvider) -> None:
    fake_provider.reply(b"\x1b\x00\x00", headers={"Content-Encoding": "br"})
    result = await run(fake_provider)
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "provider reply is br-encoded, where gzip, deflate or none was asked for" in result.error["message"]
    headers = {name.lower(): value for name, value in fake_provider.requests[0]["headers"].items()}
    assert headers["accept-encoding"] == "gzip, deflate"


async def test_a_raw_deflate_reply_is_read_as_httpx_reads_it(fake_provider: FakeProvider) -> None:
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    fake_provider.reply(raw.compress(json.dumps(DONE).encode()) + raw.flush(), headers={"Content-Encoding": "deflate"})
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "a"})


async def test_an_error_in_a_200_reply_is_the_providers_error_and_a_transient_one_is_retried(
    fake_provider: FakeProvider,
) -> None:
    # Routers answer 200 with the upstream's error in the body (OpenRouter's rate limits, for one).
    fake_provider.reply({"error": {"message": "upstream rate limited", "code": 429}})
    fake_provider.reply(DONE)
    adapter = OpenAIModel("fake-model", base_url=fake_provider.url, api_key="sk-test", backoff_seconds=0)
    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=adapter, servers={"files": files_server()})
    assert result.termination_reason == "done"
    assert (result.usage.requests, result.usage.failed_requests) == (2, 1)


async def test_a_lasting_error_in_a_200_reply_ends_the_run_with_its_message(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"error": {"message": "model 'gpt-x' does not exist", "code": "model_not_found"}})
    fake_provider.reply(DONE)
    result = await run(fake_provider)
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert result.error["message"] == "provider returned an error: model 'gpt-x' does not exist"
    assert result.usage.requests == 1
