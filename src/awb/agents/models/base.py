"""The `Model` protocol, the prompt it receives, and the scripted model for tests and demos."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from awb.agents.actions import Action, parse_action
from awb.agents.errors import ModelError
from awb.agents.models.settings import ModelSettings
from awb.agents.result import Usage
from awb.agents.toolbox import ToolSpec


@dataclass(frozen=True)
class Prompt:
    system: str
    #: The task, the working memory and any feedback, already bounded.
    body: str
    output_schema: dict[str, Any]
    #: The agent's and the run's provider settings, merged; adapters without settings ignore them.
    settings: ModelSettings = field(default_factory=ModelSettings)
    #: The run can execute `run_code` actions (a code runner is set): adapters offer the action.
    code_mode: bool = False


class Model(Protocol):
    """What the loop calls. Adapters may also have `model` (the provider's model name) and
    `provider` (e.g. "openai"): the price table and telemetry read them when present; and
    `max_functions`, the most functions a request may offer (absent or None: no cap), which the
    runtime checks before the run and before every call (`functions.function_overflow`)."""

    #: Running total across calls; the loop reports the difference a run made. `requests` counts
    #: every HTTP attempt, failed ones included.
    usage: Usage

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        """Return exactly one action, raise `MalformedAction` for an unusable reply or `ModelError`."""
        ...


def catalog(tools: Sequence[ToolSpec]) -> str:
    """Tools and subagents as text, for models that read them from the prompt."""
    lines = []
    for spec in tools:
        verb = "spawn_subagent agent" if spec.kind == "subagent" else "call_tool tool"
        schema = json.dumps(spec.input_schema, sort_keys=True)
        lines.append(f"- {verb}={spec.name!r}: {spec.description}\n  input schema: {schema}")
    return "\n".join(lines) or "(none)"


RUN_CODE_LINE = '{"action": "run_code", "code": PYTHON (the body of an async main(); return a small JSON value)}\n'


def json_action_instructions(prompt: Prompt, tools: Sequence[ToolSpec]) -> str:
    """The contract for providers without native tool calling: reply with one JSON action."""
    output_schema = json.dumps(prompt.output_schema, sort_keys=True)
    return (
        "## Available tools and subagents\n"
        f"{catalog(tools)}\n"
        "## How to answer\n"
        "Reply with exactly one JSON object and nothing else, one of:\n"
        '{"action": "call_tool", "tool": NAME, "arguments": {...}}\n'
        '{"action": "spawn_subagent", "agent": NAME, "input": {...}}\n'
        + (RUN_CODE_LINE if prompt.code_mode else "")
        + '{"action": "done", "output": OUTPUT}\n'
        f"OUTPUT must match this JSON schema: {output_schema}\n"
        'Any action may carry "note": a short fact to remember.'
    )


Script = Callable[[Prompt, Sequence[ToolSpec]], "Action | dict[str, Any] | Awaitable[Action | dict[str, Any]]"]


class ScriptedModel:
    """Plays back a list of actions (or asks a function) instead of calling a provider."""

    def __init__(self, script: Sequence[Action | dict[str, Any]] | Script) -> None:
        self._script = script
        self._position = 0
        self.usage = Usage()
        #: What each call was shown, so tests can assert on prompts and visible tools.
        self.seen: list[tuple[Prompt, list[ToolSpec]]] = []

    async def call(self, prompt: Prompt, tools: Sequence[ToolSpec]) -> Action:
        self.seen.append((prompt, list(tools)))
        self.usage.requests += 1
        if callable(self._script):
            reply = self._script(prompt, tools)
            if inspect.isawaitable(reply):
                reply = await reply
        else:
            if self._position >= len(self._script):
                raise ModelError("the script has no more actions", position=self._position)
            reply = self._script[self._position]
            self._position += 1
        return reply if not isinstance(reply, dict) else parse_action(reply)
