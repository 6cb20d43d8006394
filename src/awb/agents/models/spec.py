"""Model spec strings, so a run can swap providers without code: `openai:gpt-4o-mini`, `anthropic:...`.

`openai-json:<model>` talks to an OpenAI-compatible server that lacks tool calling. Keys come from
the environment (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`), base URLs from `--base-url` or
`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from awb.agents.models import anthropic, openai
from awb.agents.models.base import Model
from awb.agents.models.settings import ModelSettings
from awb.errors import ConfigError

PROVIDERS = ("openai", "openai-json", "anthropic")


def resolve_model(
    spec: str,
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    settings: ModelSettings | None = None,
) -> Model:
    """The adapter a spec names; `settings` become its defaults (an agent's or a run's still win)."""
    env = os.environ if environ is None else environ
    provider, _, name = spec.partition(":")
    if not name or provider not in PROVIDERS:
        raise ConfigError(f"model spec {spec!r} must look like one of: {', '.join(p + ':<model>' for p in PROVIDERS)}")
    if provider == "anthropic":
        return anthropic.AnthropicModel(
            name,
            base_url=base_url or env.get("ANTHROPIC_BASE_URL") or anthropic.DEFAULT_BASE_URL,
            api_key=env.get("ANTHROPIC_API_KEY"),
            settings=settings,
        )
    return openai.OpenAIModel(
        name,
        base_url=base_url or env.get("OPENAI_BASE_URL") or openai.DEFAULT_BASE_URL,
        api_key=env.get("OPENAI_API_KEY"),
        native_tools=provider == "openai",
        settings=settings,
    )
