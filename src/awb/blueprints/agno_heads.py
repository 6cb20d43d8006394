"""The Agno target's heads: Agno's model classes, whose async provider clients talk through awb's capped HTTP
client (`awb.blueprints.agno_transports.capped_provider_client`), so a provider's reply holds no more memory in
an Agno run than in an awb run. Every client Agno builds for a run gets one (a model copied for a team member
too); a synchronous run of the compiled target keeps the SDK's own client.

Importing this module imports Agno's OpenAI model; `claude_class` imports its Anthropic one when called.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from agno.models.openai import OpenAIChat
from openai import AsyncOpenAI

from awb.blueprints.agno_transports import capped_provider_client


class CappedOpenAIChat(OpenAIChat):
    """Agno's `OpenAIChat`, its async client built as Agno builds it, with a capped HTTP client."""

    def get_async_client(self) -> AsyncOpenAI:
        if self.async_client is None or self.async_client.is_closed():
            self.async_client = AsyncOpenAI(**self._get_client_params(), http_client=capped_provider_client())
        return self.async_client


@cache
def claude_class() -> type[Any]:
    """Agno's `Claude`, its async client capped (`ImportError` without the anthropic SDK)."""
    from agno.models.anthropic import Claude
    from anthropic import AsyncAnthropic

    class CappedClaude(Claude):
        """Agno's `Claude`, its async client built as Agno builds it, with a capped HTTP client."""

        def get_async_client(self) -> AsyncAnthropic:
            if self.async_client is None or self.async_client.is_closed():
                params = {**self._get_client_params(), "http_client": capped_provider_client()}
                self.async_client = AsyncAnthropic(**params)
            return self.async_client

    return CappedClaude
