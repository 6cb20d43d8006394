"""Model spec strings choose a provider adapter without code changes."""

from __future__ import annotations

import pytest

from awb.agents.models import resolve_model
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.openai import OpenAIModel
from awb.errors import ConfigError


def test_openai_spec_builds_a_native_tool_calling_adapter() -> None:
    model = resolve_model("openai:gpt-4o-mini", environ={})
    assert isinstance(model, OpenAIModel)
    assert (model.model, model.native_tools) == ("gpt-4o-mini", True)


def test_openai_json_spec_builds_the_json_action_fallback() -> None:
    model = resolve_model("openai-json:llama3", base_url="http://127.0.0.1:11434/v1", environ={})
    assert isinstance(model, OpenAIModel)
    assert model.native_tools is False


def test_anthropic_spec_builds_the_messages_adapter() -> None:
    model = resolve_model("anthropic:claude-sonnet-4", environ={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(model, AnthropicModel)
    assert model.model == "claude-sonnet-4"


@pytest.mark.parametrize("spec", ["gpt-4o", "mystery:model", "openai:"])
def test_unknown_or_incomplete_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError):
        resolve_model(spec, environ={})
