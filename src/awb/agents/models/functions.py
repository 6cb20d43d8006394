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
from awb.agents.errors import MalformedAction, TooManyFunctions
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
            try:
                # Decoded here, not with the reply: the escapes of a lone surrogate are U+FFFD too.
                arguments = surrogates_replaced(json.loads(arguments)) if arguments.strip() else {}
            except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
                raise MalformedAction(
                    f"arguments of {name!r} are not valid JSON", function=name, reply=str(arguments)[:200]
                ) from None
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


def parse_text_action(text: str, *, native: bool = False) -> Action:
    """A JSON action written as text, tolerating the code fence many models wrap it in.

    With `native` (the model was offered functions) prose is answered with how to call one.
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    if not stripped.startswith("{"):
        if native:
            raise MalformedAction(PROSE_REPLY, reply=text[:200])
        raise MalformedAction("expected one JSON action object", reply=text[:200])
    return parse_action(stripped)
