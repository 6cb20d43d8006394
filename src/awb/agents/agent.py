"""Agents are classes that declare configuration, never behaviour; the loop does the work.

class Summarise(Agent):
    mode = "summarise"
    tools = ("files",)
    system_prompt = "Summarise the file you are given."

    class Input(BaseModel):
        path: str

    class Output(BaseModel):
        summary: str

A class that cannot work fails when it is defined (Input/Output that are not pydantic models, a
subagent allowed tools its parent is not) or when a run starts (`check_runnable`: no Input/Output
declared, a namespace no configured server provides), with one `AgentDefinitionError`.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError

from awb.agents.budget import Budget
from awb.agents.errors import AgentDefinitionError, validation_errors
from awb.agents.models.settings import ModelSettings
from awb.errors import InvalidParams, check_unicode

if TYPE_CHECKING:
    from awb.agents.models.base import Model


class Agent:
    #: The agent's identity: its name in `awb agents list` and for `spawn_subagent`.
    mode: ClassVar[str] = ""
    #: Allowed tool namespaces (MCP server names).
    tools: ClassVar[Sequence[str]] = ()
    Input: ClassVar[type[BaseModel]] = BaseModel
    Output: ClassVar[type[BaseModel]] = BaseModel
    system_prompt: ClassVar[str] = ""
    #: A model spec such as "openai:gpt-4o-mini", or a model object. The run's `model=` wins over
    #: it for the agent run; a subagent always uses its own when it declares one.
    model: ClassVar[str | Model | None] = None
    #: Provider settings (temperature, max_tokens, timeout, retries); a run's settings win.
    model_settings: ClassVar[ModelSettings | None] = None
    subagents: ClassVar[Sequence[type[Agent]]] = ()
    budget: ClassVar[Budget] = Budget()
    #: Corrections per step: times an invalid `done` or malformed reply is fed back before the run
    #: fails. Every accepted reply restores the full count.
    output_retries: ClassVar[int] = 2
    stop_on_tool_error: ClassVar[bool] = False
    context_chars: ClassVar[int] = 16_000
    #: Code mode: the model may answer with `run_code`, one Python plan that calls the agent's tools
    #: from the sandbox (`awb.planner`); the plan's calls count toward `budget.max_tool_calls`.
    code_mode: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.mode:
            cls.mode = cls.__name__
        for name in ("Input", "Output"):
            value = getattr(cls, name)
            if not (inspect.isclass(value) and issubclass(value, BaseModel)):
                raise AgentDefinitionError(
                    f"agent {cls.__name__}: {name} must be a pydantic BaseModel subclass, got {value!r}",
                    agent=cls.__name__,
                )
        for sub in cls.subagents:
            if not (inspect.isclass(sub) and issubclass(sub, Agent)):
                raise AgentDefinitionError(f"agent {cls.__name__}: subagent {sub!r} is not an Agent subclass")
            beyond = [namespace for namespace in sub.tools if namespace not in cls.tools]
            if beyond:
                raise AgentDefinitionError(
                    f"agent {cls.__name__}: subagent {sub.mode!r} allows tools {beyond} that {cls.mode!r} does not;"
                    " a subagent may only use tools its parent can",
                    agent=cls.__name__,
                    subagent=sub.mode,
                    namespaces=beyond,
                )

    @classmethod
    def namespaces(cls) -> set[str]:
        """Every tool namespace a run of this agent may use, its subagents' included."""
        return set(cls.tools).union(*(sub.tools for sub in cls.subagents))

    @classmethod
    def check_runnable(cls, servers: Collection[str]) -> None:
        """Raise `AgentDefinitionError` unless the agent and its subagents can run with `servers`."""
        for agent in (cls, *cls.subagents):
            missing = [name for name in ("Input", "Output") if getattr(agent, name) is BaseModel]
            if missing:
                raise AgentDefinitionError(
                    f"agent {agent.mode!r} declares no {' or '.join(missing)} model (pydantic BaseModel subclasses)",
                    agent=agent.mode,
                )
            unserved = sorted(set(agent.tools) - set(servers))
            if unserved:
                raise AgentDefinitionError(
                    f"agent {agent.mode!r} allows tools from {unserved}, but no server of that name is configured"
                    f" (configured: {sorted(servers) or 'none'}); add it with --server, --servers or mcp_servers",
                    agent=agent.mode,
                    namespaces=unserved,
                    configured=sorted(servers),
                )

    @classmethod
    def parse_input(cls, value: object) -> BaseModel:
        """Validate input given as a model, a dict, JSON text, or a plain string for one field."""
        try:
            if isinstance(value, cls.Input):
                task = value
            elif isinstance(value, str):
                task = cls._parse_text(value)
            else:
                task = cls.Input.model_validate(value)
        except ValidationError as err:
            raise InvalidParams(
                f"invalid input for agent {cls.mode!r}",
                errors=validation_errors(err),
            ) from None
        check_unicode(task.model_dump(), "input")
        return task

    @classmethod
    def _parse_text(cls, text: str) -> BaseModel:
        stripped = text.strip()
        if stripped.startswith("{"):
            return cls.Input.model_validate_json(stripped)
        fields = list(cls.Input.model_fields)
        if len(fields) != 1:
            return cls.Input.model_validate_json(stripped)
        return cls.Input.model_validate({fields[0]: text})
