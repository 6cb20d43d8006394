"""OpenAI-compatible chat completions: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio.

With `native_tools` the tools go out as functions and the first tool call is the action;
without, the prompt asks for one JSON action in the reply text (for servers without tool calling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from awb.agents.actions import Action
from awb.agents.errors import MalformedAction, ModelError
from awb.agents.models.base import Prompt, json_action_instructions
from awb.agents.models.functions import FunctionTable, parse_text_action
from awb.agents.models.http import ProviderClient
from awb.agents.result import Usage
from awb.agents.toolbox import ToolSpec

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_NATIVE_HINT = "Act by calling exactly one function; call `done` with the final output when finished."


class OpenAIModel:
    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        native_tools: bool = True,
        max_retries: int = 2,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = 120.0,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.native_tools = native_tools
        #: Sampling settings sent with every request (`temperature`, `max_tokens`, ...).
        self.settings = dict(settings or {})
        self.usage = Usage()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = ProviderClient(
            base_url,
            headers,
            secret=api_key,
            max_retries=max_retries,
            backoff_seconds=backoff_seconds,
            timeout_seconds=timeout_seconds,
        )

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self.model!r}, native_tools={self.native_tools})"

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        table = FunctionTable(tools, prompt.output_schema)
        payload: dict[str, Any] = {**self.settings, "model": self.model}
        if self.native_tools:
            body = f"{prompt.body}\n\n{_NATIVE_HINT}"
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
                }
                for f in table.functions
            ]
        else:
            body = f"{prompt.body}\n\n{json_action_instructions(prompt, tools)}"
        payload["messages"] = [{"role": "system", "content": prompt.system}, {"role": "user", "content": body}]
        reply = await self._http.post("/chat/completions", payload)
        self._count(reply.get("usage"))
        try:
            message = reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError("provider reply has no choices[0].message") from None
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            return table.to_action(str(function.get("name")), function.get("arguments"))
        content = message.get("content")
        if not isinstance(content, str):
            raise MalformedAction("the reply has neither a tool call nor text")
        return parse_text_action(content)

    def _count(self, usage: object) -> None:
        self.usage.requests += 1
        if isinstance(usage, dict):
            self.usage.input_tokens += int(usage.get("prompt_tokens") or 0)
            self.usage.output_tokens += int(usage.get("completion_tokens") or 0)
