"""Model spec strings choose a provider adapter without code changes."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from awb.agents.errors import ModelError
from awb.agents.models import resolve_model
from awb.agents.models.anthropic import AnthropicModel
from awb.agents.models.openai import OpenAIModel
from awb.errors import ConfigError

from .agent_fixtures import FakeProvider


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


@pytest.mark.anyio
@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-json:gpt-4o-mini", "anthropic:claude-sonnet-4"])
async def test_a_hosted_api_without_its_key_fails_at_once_and_says_which_key(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a request went out without a key")

    monkeypatch.setattr(httpx.AsyncClient, "post", never)
    model = resolve_model(spec, environ={})
    with anyio.fail_after(10), pytest.raises(ModelError) as raised:
        await model.http.post("/any", {})
    variable = "ANTHROPIC" if spec.startswith("anthropic") else "OPENAI"
    assert raised.value.message.startswith(f"{variable}_API_KEY is not set")
    assert f"{variable}_BASE_URL" in raised.value.message
    assert model.usage.requests == 0


@pytest.mark.anyio
async def test_a_server_of_your_own_is_asked_without_a_key(fake_provider: FakeProvider) -> None:
    """Given by --base-url or by OPENAI_BASE_URL: a local server may need no key, so none is demanded."""
    models = [
        resolve_model("openai:local-model", base_url=fake_provider.url, environ={}),
        resolve_model("openai:local-model", environ={"OPENAI_BASE_URL": fake_provider.url}),
    ]
    for model in models:
        fake_provider.reply({"ok": True})
        with anyio.fail_after(10):
            assert await model.http.post("/chat/completions", {}) == {"ok": True}
    assert len(fake_provider.requests) == 2
    assert all("Authorization" not in request["headers"] for request in fake_provider.requests)
