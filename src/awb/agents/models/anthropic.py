"""Anthropic Messages API: tools go out as tools, the first `tool_use` block is the action.

Further `tool_use` blocks in the same reply are reported to the model as not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from awb.agents.actions import Action
from awb.agents.errors import MalformedAction
from awb.agents.models.base import Prompt
from awb.agents.models.functions import MAX_FUNCTIONS, FunctionTable, cut_off, parse_text_action, refused
from awb.agents.models.http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_SECONDS, ProviderClient, needs_key
from awb.agents.models.settings import ModelSettings
from awb.agents.models.tokens import count_reply
from awb.agents.result import Usage
from awb.agents.toolbox import ToolSpec

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
_HINT = "Act by using exactly one tool; use `done` with the final output when finished."


class AnthropicModel:
    provider = "anthropic"
    max_functions = MAX_FUNCTIONS

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        max_tokens: int = 4096,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        settings: ModelSettings | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.usage = Usage()
        self.settings = settings or ModelSettings()
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self.http = ProviderClient(
            base_url,
            headers,
            secret=api_key,
            usage=self.usage,
            max_retries=max_retries,
            backoff_seconds=backoff_seconds,
            timeout_seconds=timeout_seconds,
            needs_key=needs_key(api_key, base_url, DEFAULT_BASE_URL, "Anthropic"),
        )

    def connections(self) -> AbstractAsyncContextManager[None]:
        """Keep connections to the provider open until the block ends (runs hold them for their length;
        `awb.agents.models.connections`)."""
        return self.http.connections.held()

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self.model!r})"

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        table = FunctionTable(tools, prompt.output_schema, code_mode=prompt.code_mode)
        settings = self.settings.merged(prompt.settings)
        # `done` is a tool too, so insisting on a tool never blocks finishing.
        tool_choice: dict[str, Any] = {"type": "any"}
        if settings.parallel_tool_calls is False:
            tool_choice["disable_parallel_tool_use"] = True
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": f"{prompt.body}\n\n{_HINT}"}],
            "tools": [
                {"name": f.name, "description": f.description, "input_schema": f.parameters} for f in table.functions
            ],
            "tool_choice": tool_choice,
        }
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        reply = await self.http.post("/v1/messages", payload, settings)
        self._count(reply, payload)
        blocks = reply.get("content")
        if not isinstance(blocks, list):
            raise MalformedAction("the reply has no content blocks")
        calls = [
            (str(block.get("name")), block.get("input"))
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_use"
        ]
        text = "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        stop_reason = reply.get("stop_reason")
        if stop_reason == "refusal":
            raise refused(text)
        try:
            return table.first_of(calls) if calls else parse_text_action(text, native=True)
        except MalformedAction as err:
            if stop_reason == "max_tokens":
                raise cut_off(err, payload["max_tokens"]) from None
            raise

    def _count(self, reply: dict[str, Any], payload: dict[str, Any]) -> None:
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        count_reply(
            self.usage,
            (usage.get("input_tokens"), usage.get("output_tokens")),
            sent=(payload["system"], payload["messages"], payload["tools"]),
            received=reply.get("content"),
        )
