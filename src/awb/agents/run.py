"""The library entry point: `await run_agent(AgentClass, input, model=..., servers=...)`."""

from __future__ import annotations

from collections.abc import Mapping

from awb.agents.agent import Agent
from awb.agents.loop import run_loop
from awb.agents.mcp_client import ServerTarget, connect_servers
from awb.agents.models.base import Model
from awb.agents.models.spec import resolve_model
from awb.agents.result import RunResult
from awb.errors import ConfigError


def _model_for(agent: type[Agent], model: Model | str | None, base_url: str | None) -> Model:
    if model is None:
        model = agent.model
    if model is None:
        raise ConfigError(f"agent {agent.mode!r} declares no model; pass one (e.g. 'openai:gpt-4o-mini')")
    return resolve_model(model, base_url=base_url) if isinstance(model, str) else model


async def run_agent(
    agent: type[Agent],
    input: object,
    *,
    model: Model | str | None = None,
    servers: Mapping[str, ServerTarget] | None = None,
    base_url: str | None = None,
) -> RunResult:
    """Validate the input, connect the servers the run names, and run the agent to an ending.

    Invalid input raises `InvalidParams`; an unreachable server raises `ServerUnavailable`.
    Everything that happens after the run starts is reported in the `RunResult` instead.
    """
    task = agent.parse_input(input)
    chosen = _model_for(agent, model, base_url)
    async with connect_servers(servers or {}) as toolbox:
        return await run_loop(agent, task, chosen, toolbox)
