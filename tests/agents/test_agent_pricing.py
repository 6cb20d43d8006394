"""Token prices come from the offline table that ships with genai-prices."""

from __future__ import annotations

import pytest

from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.openai import OpenAIModel
from awb.agents.pricing import has_price, price_usd


def test_a_known_openai_model_is_priced_per_token_without_network() -> None:
    model = OpenAIModel("gpt-4o-mini", base_url="http://127.0.0.1:9")
    assert price_usd(model, 1_000_000, 1_000_000) == pytest.approx(0.75)


def test_an_anthropic_model_is_priced_by_its_provider() -> None:
    assert has_price(AnthropicModel("claude-sonnet-4-5", base_url="http://127.0.0.1:9"))


def test_a_model_the_table_does_not_know_has_no_price() -> None:
    model = OpenAIModel("my-local-llama", base_url="http://127.0.0.1:9")
    assert price_usd(model, 10, 10) is None
    assert not has_price(model)
