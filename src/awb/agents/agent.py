"""Agents are classes that declare configuration, never behaviour; the loop does the work.

class Summarise(Agent):
    mode = "summarise"
    tools = ("files",)
    system_prompt = "Summarise the file you are given."

    class Input(BaseModel):
        path: str

    class Output(BaseModel):
        summary: str
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from awb.agents.budget import Budget
from awb.agents.errors import validation_errors
from awb.errors import InvalidParams


class Agent:
    #: The agent's identity: its name in `awb agents list` and for `spawn_subagent`.
    mode: ClassVar[str] = ""
    #: Allowed tool namespaces (MCP server names).
    tools: ClassVar[Sequence[str]] = ()
    Input: ClassVar[type[BaseModel]] = BaseModel
    Output: ClassVar[type[BaseModel]] = BaseModel
    system_prompt: ClassVar[str] = ""
    #: A model spec such as "openai:gpt-4o-mini"; the run's `model=` wins over it.
    model: ClassVar[str | None] = None
    subagents: ClassVar[Sequence[type[Agent]]] = ()
    budget: ClassVar[Budget] = Budget()
    #: Times an invalid `done` (or malformed action) is fed back before the run fails.
    output_retries: ClassVar[int] = 2
    stop_on_tool_error: ClassVar[bool] = False
    context_chars: ClassVar[int] = 16_000

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.mode:
            cls.mode = cls.__name__

    @classmethod
    def parse_input(cls, value: object) -> BaseModel:
        """Validate input given as a model, a dict, JSON text, or a plain string for one field."""
        try:
            if isinstance(value, cls.Input):
                return value
            if isinstance(value, str):
                return cls._parse_text(value)
            return cls.Input.model_validate(value)
        except ValidationError as err:
            raise InvalidParams(
                f"invalid input for agent {cls.mode!r}",
                errors=validation_errors(err),
            ) from None

    @classmethod
    def _parse_text(cls, text: str) -> BaseModel:
        stripped = text.strip()
        if stripped.startswith("{"):
            return cls.Input.model_validate_json(stripped)
        fields = list(cls.Input.model_fields)
        if len(fields) != 1:
            return cls.Input.model_validate_json(stripped)
        return cls.Input.model_validate({fields[0]: text})
