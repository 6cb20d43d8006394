"""Chat-completions replies for the Agno target's tests (Agno reads the whole OpenAI response shape)."""

from __future__ import annotations

import json
from typing import Any

Reply = tuple[int, Any]


def completion(message: dict[str, Any]) -> Reply:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini", "choices": [choice]}
    return 200, body | {"usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def text(content: str) -> Reply:
    return completion({"content": content})


def calls(name: str, arguments: dict[str, Any], call_id: str = "t1") -> Reply:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return completion({"content": None, "tool_calls": [call]})


def offered(body: dict[str, Any]) -> set[str]:
    """The function names a request offered the model."""
    return {tool["function"]["name"] for tool in body.get("tools", [])}


def said(body: dict[str, Any]) -> str:
    """Everything the request's messages say, as one string to search."""
    return json.dumps(body["messages"])


def tool_results(body: dict[str, Any]) -> list[str]:
    """The contents of the tool messages a request carries back to the model, oldest first."""
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]
