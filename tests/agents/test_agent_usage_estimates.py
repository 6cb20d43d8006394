"""Providers that report no usable `usage`: their tokens are estimated, so token and cost budgets still end
the run, and the result says which counts are estimates."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from awb.agents import Agent, Budget, RunEvent, run_agent
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.openai import OpenAIModel
from awb.agents.models.tokens import CHARS_PER_TOKEN, estimated_tokens, text_chars

from .agent_fixtures import FakeProvider, Reader, anthropic_uses, files_server, openai_calls

pytestmark = pytest.mark.anyio

LISTING = ("files__listing", "{}")
DONE = ("done", '{"answer": "42"}')
#: What servers and proxies send instead of a usage: nothing, null, zeros, nulls, something else.
NO_USAGE: list[Any] = [
    "absent",
    None,
    {"prompt_tokens": 0, "completion_tokens": 0},
    {"prompt_tokens": None, "completion_tokens": None},
    "not an object",
]


class Thrifty(Reader):
    budget = Budget(max_total_tokens=50)


def without_usage(reply: dict[str, Any], usage: Any) -> dict[str, Any]:
    reply = dict(reply)
    del reply["usage"]
    return reply if usage == "absent" else {**reply, "usage": usage}


async def run(provider: FakeProvider, agent: type[Agent], model: str = "fake-model", **options: Any) -> Any:
    adapter = OpenAIModel(model, base_url=provider.url, api_key="k", backoff_seconds=0)
    with anyio.fail_after(15):
        return await run_agent(agent, "q", model=adapter, servers={"files": files_server()}, **options)


@pytest.mark.parametrize("usage", NO_USAGE)
async def test_a_token_budget_ends_a_run_whose_provider_reports_no_usage(
    fake_provider: FakeProvider, usage: Any
) -> None:
    for _ in range(3):
        fake_provider.reply(without_usage(openai_calls(LISTING), usage))
    fake_provider.reply(without_usage(openai_calls(DONE), usage))
    result = await run(fake_provider, Thrifty)
    assert result.termination_reason == "max_tokens"
    assert result.error is not None and result.error["details"]["limit"] == "max_total_tokens"
    assert (result.usage.requests, result.usage.estimated_replies) == (1, 1)
    assert result.usage.input_tokens > result.usage.output_tokens > 0
    assert json.loads(result.model_dump_json())["usage"]["estimated_replies"] == 1


async def test_estimated_figures_are_marked_estimated_in_the_result_its_steps_and_events(
    fake_provider: FakeProvider,
) -> None:
    """An operator must not bill by an estimate: every usage that holds one says so, one that does not says not."""
    fake_provider.reply(openai_calls(LISTING, usage=(40, 20)))
    fake_provider.reply(without_usage(openai_calls(DONE), "absent"))
    events: list[RunEvent] = []
    result = await run(fake_provider, Reader, on_event=events.append)
    assert result.ok
    dumped = json.loads(result.model_dump_json())
    assert dumped["usage"]["estimated"] is True
    assert [step["usage"]["estimated"] for step in dumped["steps"]] == [False, True]
    replies = [event.data["usage"]["estimated"] for event in events if event.type == "model_reply"]
    assert replies == [False, True]


async def test_a_token_budget_ends_the_run_the_same_way_with_reported_usage(fake_provider: FakeProvider) -> None:
    for _ in range(3):
        fake_provider.reply(openai_calls(LISTING, usage=(40, 20)))
    result = await run(fake_provider, Thrifty)
    assert result.termination_reason == "max_tokens"
    assert result.error is not None and result.error["details"]["limit"] == "max_total_tokens"
    # Reported counts are taken as they are, and nothing is marked estimated.
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.estimated_replies) == (40, 20, 0)


async def test_an_estimate_counts_what_was_sent_and_received_about_four_characters_a_token(
    fake_provider: FakeProvider,
) -> None:
    fake_provider.reply(without_usage(openai_calls(DONE), "absent"))
    events: list[RunEvent] = []
    result = await run(fake_provider, Reader, on_event=events.append)
    assert result.ok
    body = fake_provider.bodies()[0]
    sent = text_chars((body["messages"], body["tools"]))
    received = text_chars(openai_calls(DONE)["choices"][0]["message"])
    assert result.usage.input_tokens == -(-sent // CHARS_PER_TOKEN)
    assert result.usage.output_tokens == -(-received // CHARS_PER_TOKEN)
    assert result.steps[0].usage.estimated_replies == 1
    # The run's log says so too: the model's reply event carries the step's usage.
    [reply] = [event for event in events if event.type == "model_reply"]
    assert reply.data["usage"]["estimated_replies"] == 1


async def test_a_cost_budget_prices_estimated_tokens(fake_provider: FakeProvider) -> None:
    class Capped(Reader):
        budget = Budget(max_cost_usd=0.000_001)

    for _ in range(3):
        fake_provider.reply(without_usage(openai_calls(LISTING), "absent"))
    result = await run(fake_provider, Capped, model="gpt-4o-mini")
    assert result.termination_reason == "max_cost"
    assert result.usage.cost_usd is not None and result.usage.cost_usd > 0
    assert (result.usage.requests, result.usage.estimated_replies) == (1, 1)


async def test_only_the_count_a_provider_left_out_is_estimated(fake_provider: FakeProvider) -> None:
    fake_provider.reply(without_usage(openai_calls(DONE), {"prompt_tokens": 7}))
    result = await run(fake_provider, Reader)
    assert result.usage.input_tokens == 7
    assert result.usage.output_tokens > 0
    assert result.usage.estimated_replies == 1


async def test_an_anthropic_reply_without_usage_is_estimated(fake_provider: FakeProvider) -> None:
    reply = anthropic_uses(("files__listing", {}))
    del reply["usage"]
    fake_provider.reply(reply)
    adapter = AnthropicModel("claude-fake", base_url=fake_provider.url, api_key="k", backoff_seconds=0)
    with anyio.fail_after(15):
        result = await run_agent(Thrifty, "q", model=adapter, servers={"files": files_server()})
    assert result.termination_reason == "max_tokens"
    assert result.usage.estimated_replies == 1


def test_an_estimate_walks_a_reply_nested_past_the_recursion_limit() -> None:
    deep: Any = "abcd"
    for _ in range(5000):
        deep = [deep]
    assert estimated_tokens({"content": deep}) == 3  # "content" and "abcd": 11 characters
