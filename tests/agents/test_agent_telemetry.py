"""OpenTelemetry spans after the GenAI semantic conventions, seen through the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from awb.agents import run_agent
from awb.agents.models.openai import OpenAIModel
from awb.agents.telemetry import use_tracer_provider

from .agent_fixtures import FakeProvider, Reader, files_server, openai_calls

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
export = pytest.importorskip("opentelemetry.sdk.trace.export")

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        use_tracer_provider(None)
        provider.shutdown()


async def test_a_run_emits_invoke_agent_chat_and_execute_tool_spans(fake_provider: FakeProvider, spans: Any) -> None:
    fake_provider.reply(openai_calls(("files__read", '{"path": "notes.txt"}'), usage=(11, 2)))
    fake_provider.reply(openai_calls(("done", '{"answer": "42"}'), usage=(13, 3)))
    model = OpenAIModel("gpt-4o-mini", base_url=fake_provider.url, backoff_seconds=0)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers={"files": files_server()})
    assert result.ok
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert {"invoke_agent reader", "chat gpt-4o-mini", "execute_tool files.read"} <= set(finished)
    agent = finished["invoke_agent reader"].attributes
    assert (agent["gen_ai.operation.name"], agent["gen_ai.agent.name"]) == ("invoke_agent", "reader")
    assert (agent["gen_ai.usage.input_tokens"], agent["gen_ai.usage.output_tokens"]) == (24, 5)
    chat = finished["chat gpt-4o-mini"].attributes
    assert (chat["gen_ai.provider.name"], chat["gen_ai.request.model"]) == ("openai", "gpt-4o-mini")
    assert finished["execute_tool files.read"].attributes["gen_ai.tool.name"] == "files.read"
    chat_parent = finished["chat gpt-4o-mini"].parent
    assert chat_parent is not None
    assert chat_parent.span_id == finished["invoke_agent reader"].context.span_id


async def test_a_failed_run_marks_its_span_with_the_error_type(fake_provider: FakeProvider, spans: Any) -> None:
    fake_provider.reply({"error": {"message": "no"}}, status=401)
    model = OpenAIModel("gpt-4o-mini", base_url=fake_provider.url, backoff_seconds=0)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers={"files": files_server()})
    assert result.termination_reason == "model_error"
    finished = {span.name: span for span in spans.get_finished_spans()}
    assert finished["invoke_agent reader"].attributes["error.type"] == "model_error"
    assert finished["chat gpt-4o-mini"].attributes["error.type"] == "model_error"


async def test_a_refused_run_is_marked_refused_not_as_an_error(fake_provider: FakeProvider, spans: Any) -> None:
    fake_provider.reply({"choices": [{"message": {"role": "assistant", "refusal": "I won't."}}]})
    model = OpenAIModel("gpt-4o-mini", base_url=fake_provider.url, backoff_seconds=0)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers={"files": files_server()})
    assert result.termination_reason == "refused"
    finished = {span.name: span for span in spans.get_finished_spans()}
    agent = finished["invoke_agent reader"].attributes
    assert agent["awb.refused"] is True
    assert "error.type" not in agent
    assert "error.type" not in finished["chat gpt-4o-mini"].attributes


async def test_spans_whose_token_counts_are_estimates_say_so(fake_provider: FakeProvider, spans: Any) -> None:
    fake_provider.reply(openai_calls(("files__read", '{"path": "notes.txt"}'), usage=(11, 2)))
    unreported = openai_calls(("done", '{"answer": "42"}'))
    del unreported["usage"]
    fake_provider.reply(unreported)
    model = OpenAIModel("gpt-4o-mini", base_url=fake_provider.url, backoff_seconds=0)
    with anyio.fail_after(10):
        result = await run_agent(Reader, "q", model=model, servers={"files": files_server()})
    assert result.ok
    finished = spans.get_finished_spans()
    chats = [span.attributes["awb.usage.estimated"] for span in finished if span.name == "chat gpt-4o-mini"]
    assert chats == [False, True]
    [agent] = [span for span in finished if span.name == "invoke_agent reader"]
    assert agent.attributes["awb.usage.estimated"] is True
