"""A small agent runtime: typed agents, a one-action loop, MCP tools, subagents, providers."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awb.agents.agent import Agent
    from awb.agents.budget import Budget
    from awb.agents.events import RunEvent
    from awb.agents.models.settings import ModelSettings
    from awb.agents.result import RunResult
    from awb.agents.run import run_agent, run_agent_stream

__all__ = ["Agent", "Budget", "ModelSettings", "RunEvent", "RunResult", "run_agent", "run_agent_stream"]

# Loaded on first use: `awb` imports `awb.agents.cli` for its command list, and the runtime below
# brings the MCP client and every model provider with it.
_HOMES = {
    "Agent": "awb.agents.agent",
    "Budget": "awb.agents.budget",
    "RunEvent": "awb.agents.events",
    "ModelSettings": "awb.agents.models.settings",
    "RunResult": "awb.agents.result",
    "run_agent": "awb.agents.run",
    "run_agent_stream": "awb.agents.run",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'awb.agents' has no attribute {name!r}")
