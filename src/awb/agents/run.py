"""The library entry points: `await run_agent(AgentClass, input, model=..., servers=...)`, and
`run_agent_stream(...)`, the same run as an async iterator of `RunEvent`s."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping

import anyio
from pydantic import BaseModel

from awb.agents.agent import Agent
from awb.agents.errors import TooManyFunctions
from awb.agents.events import Emitter, EventHandler, RunEvent
from awb.agents.loop import run_loop
from awb.agents.mcp_client import CONNECT_TIMEOUT_SECONDS, ServerTarget, connect_servers
from awb.agents.models.base import Model
from awb.agents.models.functions import function_overflow
from awb.agents.models.settings import ModelSettings
from awb.agents.models.spec import resolve_model
from awb.agents.pricing import has_price
from awb.agents.result import RunResult
from awb.agents.scope import RunScope
from awb.agents.toolbox import Toolbox
from awb.errors import ConfigError


def _model_for(agent: type[Agent], model: Model | str | None, base_url: str | None) -> Model:
    if model is None:
        model = agent.model
    if model is None:
        raise ConfigError(f"agent {agent.mode!r} declares no model; pass one (e.g. 'openai:gpt-4o-mini')")
    return resolve_model(model, base_url=base_url) if isinstance(model, str) else model


def _subagent_models(agent: type[Agent]) -> dict[str, Model]:
    """Each subagent's own model, resolved once per run (specs read keys and base URLs from the environment)."""
    return {
        sub.mode: resolve_model(sub.model) if isinstance(sub.model, str) else sub.model
        for sub in agent.subagents
        if sub.model is not None
    }


def _function_overflow(
    agent: type[Agent], toolbox: Toolbox, model: Model, own: dict[str, Model]
) -> TooManyFunctions | None:
    """Why the run may not start: its agent or a subagent would offer its model too many functions."""
    offered = len(toolbox.view(agent.tools, subagents=False).specs()) + len(agent.subagents)
    overflow = function_overflow(agent.mode, model, offered, code_mode=agent.code_mode)
    for sub in agent.subagents:
        tools = len(toolbox.view(sub.tools, subagents=False).specs())
        overflow = overflow or function_overflow(sub.mode, own.get(sub.mode, model), tools, code_mode=sub.code_mode)
    return overflow


def _check_prices(agent: type[Agent], models: list[Model]) -> None:
    if agent.budget.max_cost_usd is None:
        return
    for model in models:
        if not has_price(model):
            raise ConfigError(
                f"agent {agent.mode!r} has max_cost_usd, but the price table does not know model {model!r}",
                model=repr(model),
            )


async def run_agent(
    agent: type[Agent],
    input: object,
    *,
    model: Model | str | None = None,
    servers: Mapping[str, ServerTarget] | None = None,
    base_url: str | None = None,
    model_settings: ModelSettings | None = None,
    on_event: EventHandler | None = None,
) -> RunResult:
    """Validate the input, connect the servers the run may use, and run the agent to an ending.

    Only servers some agent of the run allows (its own `tools` or a subagent's) are started.
    `model_settings` override the agent's own; `on_event` receives every `RunEvent` as it happens.

    Raises before the run starts: `InvalidParams` for invalid input, `AgentDefinitionError` for an
    agent without Input/Output or with a namespace no server in `servers` provides, `ConfigError`
    for an unusable model or a cost limit on a model without a known price, `ServerUnavailable` for
    a server that cannot be reached, `TooManyFunctions` for an agent (or subagent) that would offer
    its model more functions than providers take. Everything after the start is reported in the `RunResult`.
    """
    available = dict(servers or {})
    agent.check_runnable(available)
    task = agent.parse_input(input)
    chosen = _model_for(agent, model, base_url)
    own = _subagent_models(agent)
    _check_prices(agent, [chosen, *own.values()])
    scope = RunScope(
        agent.budget,
        emit=Emitter(on_event),
        settings=model_settings,
        own_model=lambda sub: own.get(sub.mode),
    )
    needed = agent.namespaces()
    wanted = {name: target for name, target in available.items() if name in needed}
    # A server is given no longer to answer than the run itself has.
    wait = min(CONNECT_TIMEOUT_SECONDS, agent.budget.timeout_seconds)
    async with connect_servers(wanted, timeout=wait, within=agent.budget.timeout_seconds) as toolbox:
        overflow = _function_overflow(agent, toolbox, chosen, own)
        if overflow is None:
            return await _run(agent, task, chosen, toolbox, scope)
    # Raised once the servers are closed: from inside their context it would come wrapped in exception groups.
    raise overflow


async def _run(agent: type[Agent], task: BaseModel, model: Model, toolbox: Toolbox, scope: RunScope) -> RunResult:
    # Only an agent that asks for code mode gets `run_code` (the loop checks each agent's own `code_mode`);
    # the runner exists when the lead or any of its subagents asks.
    if not any(each.code_mode for each in (agent, *agent.subagents)):
        return await run_loop(agent, task, model, toolbox, scope=scope)
    # Plans run in the planner's runner, over the same tools the agent may call directly (a subagent's
    # plans reach only its own, a subset).
    from awb.planner.code_mode import CodeMode
    from awb.planner.plan_runner import PlanRunner

    async with PlanRunner(toolbox.view(agent.tools, subagents=False)) as runner:
        scope.code_runner = CodeMode(runner, scope, max_tool_calls=agent.budget.max_tool_calls)
        return await run_loop(agent, task, model, toolbox, scope=scope)


async def run_agent_stream(
    agent: type[Agent],
    input: object,
    *,
    model: Model | str | None = None,
    servers: Mapping[str, ServerTarget] | None = None,
    base_url: str | None = None,
    model_settings: ModelSettings | None = None,
) -> AsyncIterator[RunEvent]:
    """`run_agent` as an async iterator of its events; the last one is the top-level `done`, whose
    `data["result"]` is the `RunResult` as JSON. Errors raised before the run starts propagate.
    To stop early, iterate inside `contextlib.aclosing(...)`: closing the iterator cancels the run.

        async for event in run_agent_stream(Hello, "Ada", model=model, servers=servers):
            print(event.type, event.data)
    """
    send, receive = anyio.create_memory_object_stream[RunEvent](math.inf)
    failure: list[Exception] = []

    async def produce() -> None:
        async with send:
            try:
                await run_agent(
                    agent,
                    input,
                    model=model,
                    servers=servers,
                    base_url=base_url,
                    model_settings=model_settings,
                    on_event=send.send,
                )
            except Exception as err:  # re-raised as itself below, not wrapped in an exception group
                failure.append(err)

    async with anyio.create_task_group() as group, receive:
        group.start_soon(produce)
        async for event in receive:
            try:
                yield event
            except GeneratorExit:
                # The caller stopped listening (`aclose`): stop the run rather than finish it unseen.
                group.cancel_scope.cancel()
                break
    if failure:
        raise failure[0]
