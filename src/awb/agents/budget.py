"""Per-run limits: turns, tool calls, wall-clock time, tokens and money.

Token and cost limits count every model request of the run, subagents included; the cost comes
from the offline price table (`awb.agents.pricing`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(20, ge=1)
    #: Tool calls of the whole run: a subagent's calls count toward its parent's limit too.
    max_tool_calls: int = Field(50, ge=0)
    timeout_seconds: float = Field(300.0, gt=0)
    max_input_tokens: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    max_total_tokens: int | None = Field(None, ge=1)
    #: Needs a model whose price the table knows; the run refuses to start otherwise.
    max_cost_usd: float | None = Field(None, gt=0)
