"""A small agent runtime: typed agents, a one-action loop, MCP tools, subagents, providers."""

from awb.agents.agent import Agent
from awb.agents.budget import Budget
from awb.agents.result import RunResult
from awb.agents.run import run_agent

__all__ = ["Agent", "Budget", "RunResult", "run_agent"]
