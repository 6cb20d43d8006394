"""What a run reports: its typed output, why it stopped, and a ledger of every step it took."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, computed_field, model_serializer

from awb.agents.repeats import without_repeats

TerminationReason = Literal[
    "done",
    "max_iterations",
    "max_tool_calls",
    "max_code_runs",
    "max_tokens",
    "max_cost",
    "timeout",
    "output_invalid",
    "model_error",
    "tool_error",
    "refused",
]


#: How a run ended: its reason, its output (set when `done`), its error (set otherwise).
Ending = tuple[TerminationReason, dict[str, Any] | None, dict[str, Any] | None]


def stopped(reason: TerminationReason, message: str, **details: Any) -> Ending:
    """The ending of a run stopped by `reason` (a limit, an unusable reply, a failed tool)."""
    return reason, None, {"code": reason, "message": message, "details": details}


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    #: HTTP requests actually sent to the provider, failed attempts and retries included.
    requests: int = 0
    #: Of those, the ones that failed (HTTP error, timeout, unusable body).
    failed_requests: int = 0
    #: Price of the tokens from the offline price table; None when the model's price is unknown.
    cost_usd: float | None = None
    #: Replies whose token counts are estimates: the provider reported no usable usage, so the tokens
    #: were counted from characters (`awb.agents.models.tokens`), and budgets still hold.
    estimated_replies: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def estimated(self) -> bool:
        """Whether the token counts (and so `cost_usd`) hold an estimate: not figures to bill by."""
        return self.estimated_replies > 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests
        self.failed_requests += other.failed_requests
        self.estimated_replies += other.estimated_replies
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def minus(self, before: Usage) -> Usage:
        cost = None
        if self.cost_usd is not None:
            cost = self.cost_usd - (before.cost_usd or 0.0)
        return Usage(
            input_tokens=self.input_tokens - before.input_tokens,
            output_tokens=self.output_tokens - before.output_tokens,
            requests=self.requests - before.requests,
            failed_requests=self.failed_requests - before.failed_requests,
            cost_usd=cost,
            estimated_replies=self.estimated_replies - before.estimated_replies,
        )


class ToolError(BaseModel):
    """Why a tool call failed: the server's own error code when it gives one (awb tools do)."""

    code: str
    message: str


class ToolCallRecord(BaseModel):
    name: str
    arguments: dict[str, Any]
    duration_seconds: float
    ok: bool
    error: ToolError | None = None


class RejectedAction(BaseModel):
    """A reply the runtime did not execute, and why; the reason was fed back to the model."""

    code: str
    message: str
    #: What was rejected: the action as parsed, or the part of the reply it was made from.
    reply: Any = None
    errors: list[dict[str, Any]] = Field(default_factory=list)


class StepRecord(BaseModel):
    """One turn of the loop: one model reply (after any corrections) and the action it led to."""

    index: int
    #: The action executed, as the model gave it; None when every reply of the step was rejected.
    action: dict[str, Any] | None = None
    rejected: list[RejectedAction] = Field(default_factory=list)
    #: Extra tool calls in the same reply that were not run (one action per step).
    not_run: list[str] = Field(default_factory=list)
    tool_call: ToolCallRecord | None = None
    subagent: SubagentCallRecord | None = None
    duration_seconds: float = 0.0
    usage: Usage = Field(default_factory=Usage)


class SubagentCallRecord(BaseModel):
    agent: str
    input: dict[str, Any]
    termination_reason: TerminationReason
    output: dict[str, Any] | None
    iterations: int
    tool_calls: list[ToolCallRecord]
    duration_seconds: float
    steps: list[StepRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.termination_reason == "done"


class PartialOutput(BaseModel):
    """The best a run that did not finish can offer."""

    #: The last output the model proposed with `done`, and whether it matched the Output model.
    last_output: Any = None
    valid: bool = False
    #: The newest observations in working memory, as the model last saw them.
    observations: list[str] = Field(default_factory=list)


class RunResult(BaseModel):
    """A run's report. Its JSON writes each large value once (`awb.agents.repeats`): the first
    appearance in full, later ones as a marker naming where it is."""

    agent: str
    output: dict[str, Any] | None
    termination_reason: TerminationReason
    iterations: int = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    subagent_calls: list[SubagentCallRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    #: Set when the run did not end in `done`: code, message and details, as every `AwbError`.
    error: dict[str, Any] | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    duration_seconds: float = 0.0
    #: Set when the run did not end in `done`.
    partial: PartialOutput | None = None

    @property
    def ok(self) -> bool:
        return self.termination_reason == "done"

    @model_serializer(mode="wrap", when_used="json")
    def _once(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_repeats(handler(self), type(self))


StepRecord.model_rebuild()
