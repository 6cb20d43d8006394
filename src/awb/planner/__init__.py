"""The code-mode planner: one task string in, a structured result out.

Tools from every connected MCP server are found with `search_tools`, called directly or from one Python
plan that runs in the sandbox (`run_python_plan`), and large results enter the model's context only as
summaries (`summarize_payload`), after secrets are masked (`redact_payload`).
"""

from awb.planner.budget import Budget, BudgetSnapshot
from awb.planner.plan_runner import SandboxResult, run_python_plan
from awb.planner.redaction import redact_payload
from awb.planner.summaries import summarize_payload
from awb.planner.task import MCPTaskResult, execute_mcp_task, execute_mcp_task_sync

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
