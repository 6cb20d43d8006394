"""Per-run limits: how many turns, how many tool calls, how much wall-clock time."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(20, ge=1)
    max_tool_calls: int = Field(50, ge=0)
    timeout_seconds: float = Field(300.0, gt=0)
