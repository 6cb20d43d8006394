"""A chat-completions server that behaves like real models do: prose, several calls, hidden tools,
broken JSON, 5xx, 429 with retry-after, rejected fields, a reply slower than the timeout."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from awb.agents import Agent, Budget, ModelSettings, RunEvent, run_agent
from awb.agents.models.functions import PROSE_REPLY
from awb.agents.models.openai import OpenAIModel

from .agent_fixtures import (
    FakeProvider,
    Reader,
    WaitRecorder,
    files_server,
    math_server,
    openai_calls,
    openai_text,
)

pytestmark = pytest.mark.anyio


def model(provider: FakeProvider, **options: Any) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=provider.url, api_key="sk-test-misbehaving", backoff_seconds=0, **options)


def servers() -> dict[str, Any]:
    return {"files": files_server(), "math": math_server()}


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


async def run(provider: FakeProvider, agent: type[Agent] = Reader, **options: Any) -> Any:
    with anyio.fail_after(15):
        return await run_agent(agent, "q", model=model(provider, **options), servers=servers())


async def test_tool_choice_required_is_sent_when_functions_are_offered(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    result = await run(fake_provider)
    assert result.ok
    assert fake_provider.bodies()[0]["tool_choice"] == "required"


async def test_a_server_rejecting_tool_choice_is_asked_again_without_it_and_remembered(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.reply({"error": {"message": "tool_choice 'required' is not supported"}}, status=400)
    fake_provider.reply(openai_calls(("files__listing", "{}")))
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "a"})
    sent = [("tool_choice" in body) for body in fake_provider.bodies()]
    assert sent == [True, False, False]
    assert (result.usage.requests, result.usage.failed_requests) == (3, 1)
    # A new adapter for the same server and model remembers too.
    fake_provider.reply(openai_calls(("done", '{"answer": "b"}')))
    assert (await run(fake_provider)).ok
    assert "tool_choice" not in fake_provider.bodies()[-1]


async def test_prose_instead_of_a_call_is_fed_back_and_the_model_recovers(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_text("The answer is probably 42."))
    fake_provider.reply(openai_calls(("done", '{"answer": "42"}')))
    events: list[RunEvent] = []
    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers=servers(), on_event=events.append)
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert PROSE_REPLY in user_text(fake_provider.bodies()[1])
    assert [event.type for event in events] == ["step_started", "rejected", "model_reply", "done"]
    assert events[1].data == {"code": "malformed_action", "message": PROSE_REPLY}
    [step] = result.steps
    assert [(r.code, r.reply) for r in step.rejected] == [("malformed_action", "The answer is probably 42.")]


async def test_two_calls_in_one_reply_run_the_first_and_tell_the_model_the_other_was_not_run(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.reply(openai_calls(("files__read", '{"path": "notes.txt"}'), ("files__listing", "{}")))
    fake_provider.reply(openai_calls(("done", '{"answer": "42"}')))
    result = await run(fake_provider)
    assert result.ok
    assert [c.name for c in result.tool_calls] == ["files.read"]
    assert result.steps[0].not_run == ["files__listing"]
    second = user_text(fake_provider.bodies()[1])
    assert "only 'files.read' ran; not run: ['files__listing']" in second


async def test_parallel_tool_calls_false_is_sent_when_set(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    with anyio.fail_after(15):
        result = await run_agent(
            Reader,
            "q",
            model=model(fake_provider),
            servers=servers(),
            model_settings=ModelSettings(parallel_tool_calls=False),
        )
    assert result.ok
    assert fake_provider.bodies()[0]["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("native", "reply"),
    [
        (True, openai_calls(("math__add", '{"a": 1, "b": 2}'))),
        (False, openai_text('{"action": "call_tool", "tool": "math.add", "arguments": {"a": 1, "b": 2}}')),
    ],
)
async def test_a_hidden_tool_is_the_same_observation_with_or_without_native_tools(
    fake_provider: FakeProvider, native: bool, reply: dict[str, Any]
) -> None:
    fake_provider.reply(reply)
    fake_provider.reply(
        openai_calls(("done", '{"answer": "a"}'))
        if native
        else openai_text('{"action": "done", "output": {"answer": "a"}}')
    )
    result = await run(fake_provider, native_tools=native)
    assert result.ok
    assert result.tool_calls == []
    observation = (
        "tool_error (math.add): no tool named 'math.add' is available; available: ['files.read', 'files.listing']"
    )
    assert observation in user_text(fake_provider.bodies()[1])
    assert [r.code for r in result.steps[0].rejected] == ["tool_not_found"]


async def test_malformed_arguments_are_corrected_within_one_step_and_the_count_resets(
    fake_provider: FakeProvider,
) -> None:
    class Patient(Reader):
        output_retries = 1

    # Two bad replies in a row would end the run; a good one in between restores the count.
    fake_provider.reply(openai_calls(("files__read", '{"path": "notes.txt"')))
    fake_provider.reply(openai_calls(("files__read", '{"path": "notes.txt"}')))
    fake_provider.reply(openai_calls(("done", '{"answer": ')))
    fake_provider.reply(openai_calls(("done", '{"answer": "42"}')))
    result = await run(fake_provider, Patient)
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert result.iterations == 2
    assert [len(step.rejected) for step in result.steps] == [1, 1]
    assert "arguments of 'files__read' are not valid JSON" in user_text(fake_provider.bodies()[1])


async def test_500_then_success_counts_both_requests(fake_provider: FakeProvider) -> None:
    fake_provider.reply({"error": {"message": "boom"}}, status=500)
    fake_provider.reply(openai_calls(("done", '{"answer": "fine"}'), usage=(5, 1)))
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "fine"})
    assert (result.usage.requests, result.usage.failed_requests, result.usage.input_tokens) == (2, 1, 5)
    assert result.steps[0].usage.requests == 2


async def test_429_retry_after_is_honoured_up_to_the_cap(fake_provider: FakeProvider) -> None:
    limited = {"error": {"message": "rate limited"}}
    fake_provider.reply(limited, status=429, headers={"retry-after": "2"})
    fake_provider.reply(limited, status=429, headers={"retry-after": "3600"})
    fake_provider.reply(limited, status=429, headers={"retry-after-ms": "250"})
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    adapter = OpenAIModel("fake-model", base_url=fake_provider.url, max_retries=3, backoff_seconds=0)
    recorder = WaitRecorder()
    adapter.http.sleep = recorder
    with anyio.fail_after(15):
        result = await run_agent(
            Reader,
            "q",
            model=adapter,
            servers=servers(),
            model_settings=ModelSettings(max_retry_wait_seconds=10),
        )
    assert result.ok
    # 10 s: the cap, and within the 15 s this test allows (a wait past the deadline is not taken).
    assert recorder.waits == [2.0, 10.0, 0.25]
    assert (result.usage.requests, result.usage.failed_requests) == (4, 3)


async def test_a_reply_slower_than_the_timeout_ends_in_model_error(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("done", '{"answer": "late"}')), hold=True)
    fake_provider.reply(openai_calls(("done", '{"answer": "late"}')), hold=True)
    with anyio.fail_after(15):
        result = await run_agent(
            Reader,
            "q",
            model=model(fake_provider),
            servers=servers(),
            model_settings=ModelSettings(timeout_seconds=0.2, max_retries=1),
        )
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "did not answer within 0.2 s" in result.error["message"]
    assert (result.usage.requests, result.usage.failed_requests) == (2, 2)


async def test_a_body_that_stops_mid_way_ends_in_model_error_after_the_timeout(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("done", '{"answer": "never"}')), stall_body=True)
    with anyio.fail_after(15):
        result = await run_agent(
            Reader,
            "q",
            model=model(fake_provider),
            servers=servers(),
            model_settings=ModelSettings(timeout_seconds=0.3, max_retries=0),
        )
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert "did not answer within 0.3 s" in result.error["message"]


async def test_agent_settings_are_sent_and_the_run_overrides_them(fake_provider: FakeProvider) -> None:
    class Tuned(Reader):
        model_settings = ModelSettings(temperature=0.1, max_tokens=100)

    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    with anyio.fail_after(15):
        await run_agent(Tuned, "q", model=model(fake_provider), servers=servers())
        await run_agent(
            Tuned, "q", model=model(fake_provider), servers=servers(), model_settings=ModelSettings(temperature=0.7)
        )
    first, second = fake_provider.bodies()
    assert (first["temperature"], first["max_tokens"]) == (0.1, 100)
    assert (second["temperature"], second["max_tokens"]) == (0.7, 100)


async def test_usage_of_a_priced_model_reports_its_cost(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}'), usage=(1_000_000, 1_000_000)))
    adapter = OpenAIModel("gpt-4o-mini", base_url=fake_provider.url, backoff_seconds=0)
    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=adapter, servers=servers())
    assert result.usage.cost_usd == pytest.approx(0.75)
    assert json.loads(result.model_dump_json())["usage"]["cost_usd"] == pytest.approx(0.75)


async def test_a_model_that_wants_max_completion_tokens_and_no_temperature_gets_them(
    fake_provider: FakeProvider,
) -> None:
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    fake_provider.reply({"error": {"message": refusal}}, status=400)
    fake_provider.reply({"error": {"message": "Unsupported value: 'temperature' does not support 0.2"}}, status=400)
    fake_provider.reply(openai_calls(("files__listing", "{}")))
    fake_provider.reply(openai_calls(("done", '{"answer": "a"}')))
    settings = ModelSettings(max_tokens=50, temperature=0.2)
    with anyio.fail_after(15):
        result = await run_agent(Reader, "q", model=model(fake_provider), servers=servers(), model_settings=settings)
    assert result.ok
    sent = [(b.get("max_tokens"), b.get("max_completion_tokens"), b.get("temperature")) for b in fake_provider.bodies()]
    assert sent == [(50, None, 0.2), (None, 50, 0.2), (None, 50, None), (None, 50, None)]
    assert (result.usage.requests, result.usage.failed_requests) == (4, 2)


def cut_off_reply(message: dict[str, Any]) -> dict[str, Any]:
    choice = {"message": {"role": "assistant", **message}, "finish_reason": "length"}
    return {"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 50}}


@pytest.mark.parametrize(
    "message",
    [
        {"content": ""},
        {"content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "files__read"}}]},
        {"content": None, "tool_calls": [{"function": {"name": "files__read", "arguments": '{"path": "no'}}]},
    ],
    ids=["empty", "no-arguments-yet", "half-the-arguments"],
)
async def test_a_reply_cut_off_at_max_tokens_is_fed_back_as_cut_off_and_the_model_recovers(
    fake_provider: FakeProvider, message: dict[str, Any]
) -> None:
    fake_provider.reply(cut_off_reply(message))
    fake_provider.reply(openai_calls(("done", '{"answer": "short"}')))
    with anyio.fail_after(15):
        result = await run_agent(
            Reader, "q", model=model(fake_provider), servers=servers(), model_settings=ModelSettings(max_tokens=50)
        )
    assert (result.termination_reason, result.output) == ("done", {"answer": "short"})
    rejected = result.steps[0].rejected[0]
    assert rejected.message.startswith("the reply was cut off at the max_tokens limit (50) before its action")
    assert "cut off at the max_tokens limit (50)" in user_text(fake_provider.bodies()[1])


async def test_a_model_that_is_always_cut_off_ends_saying_so(fake_provider: FakeProvider) -> None:
    for _ in range(Reader.output_retries + 1):
        fake_provider.reply(cut_off_reply({"content": '{"action": "done", "output": {"answer": "a very lo'}))
    result = await run(fake_provider, native_tools=False)
    assert result.termination_reason == "output_invalid"
    assert result.error is not None
    assert result.error["message"] == (
        "the model's replies were cut off at the provider's default length limit: raise max_tokens"
    )
    assert (result.error["details"]["cut_off"], result.error["details"]["max_tokens"]) == (True, None)
    assert "cut off at the provider's length limit" in result.steps[0].rejected[-1].message


async def test_a_refusal_ends_the_run_refused_with_the_models_words_after_one_request(
    fake_provider: FakeProvider,
) -> None:
    """Refused, not `model_error`: the model answered (declining), the provider did not fail."""
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    fake_provider.reply({"choices": [{"message": refusal, "finish_reason": "stop"}]})
    fake_provider.reply(openai_calls(("done", '{"answer": "never asked"}')))
    result = await run(fake_provider)
    assert result.termination_reason == "refused"
    assert result.error is not None and result.error["code"] == "refused"
    assert result.error["message"] == "the model refused: I can't help with that."
    assert result.error["details"] == {"refusal": "I can't help with that."}
    assert len(fake_provider.requests) == 1


@pytest.mark.parametrize(
    "retry_after",
    [{"retry-after": "36000"}, {"retry-after": "Sun, 06 Nov 2994 08:49:37 GMT"}, {}],
    ids=["ten-hours", "http-date", "backoff"],
)
async def test_a_retry_wait_past_the_runs_deadline_ends_at_once_with_the_providers_message(
    fake_provider: FakeProvider, retry_after: dict[str, str]
) -> None:
    class Hurried(Reader):
        budget = Budget(timeout_seconds=5)

    fake_provider.reply({"error": {"message": "quota exhausted"}}, status=429, headers=retry_after)
    adapter = OpenAIModel("fake-model", base_url=fake_provider.url, backoff_seconds=10)
    recorder = WaitRecorder()
    adapter.http.sleep = recorder
    with anyio.fail_after(15):
        result = await run_agent(
            Hurried, "q", model=adapter, servers=servers(), model_settings=ModelSettings(max_retry_wait_seconds=60)
        )
    assert result.termination_reason == "model_error"
    assert result.error is not None
    assert result.error["message"].startswith("provider returned HTTP 429: quota exhausted; not retried: the wait of")
    assert result.error["message"].endswith("s would pass the run's deadline")
    assert (result.error["details"]["attempts"], result.error["details"]["status"]) == (1, 429)
    assert recorder.waits == []


async def test_arguments_encoded_twice_are_read_once_more(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("files__read", json.dumps(json.dumps({"path": "notes.txt"})))))
    fake_provider.reply(openai_calls(("done", json.dumps(json.dumps({"answer": "42"})))))
    result = await run(fake_provider)
    assert (result.termination_reason, result.output) == ("done", {"answer": "42"})
    assert [(call.name, call.arguments, call.ok) for call in result.tool_calls] == [
        ("files.read", {"path": "notes.txt"}, True)
    ]
    assert [step.rejected for step in result.steps] == [[], []]


async def test_arguments_that_are_a_json_string_of_no_object_are_still_malformed(fake_provider: FakeProvider) -> None:
    fake_provider.reply(openai_calls(("files__read", json.dumps("notes.txt"))))
    fake_provider.reply(openai_calls(("done", '{"answer": "42"}')))
    result = await run(fake_provider)
    assert result.ok
    assert result.steps[0].rejected[0].message == "arguments of 'files__read' must be a JSON object"
