"""Compile a validated blueprint into `awb.agents` agents: head -> model and settings, arms -> tools,
legs -> one agent, a sequence of step agents, or a coordinator whose members are subagents.

Compiling is pure (no connections); `open_toolbox` connects the arms for one run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, Field

from awb.agents.addresses import plainly_private
from awb.agents.agent import Agent
from awb.agents.budget import Budget
from awb.agents.models.base import Model
from awb.agents.models.connections import Connections
from awb.agents.models.http import tls_context
from awb.agents.models.settings import ModelSettings
from awb.agents.models.spec import resolve_model
from awb.agents.toolbox import Toolbox
from awb.blueprints.errors import BlueprintInvalid
from awb.blueprints.journal import RunJournal
from awb.blueprints.knowledge import TOOL_NAMESPACE, KnowledgeLibrary, knowledge_handler, knowledge_spec
from awb.blueprints.schema import Blueprint, McpArm, TavilySearchArm, WorkbenchArm, knowledge_base_error
from awb.blueprints.tavily import DEFAULT_BASE_URL, tavily_handler, tavily_spec
from awb.meta_tools import served_names

if TYPE_CHECKING:
    from awb.agents.mcp_client import ServerTarget

WORKBENCH_NAMESPACE = "workbench"


class Turn(BaseModel):
    user: str
    assistant: str


class TurnInput(BaseModel):
    message: str
    history: list[Turn] = Field(default_factory=list, description="Earlier exchanges of this session, oldest first.")


class MemberInput(BaseModel):
    message: str = Field(description="What the coordinator asks this member to do.")


class Reply(BaseModel):
    response: str = Field(description="The answer, as text for the user.")


@dataclass(frozen=True)
class RuntimeOptions:
    """What the server (or CLI) lends a compiled blueprint; nothing here comes from the blueprint."""

    environ: Mapping[str, str] = field(default_factory=dict)
    tavily_base_url: str = DEFAULT_BASE_URL
    #: The workbench's own MCP server, for `workbench` arms.
    workbench_target: ServerTarget | None = None
    #: Blueprints posted over HTTP must not start programs on the server unless it says so.
    allow_mcp_commands: bool = False
    #: Off: `mcp` arms connect only to public addresses (`awb.agents.public_reach`); the REST face turns
    #: it off when callers may come from elsewhere (a bind off loopback).
    allow_private_mcp_urls: bool = True
    #: The knowledge bases `heart.knowledge` may name (`blueprints.knowledge`).
    knowledge: KnowledgeLibrary | None = None

    def knowledge_bases(self) -> tuple[str, ...]:
        return self.knowledge.names() if self.knowledge is not None else ()

    def secrets(self) -> tuple[str, ...]:
        return tuple(v for k, v in self.environ.items() if k.endswith(("_API_KEY", "_TOKEN")) and len(v) >= 4)


@dataclass(frozen=True)
class CompiledBlueprint:
    blueprint: Blueprint
    blueprint_id: str
    options: RuntimeOptions
    #: single_agent: one agent; workflow: the steps in order; team: the coordinator (members are its subagents).
    agents: tuple[type[Agent], ...]
    model_spec: str
    settings: dict[str, Any]

    def make_model(self) -> Model:
        """A fresh model client per run, so usage counts belong to that run."""
        settings = ModelSettings.model_validate(self.settings)
        return resolve_model(self.model_spec, environ=self.options.environ, settings=settings)

    @asynccontextmanager
    async def open_toolbox(self, journal: RunJournal) -> AsyncIterator[Toolbox]:
        """Connect the arms for one run; every tool comes out guarded and logged by `journal`."""
        # The SDK's client is imported by the first run that connects, not by a server that never runs one.
        from awb.agents.mcp_client import connect_servers

        targets: dict[str, ServerTarget] = {}
        allow: dict[str, set[str] | None] = {}
        for arm in self.blueprint.arms:
            if isinstance(arm, McpArm):
                targets[arm.name] = mcp_arm_target(arm, self.options)
                allow[arm.name] = set(arm.tools) if arm.tools is not None else None
            elif isinstance(arm, WorkbenchArm) and self.options.workbench_target is not None:
                targets[WORKBENCH_NAMESPACE] = self.options.workbench_target
                allow[WORKBENCH_NAMESPACE] = {n for t in arm.tools for n in served_names(t)} if arm.tools else None
        box = Toolbox()
        # The run's searches share kept-alive connections to Tavily, closed with the toolbox.
        searches = Connections(tls_context)
        async with connect_servers(targets) as connected, searches.held():
            for spec in connected.specs("tool"):
                wanted = allow.get(spec.namespace)
                if wanted is None or spec.name.partition(".")[2] in wanted:
                    box.add(spec, journal.guard(spec, partial(connected.call, spec)))
            for arm in self.blueprint.arms:
                if isinstance(arm, TavilySearchArm):
                    spec = tavily_spec(arm)
                    handler = tavily_handler(
                        arm,
                        api_key=self.options.environ.get("TAVILY_API_KEY"),
                        base_url=self.options.tavily_base_url,
                        allowed_domains=self.blueprint.spine.allowed_domains,
                        journal=journal,
                        connections=searches,
                    )
                    box.add(spec, journal.guard(spec, handler))
            knowledge = self.blueprint.heart.knowledge
            if knowledge.enabled and knowledge.knowledge_base and self.options.knowledge is not None:
                spec = knowledge_spec(knowledge.knowledge_base)
                box.add(spec, journal.guard(spec, knowledge_handler(self.options.knowledge, knowledge.knowledge_base)))
            yield box


def mcp_arm_target(arm: McpArm, options: RuntimeOptions) -> ServerTarget:
    """Where an `mcp` arm connects, for every target (this runtime and Agno): its command line, or its URL
    over streamable HTTP, dialling public addresses only (`awb.agents.public_reach`) unless `options` allow
    private ones. The one place a blueprint's URL becomes a connection."""
    from awb.agents.mcp_client import HttpServer

    if arm.url is None:
        return list(arm.command or [])
    return HttpServer(arm.url, public_only=not options.allow_private_mcp_urls)


def _namespaces(blueprint: Blueprint) -> tuple[str, ...]:
    names: list[str] = []
    for arm in blueprint.arms:
        if isinstance(arm, McpArm):
            names.append(arm.name)
        elif isinstance(arm, WorkbenchArm):
            names.append(WORKBENCH_NAMESPACE)
        else:
            names.append("tavily")
    if blueprint.heart.knowledge.enabled:
        names.append(TOOL_NAMESPACE)
    return tuple(names)


def _agent(
    mode: str,
    system_prompt: str,
    tools: Sequence[str],
    budget: Budget,
    *,
    input_model: type[BaseModel] = TurnInput,
    subagents: Sequence[type[Agent]] = (),
) -> type[Agent]:
    attributes = {
        "mode": mode,
        "tools": tuple(tools),
        "Input": input_model,
        "Output": Reply,
        "system_prompt": system_prompt,
        "budget": budget,
        "subagents": tuple(subagents),
    }
    return cast(type[Agent], type(f"Blueprint_{mode}", (Agent,), attributes))


def check_runtime(blueprint: Blueprint, options: RuntimeOptions) -> None:
    """What only the runtime can judge: commands it may start, a workbench to lend, the knowledge bases it has."""
    errors: list[dict[str, Any]] = []
    for index, arm in enumerate(blueprint.arms):
        if isinstance(arm, McpArm) and arm.command is not None and not options.allow_mcp_commands:
            errors.append(
                {
                    "path": f"arms[{index}].command",
                    "message": "this server does not start MCP servers by command "
                    "(blueprints.allow_mcp_commands is off); use url",
                    "type": "command_not_allowed",
                }
            )
        private = plainly_private(arm.url) if isinstance(arm, McpArm) and arm.url is not None else None
        if private is not None and not options.allow_private_mcp_urls:
            errors.append(
                {
                    "path": f"arms[{index}].url",
                    "message": f"{private} is not a public address; this server reaches MCP servers at public "
                    "addresses only (blueprints.allow_private_mcp_urls is off)",
                    "type": "url_not_allowed",
                }
            )
        if isinstance(arm, WorkbenchArm) and options.workbench_target is None:
            errors.append({"path": f"arms[{index}]", "message": "no workbench is running here", "type": "no_workbench"})
    knowledge = blueprint.heart.knowledge
    if knowledge.enabled and knowledge.knowledge_base not in options.knowledge_bases():
        configured = sorted(options.knowledge_bases())
        error = knowledge_base_error(configured)
        path = "heart.knowledge.knowledge_base"
        errors.append({"path": path, "message": error.message(), "type": error.type, "allowed": configured})
    if errors:
        raise BlueprintInvalid(f"invalid blueprint: {errors[0]['path']}: {errors[0]['message']}", errors=errors)


def compile_blueprint(blueprint: Blueprint, options: RuntimeOptions) -> CompiledBlueprint:
    check_runtime(blueprint, options)
    head, legs, spine = blueprint.head, blueprint.legs, blueprint.spine
    tools = _namespaces(blueprint)
    # Iterations bound the turns a tool-call budget leaves room for; the spine's two limits do the rest.
    budget = Budget(
        max_iterations=spine.max_tool_calls + 10,
        max_tool_calls=spine.max_tool_calls,
        timeout_seconds=spine.timeout_seconds,
    )
    settings: dict[str, Any] = {}
    if head.temperature is not None:
        settings["temperature"] = head.temperature
    if head.max_tokens is not None:
        settings["max_tokens"] = head.max_tokens
    prompt = head.system_prompt.strip()
    agents: tuple[type[Agent], ...]
    if legs.mode == "workflow":
        agents = tuple(
            _agent(step.name, f"{prompt}\n\n## Your step: {step.name}\n{step.instructions}".strip(), tools, budget)
            for step in legs.steps
        )
    elif legs.mode == "team":
        members = [
            _agent(
                member.name,
                f"{member.role}\n{member.instructions}".strip(),
                tools,
                budget,
                input_model=MemberInput,
            )
            for member in legs.members
        ]
        roster = "\n".join(f"- {m.name}: {m.role or m.instructions[:200]}" for m in legs.members)
        coordinator = f"{prompt}\n\n## Your team\nDelegate to these members when it helps:\n{roster}".strip()
        agents = (_agent("coordinator", coordinator, tools, budget, subagents=members),)
    else:
        agents = (_agent(blueprint.name.replace(" ", "_"), prompt, tools, budget),)
    return CompiledBlueprint(
        blueprint=blueprint,
        blueprint_id=blueprint.blueprint_id(),
        options=options,
        agents=agents,
        model_spec=f"{head.provider}:{head.model}",
        settings=settings,
    )
