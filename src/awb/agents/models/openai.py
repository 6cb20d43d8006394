"""OpenAI-compatible chat completions: OpenAI, vLLM, Ollama, llama.cpp server, LM Studio.

With `native_tools` the tools go out as functions with `tool_choice: "required"` and the first tool
call is the action (any further calls are reported to the model as not run); without, the prompt
asks for one JSON action in the reply text (for servers without tool calling).

Servers differ in what they accept: when one rejects an optional field (`tool_choice`,
`parallel_tool_calls`, or a `temperature` the model does not take) with a 400, the request is sent
again without it, and `max_tokens` is sent again as `max_completion_tokens` (newer OpenAI models
want that). The server is remembered (per base URL and model, for the life of the process), so
later turns do not ask again.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

from awb.agents.actions import Action
from awb.agents.errors import MalformedAction, ModelError
from awb.agents.models.base import Prompt, json_action_instructions
from awb.agents.models.functions import MAX_FUNCTIONS, FunctionTable, cut_off, parse_text_action, refused
from awb.agents.models.http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_SECONDS, ProviderClient, needs_key
from awb.agents.models.settings import ModelSettings
from awb.agents.models.tokens import count_reply
from awb.agents.result import Usage
from awb.agents.toolbox import ToolSpec

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_NATIVE_HINT = "Act by calling exactly one function; call `done` with the final output when finished."
#: Fields a server may refuse without the request being wrong; dropped on a 400 that names them.
OPTIONAL_FIELDS = ("tool_choice", "parallel_tool_calls", "temperature")
#: Dropped on a 400 that names no field: the ones servers without tool support refuse.
_LIKELY_REFUSED = ("tool_choice", "parallel_tool_calls")
#: Renamed on a 400 that names them.
RENAMED_FIELDS = {"max_tokens": "max_completion_tokens"}
_REJECTION_STATUSES = frozenset({400, 422})


def _without(payload: dict[str, Any], refused: list[str]) -> dict[str, Any]:
    """`payload` without the refused fields; renamed ones come back under their new name."""
    kept = {key: value for key, value in payload.items() if key not in refused}
    for name in refused:
        if name in RENAMED_FIELDS:
            kept[RENAMED_FIELDS[name]] = payload[name]
    return kept


def _first_choice(reply: dict[str, Any]) -> tuple[dict[str, Any], object]:
    """`choices[0].message` of a chat-completions reply and its `finish_reason`; `ModelError` when the reply
    has no such message."""
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ModelError("provider reply has no choices[0].message")
    return message, choice.get("finish_reason")


class OpenAIModel:
    provider = "openai"
    #: Optional fields each (base URL, model) refused, shared by every instance.
    refused_fields: ClassVar[dict[tuple[str, str], set[str]]] = {}

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        native_tools: bool = True,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        settings: ModelSettings | None = None,
    ) -> None:
        self.model = model
        self.native_tools = native_tools
        self.usage = Usage()
        #: Defaults for every call; an agent's or a run's settings override them.
        self.settings = settings or ModelSettings()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = ProviderClient(
            base_url,
            headers,
            secret=api_key,
            usage=self.usage,
            max_retries=max_retries,
            backoff_seconds=backoff_seconds,
            timeout_seconds=timeout_seconds,
            needs_key=needs_key(api_key, base_url, DEFAULT_BASE_URL, "OpenAI"),
        )

    def connections(self) -> AbstractAsyncContextManager[None]:
        """Keep connections to the provider open until the block ends (runs hold them for their length;
        `awb.agents.models.connections`)."""
        return self.http.connections.held()

    @property
    def max_functions(self) -> int | None:
        """Functions go out only with `native_tools`; actions written as text have no cap."""
        return MAX_FUNCTIONS if self.native_tools else None

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self.model!r}, native_tools={self.native_tools})"

    @property
    def _server(self) -> tuple[str, str]:
        return self.http.base_url, self.model

    def _payload(self, prompt: Prompt, tools: Sequence[ToolSpec], table: FunctionTable) -> dict[str, Any]:
        settings = self.settings.merged(prompt.settings)
        payload: dict[str, Any] = {"model": self.model}
        if settings.temperature is not None:
            payload["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            payload["max_tokens"] = settings.max_tokens
        if self.native_tools:
            body = f"{prompt.body}\n\n{_NATIVE_HINT}"
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
                }
                for f in table.functions
            ]
            # `done` is a function too, so insisting on a call never blocks finishing.
            payload["tool_choice"] = "required"
            if settings.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = settings.parallel_tool_calls
        else:
            body = f"{prompt.body}\n\n{json_action_instructions(prompt, tools)}"
        payload["messages"] = [{"role": "system", "content": prompt.system}, {"role": "user", "content": body}]
        refused = sorted(self.refused_fields.get(self._server, ()))
        payload = _without(payload, [name for name in refused if name in payload])
        return payload

    def _refused(self, err: ModelError, payload: dict[str, Any]) -> list[str]:
        """The fields of `payload` a rejection is about; none when it is not about a field."""
        if err.details.get("status") not in _REJECTION_STATUSES:
            return []
        named = [name for name in (*OPTIONAL_FIELDS, *RENAMED_FIELDS) if name in payload and name in err.message]
        return named or [name for name in _LIKELY_REFUSED if name in payload]

    async def _post(self, payload: dict[str, Any], settings: ModelSettings) -> dict[str, Any]:
        # Each pass learns at least one new field from a finite set, so this ends.
        learned: set[str] = set()
        while True:
            try:
                reply = await self.http.post("/chat/completions", payload, settings)
            except ModelError as err:
                refused = [name for name in self._refused(err, payload) if name not in learned]
                if not refused:
                    raise
                learned.update(refused)
                payload = _without(payload, refused)
                continue
            if learned:
                self.refused_fields.setdefault(self._server, set()).update(learned)
            return reply

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        table = FunctionTable(tools, prompt.output_schema, code_mode=prompt.code_mode)
        settings = self.settings.merged(prompt.settings)
        payload = self._payload(prompt, tools, table)
        reply = await self._post(payload, settings)
        self._count(reply, payload)
        message, finish_reason = _first_choice(reply)
        listed = message.get("tool_calls")
        calls = [
            (str(function.get("name")), function.get("arguments"))
            for call in (listed if isinstance(listed, list) else [])
            if isinstance(call, dict) and isinstance(function := call.get("function"), dict)
        ]
        refusal = message.get("refusal")
        if not calls and isinstance(refusal, str) and refusal.strip():
            raise refused(refusal)
        try:
            return self._action(table, calls, message.get("content"))
        except MalformedAction as err:
            if finish_reason == "length":
                raise cut_off(err, settings.max_tokens) from None
            raise

    def _action(self, table: FunctionTable, calls: list[tuple[str, object]], content: object) -> Action:
        if calls:
            return table.first_of(calls)
        if not isinstance(content, str):
            raise MalformedAction("the reply has neither a tool call nor text")
        return parse_text_action(content, native=self.native_tools)

    def _count(self, reply: dict[str, Any], payload: dict[str, Any]) -> None:
        usage = reply.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        choices = reply.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        count_reply(
            self.usage,
            (usage.get("prompt_tokens"), usage.get("completion_tokens")),
            sent=(payload["messages"], payload.get("tools")),
            received=first.get("message") if isinstance(first, dict) else None,
        )
