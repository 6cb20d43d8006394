"""A small agent runtime: typed agents, a one-action loop, MCP tools, subagents, providers."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awb.agents.agent import Agent
    from awb.agents.budget import Budget
    from awb.agents.result import RunResult
    from awb.agents.run import run_agent

__all__ = ["Agent", "Budget", "RunResult", "run_agent"]

# Loaded on first use: `awb` imports `awb.agents.cli` for its command list, and the runtime below
# brings the MCP client and every model provider with it.
_HOMES = {
    "Agent": "awb.agents.agent",
    "Budget": "awb.agents.budget",
    "RunResult": "awb.agents.result",
    "run_agent": "awb.agents.run",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'awb.agents' has no attribute {name!r}")
