"""Provider settings an agent or a run may set: sampling, length, time and retries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelSettings(BaseModel):
    """Unset fields (None) leave the adapter's default; `merged` lets a run override an agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(None, ge=0, le=2)
    #: Upper bound on the tokens of one reply (Anthropic requires one; 4096 when unset).
    max_tokens: int | None = Field(None, ge=1)
    #: Seconds one HTTP request may take, connection to last byte.
    timeout_seconds: float | None = Field(None, gt=0)
    #: Retries of a transient failure (5xx, 408, 409, 429, timeout, connection error).
    max_retries: int | None = Field(None, ge=0, le=10)
    #: Longest wait a provider's `retry-after` may impose before a retry.
    max_retry_wait_seconds: float | None = Field(None, ge=0)
    #: Ask the provider for one tool call per reply; None sends nothing.
    parallel_tool_calls: bool | None = None

    def merged(self, over: ModelSettings | None) -> ModelSettings:
        """These settings with every field `over` sets taking precedence."""
        if over is None:
            return self
        return self.model_copy(update=over.model_dump(exclude_none=True))
