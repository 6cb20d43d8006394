"""A small agent runtime: typed agents, a one-action loop, MCP tools, subagents, providers."""

from awb.agents.agent import Agent
from awb.agents.budget import Budget
from awb.agents.events import RunEvent
from awb.agents.models.settings import ModelSettings
from awb.agents.result import RunResult
from awb.agents.run import run_agent, run_agent_stream

__all__ = ["Agent", "Budget", "ModelSettings", "RunEvent", "RunResult", "run_agent", "run_agent_stream"]
