"""What a run reports: its typed output, why it stopped, and a ledger of what it did."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

TerminationReason = Literal[
    "done", "max_iterations", "max_tool_calls", "timeout", "output_invalid", "model_error", "tool_error"
]


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.requests += other.requests

    def minus(self, before: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens - before.input_tokens,
            output_tokens=self.output_tokens - before.output_tokens,
            requests=self.requests - before.requests,
        )


class ToolCallRecord(BaseModel):
    name: str
    arguments: dict[str, Any]
    duration_seconds: float
    ok: bool


class SubagentCallRecord(BaseModel):
    agent: str
    input: dict[str, Any]
    termination_reason: TerminationReason
    output: dict[str, Any] | None
    iterations: int
    tool_calls: list[ToolCallRecord]
    duration_seconds: float

    @property
    def ok(self) -> bool:
        return self.termination_reason == "done"


class RunResult(BaseModel):
    agent: str
    output: dict[str, Any] | None
    termination_reason: TerminationReason
    iterations: int = 0
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    subagent_calls: list[SubagentCallRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    #: Set when the run did not end in `done`: code, message and details, as every `AwbError`.
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.termination_reason == "done"
