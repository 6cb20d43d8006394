"""The planner's budget, as the spec names it, and what a task used of it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, computed_field


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(10, ge=1)
    max_tool_calls: int = Field(30, ge=0)
    max_code_runs: int = Field(3, ge=0)
    #: Enforced when the model's price is in the offline table; otherwise the cost is reported unknown.
    max_llm_cost_usd: float | None = Field(0.50, gt=0)
    timeout_seconds: float = Field(300.0, gt=0)


class BudgetSnapshot(BaseModel):
    steps_taken: int = 0
    tool_calls: int = 0
    code_runs: int = 0
    llm_cost_usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model_requests: int = 0
    #: Of the model's replies, those whose tokens (and so cost) are estimates: the provider reported no usage.
    estimated_model_replies: int = 0
    limits: Budget = Field(default_factory=Budget)

    # Not `tokens_estimated`: the telemetry's redaction masks what a key naming a token holds, but counts.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def usage_estimated(self) -> bool:
        """Whether the token counts (and so `llm_cost_usd`) hold an estimate: not figures to bill by."""
        return self.estimated_model_replies > 0
