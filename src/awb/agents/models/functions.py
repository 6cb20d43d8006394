"""Tools, subagents and `done` as provider functions, and a provider's function call back as an action.

Providers restrict function names to `[A-Za-z0-9_-]{1,64}`, so `server.tool` is sent as
`server__tool` and subagents as `subagent__<mode>`; the table maps names back exactly. A name the
table does not know still becomes an action (`server__tool` -> `server.tool`), so the loop answers
an unknown or hidden tool the same way whether the model called a function or wrote JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from awb.agents.actions import Action, CallTool, Done, RunCode, SpawnSubagent, parse_action
from awb.agents.errors import MalformedAction, ModelRefused, TooManyFunctions
from awb.agents.toolbox import ToolSpec
from awb.text import surrogates_replaced

DONE = "done"
#: The most functions one request may offer. OpenAI refuses more than 128 (`array_above_max_length`, at the
#: first model call); every adapter that sends functions keeps to it, so an agent that runs on one provider
#: runs on the others, and a run that would pass it is refused before any request.
MAX_FUNCTIONS = 128
#: Offered only when the run can execute plans (`Prompt.code_mode`).
RUN_CODE = "run_code"
RUN_CODE_DESCRIPTION = (
    "Run one Python plan in the sandbox: the body of `async def main()`. Connected servers are importable"
    " modules of async tool wrappers; return a small JSON value."
)
_RUN_CODE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python: the body of `async def main()`."}},
    "required": ["code"],
}
SUBAGENT_PREFIX = "subagent__"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
#: A reasoning model's thoughts before its answer, as some OpenAI-compatible servers leave them in the text.
_THINKING = re.compile(r"^\s*<(think|thinking|reasoning)>.*?</\1>", re.DOTALL)
#: Opening braces tried when looking for an action inside prose.
_STARTS_TRIED = 20
#: Fed back when a model that was offered functions answers in prose.
PROSE_REPLY = "the reply is text, not a function call: call exactly one function, `done` with the final output"


@dataclass(frozen=True)
class Function:
    name: str
    description: str
    parameters: dict[str, Any]


def _wire_name(spec: ToolSpec) -> str:
    raw = spec.name.replace(".", "__") if spec.kind == "tool" else f"{SUBAGENT_PREFIX}{spec.name}"
    return _UNSAFE.sub("_", raw)[:64]


def function_overflow(agent: str, model: object, offered: int, *, code_mode: bool) -> TooManyFunctions | None:
    """The error for a call that would pass the cap: when `model` sends functions (`max_functions`, see
    `Model`) and `offered` tools and subagents, with `done` and `run_code`, are more than it takes."""
    limit = getattr(model, "max_functions", None)
    functions = offered + 1 + code_mode
    if limit is None or functions <= limit:
        return None
    extra = "`done` and `run_code`" if code_mode else "`done`"
    return TooManyFunctions(
        f"agent {agent!r} would offer the model {functions} functions ({offered} tools and subagents, and"
        f" {extra}); providers take at most {limit} in one request. Allow fewer servers in the agent's `tools`,"
        " equip fewer tools on its servers (a workbench offers only its equipped tools), or let the code-mode"
        " planner (`awb plan`, `execute_mcp_task`) find tools by search instead of offering every one",
        agent=agent,
        functions=functions,
        limit=limit,
        tools=offered,
    )


def _decoded(name: str, arguments: str) -> object:
    try:
        # Decoded here, not with the reply: the escapes of a lone surrogate are U+FFFD too.
        return surrogates_replaced(json.loads(arguments)) if arguments.strip() else {}
    except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
        raise MalformedAction(
            f"arguments of {name!r} are not valid JSON", function=name, reply=arguments[:200]
        ) from None


class FunctionTable:
    def __init__(self, tools: Sequence[ToolSpec], output_schema: dict[str, Any], *, code_mode: bool = False) -> None:
        self._by_wire = {_wire_name(spec): spec for spec in tools}
        self._code_mode = code_mode
        done = Function(DONE, "Finish the task and return the final output.", output_schema)
        self.functions = [done] + [
            Function(wire, spec.description or spec.name, spec.input_schema) for wire, spec in self._by_wire.items()
        ]
        if code_mode:
            self.functions.append(Function(RUN_CODE, RUN_CODE_DESCRIPTION, _RUN_CODE_PARAMETERS))

    def to_action(self, name: str, arguments: object) -> Action:
        if isinstance(arguments, str):
            arguments = _decoded(name, arguments)
            # Some models encode the arguments object as a JSON string, then that string again.
            if isinstance(arguments, str) and arguments.lstrip().startswith("{"):
                arguments = _decoded(name, arguments)
        if not isinstance(arguments, dict):
            raise MalformedAction(f"arguments of {name!r} must be a JSON object", function=name)
        if name == DONE:
            return Done(output=arguments)
        if name == RUN_CODE and self._code_mode and isinstance(arguments.get("code"), str):
            return RunCode(code=arguments["code"])
        spec = self._by_wire.get(name)
        if spec is None:
            if name.startswith(SUBAGENT_PREFIX):
                return SpawnSubagent(agent=name.removeprefix(SUBAGENT_PREFIX), input=arguments)
            return CallTool(tool=name.replace("__", ".", 1), arguments=arguments)
        if spec.kind == "subagent":
            return SpawnSubagent(agent=spec.name, input=arguments)
        return CallTool(tool=spec.name, arguments=arguments)

    def first_of(self, calls: Sequence[tuple[str, object]]) -> Action:
        """The first call as the action; the others are named on it as not run."""
        name, arguments = calls[0]
        return self.to_action(name, arguments).with_not_run([other for other, _ in calls[1:]])


#: How much of a refusal's words a run keeps: enough to say why, not a whole essay.
_REFUSAL_CHARS = 2000


def cut_off(err: MalformedAction, max_tokens: int | None) -> MalformedAction:
    """An unreadable reply the provider stopped at its length limit (`finish_reason: length`, `stop_reason:
    max_tokens`), said to be cut off: the model can answer with a shorter action, the person can raise
    `max_tokens`, and neither learns that from "not valid JSON" or "the reply is text"."""
    limit = f"the max_tokens limit ({max_tokens})" if max_tokens else "the provider's length limit"
    return MalformedAction(
        f"the reply was cut off at {limit} before its action was complete ({err.message}): reply with a shorter action",
        **{**err.details, "cut_off": True, "max_tokens": max_tokens},
    )


def refused(words: str) -> ModelRefused:
    """The model declined the task (an OpenAI `refusal`, an Anthropic `stop_reason: refusal`): the run ends
    with its words rather than feeding an empty reply back as malformed until the corrections run out."""
    words = words.strip()[:_REFUSAL_CHARS]
    return ModelRefused(f"the model refused: {words}" if words else "the model refused", refusal=words)


def parse_text_action(text: str, *, native: bool = False) -> Action:
    """A JSON action written as text. Models write around it: a reasoning block first (`<think>...</think>`,
    as reasoning models served by Ollama or llama.cpp do), a code fence, prose before or after. The action
    is the text itself, the fenced block, or (for a model asked to write JSON) the first JSON object in
    the prose that names an action.

    With `native` (the model was offered functions) prose is answered with how to call one.
    """
    stripped = _THINKING.sub("", text, count=1).strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        return parse_action(fenced.group(1))
    if stripped.startswith("{"):
        return parse_action(stripped)
    if native:
        raise MalformedAction(PROSE_REPLY, reply=text[:200])
    fenced_inside = _fenced_inside(stripped)
    if fenced_inside is not None:
        return parse_action(fenced_inside)
    action = _object_inside(stripped)
    if action is None:
        raise MalformedAction("expected one JSON action object", reply=text[:200])
    return parse_action(action)


def _fenced_inside(text: str) -> str | None:
    """The first fenced block in `text` that holds an object (found with `find`, not a regular expression:
    a reply full of unclosed fences must not cost time by the square of its length)."""
    opening = text.find("```")
    while opening >= 0:
        closing = text.find("```", opening + 3)
        if closing < 0:
            return None
        block = text[opening + 3 : closing].strip()
        block = block.removeprefix("json").strip()
        if block.startswith("{"):
            return block
        opening = text.find("```", closing + 3)
    return None


def _object_inside(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` that names an action; a few starts tried, so prose full of braces
    costs little."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(_STARTS_TRIED):
        if start < 0:
            return None
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
            value = None
        if isinstance(value, dict) and "action" in value:
            return value
        start = text.find("{", start + 1)
    return None
