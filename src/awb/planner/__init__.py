"""The code-mode planner: one task string in, a structured result out.

Tools from every connected MCP server are found with `search_tools`, called directly or from one Python
plan that runs in the sandbox (`run_python_plan`), and large results enter the model's context only as
summaries (`summarize_payload`), after secrets are masked (`redact_payload`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awb.planner.budget import Budget, BudgetSnapshot
    from awb.planner.plan_runner import SandboxResult, run_python_plan
    from awb.planner.summaries import summarize_payload
    from awb.planner.task import MCPTaskResult, execute_mcp_task, execute_mcp_task_sync
    from awb.redaction import redact_payload

__all__ = [
    "Budget",
    "BudgetSnapshot",
    "MCPTaskResult",
    "SandboxResult",
    "execute_mcp_task",
    "execute_mcp_task_sync",
    "redact_payload",
    "run_python_plan",
    "summarize_payload",
]

# Loaded on first use: `awb` imports `awb.planner.cli` to register `awb plan`, and the planner brings
# the MCP client and the agent runtime with it.
_HOMES = {
    "Budget": "awb.planner.budget",
    "BudgetSnapshot": "awb.planner.budget",
    "MCPTaskResult": "awb.planner.task",
    "SandboxResult": "awb.planner.plan_runner",
    "execute_mcp_task": "awb.planner.task",
    "execute_mcp_task_sync": "awb.planner.task",
    "redact_payload": "awb.redaction",
    "run_python_plan": "awb.planner.plan_runner",
    "summarize_payload": "awb.planner.summaries",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'awb.planner' has no attribute {name!r}")
