"""Instruction improvement: an agent on the configured model rewrites a system prompt toward the
user's goals and says what it changed. On failure the caller gets the original back with the error; a
model that declines is no failure: the answer is the original, unchanged, with the model's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from awb.agents.agent import Agent
from awb.agents.budget import Budget
from awb.agents.errors import ModelError
from awb.agents.loop import run_loop
from awb.agents.models.spec import resolve_model
from awb.agents.toolbox import Toolbox
from awb.blueprints import catalog
from awb.errors import AwbError


class ImproveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt `goal` is an error, not a request without goals

    instructions: str = Field(max_length=catalog.SYSTEM_PROMPT_MAX_CHARS, description="The current system prompt.")
    goals: str = Field("", max_length=2000, description="What the improvement should achieve.")


class ImprovedInstructions(BaseModel):
    improved_instructions: str = Field(max_length=catalog.SYSTEM_PROMPT_MAX_CHARS)
    explanation: str = Field(description="What changed and why.")


class Improvement(ImprovedInstructions):
    """What the caller gets: the agent's output (`ok`), or (`refused`) the input unchanged and the model's
    words declining it as the explanation."""

    status: Literal["ok", "refused"] = Field("ok", description="`ok`, or `refused` when the model declined.")


class ImproveFailed(AwbError):
    """The improvement did not happen; `details.original_instructions` holds the input, unchanged."""

    code = "improve_failed"
    http_status = 502


class InstructionImprover(Agent):
    mode = "instruction_improver"
    Input = ImproveRequest
    Output = ImprovedInstructions
    budget = Budget(max_iterations=3, max_tool_calls=0, timeout_seconds=120)
    system_prompt = (
        "You improve the system prompts of AI agents. Keep the author's intent, role and constraints; "
        "make the instructions clearer, more specific and better structured, toward the given goals. "
        "Do not invent facts or capabilities. Return the full improved instructions and a short "
        "explanation of each change."
    )


async def improve_instructions(request: ImproveRequest, *, model_spec: str, environ: Mapping[str, str]) -> Improvement:
    try:
        model = resolve_model(model_spec, environ=environ)
        result = await run_loop(InstructionImprover, request, model, Toolbox())
    except AwbError as err:
        raise ImproveFailed(err.message, original_instructions=request.instructions, cause=err.to_dict()) from None
    if result.termination_reason == "refused":
        # The model's answer, as a refused run's is (REST 200, `status: "refused"`), not a provider failure.
        words = str(((result.error or {}).get("details") or {}).get("refusal", ""))
        return Improvement(
            improved_instructions=request.instructions,
            explanation=f"the model declined: {words}" if words else "the model declined",
            status="refused",
        )
    if not result.ok or result.output is None:
        error = result.error or {}
        message = str(error.get("message") or f"the improvement ended in {result.termination_reason}")
        cause = ModelError(message, reason=result.termination_reason).to_dict()
        raise ImproveFailed(message, original_instructions=request.instructions, cause=cause)
    return Improvement.model_validate(result.output)
