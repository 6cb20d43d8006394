"""The actions a model may take, one per turn: a discriminated union on `action`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError

from awb.agents.errors import MalformedAction, validation_errors
from awb.text import MAX_RESULT_DEPTH, nesting_depth


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: A short observation the model wants to keep in working memory.
    note: str | None = None
    _not_run: list[str] = PrivateAttr(default_factory=list)

    @property
    def not_run(self) -> list[str]:
        """Further tool calls of the same reply, which the runtime does not execute (one action per step)."""
        return list(self._not_run)

    def with_not_run(self, names: list[str]) -> Self:
        """This action, noting the other calls its reply made; adapters use it for multi-call replies."""
        self._not_run = list(names)
        return self


class CallTool(_Action):
    action: Literal["call_tool"] = "call_tool"
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class SpawnSubagent(_Action):
    action: Literal["spawn_subagent"] = "spawn_subagent"
    agent: str
    input: dict[str, Any] | str


class RunCode(_Action):
    action: Literal["run_code"] = "run_code"
    code: str


class Done(_Action):
    action: Literal["done"] = "done"
    output: Any


Action = Annotated[CallTool | SpawnSubagent | RunCode | Done, Field(discriminator="action")]
_ADAPTER: TypeAdapter[Action] = TypeAdapter(Action)

#: JSON Schema of one action, for providers that take actions as plain JSON text.
ACTION_SCHEMA: dict[str, Any] = _ADAPTER.json_schema()


def parse_action(data: object) -> Action:
    """Validate `data` (a dict or JSON text) as one action, or raise `MalformedAction`."""
    try:
        if isinstance(data, str | bytes):
            return _ADAPTER.validate_json(data)
        return _ADAPTER.validate_python(data)
    except ValidationError as err:
        raise MalformedAction(
            "the reply is not one valid action",
            errors=validation_errors(err),
        ) from None


#: How deeply an action's arguments, input or output may nest: the run's records are written by encoders
#: that recurse (pydantic's stops at about 250 levels, and the run with it), so deeper is refused as a
#: tool's result is (`awb.text.MAX_RESULT_DEPTH`).
MAX_ACTION_DEPTH = MAX_RESULT_DEPTH


def check_nesting(action: Action) -> Action:
    """`action`, or `MalformedAction` when its free-form part nests deeper than MAX_ACTION_DEPTH."""
    field: str = ""
    value: Any = None
    if isinstance(action, CallTool):
        field, value = "arguments", action.arguments
    elif isinstance(action, SpawnSubagent):
        field, value = "input", action.input
    elif isinstance(action, Done):
        field, value = "output", action.output
    if nesting_depth(value, MAX_ACTION_DEPTH) > MAX_ACTION_DEPTH:
        raise MalformedAction(
            f"the {field} of the {action.action} action nest deeper than {MAX_ACTION_DEPTH} levels",
            limit=MAX_ACTION_DEPTH,
        )
    return action
