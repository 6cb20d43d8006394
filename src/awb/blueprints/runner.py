"""Run a compiled blueprint on one message: restore the session, drive the legs under the spine's
limits, log the run, store the exchange, and turn every ending into a reply or one clear error.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
from pydantic import BaseModel, Field

from awb.agents.errors import ModelError, TooManyFunctions
from awb.agents.loop import run_loop
from awb.agents.models.connections import connections_kept
from awb.agents.result import RunResult, Usage
from awb.agents.toolbox import Toolbox
from awb.blueprints.compile import CompiledBlueprint, Turn, TurnInput
from awb.blueprints.errors import GuardrailViolated, RunFailed
from awb.blueprints.journal import LogLimits, RunJournal, ToolCallSummary
from awb.blueprints.sessions import SessionStore, check_run_input
from awb.errors import AwbError

#: Loop endings that are a spine guardrail, by the guardrail's name.
_GUARDRAILS = {"max_tool_calls": "max_tool_calls", "timeout": "timeout_seconds", "max_iterations": "max_iterations"}
#: How long a cancelled run may take to save its log (a thread's write to the session store).
_SAVE_ON_CANCEL_SECONDS = 5.0


class RunReply(BaseModel):
    #: The answer; for a `refused` run, the model's words declining.
    response: str
    session_id: str
    run_id: str
    blueprint_id: str
    #: `ok`, or `refused` when the model declined the message (a finished run, not a provider failure).
    status: str = "ok"
    latency_ms: float
    tool_calls: list[ToolCallSummary] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)


async def _drive(compiled: CompiledBlueprint, message: str, history: list[Turn], box: Toolbox) -> list[RunResult]:
    """Run the legs; workflow steps hand each output on as the next step's message."""
    model = compiled.make_model()
    results: list[RunResult] = []
    task: BaseModel = TurnInput(message=message, history=history)
    # A workflow's steps share the run's connections to the provider, not only each step's own turns.
    async with connections_kept([model]):
        for agent in compiled.agents:
            result = await run_loop(agent, task, model, box)
            results.append(result)
            if not result.ok or result.output is None:
                break
            task = TurnInput(message=str(result.output.get("response", "")))
    return results


def _refusal(result: RunResult) -> str | None:
    """The model's words when it declined the message (an ending of the run, answered as one), else None."""
    if result.termination_reason != "refused":
        return None
    return str(((result.error or {}).get("details") or {}).get("refusal", ""))


def _failure(result: RunResult, compiled: CompiledBlueprint) -> AwbError:
    error = result.error or {}
    reason = result.termination_reason
    # A team's members share the spine's budgets: a member stopped by the tool-call budget ends the
    # coordinator's run with it (awb.agents); one stopped by its turns may be why the coordinator ran out.
    stopped = [c.termination_reason for c in result.subagent_calls if c.termination_reason in _GUARDRAILS]
    if reason == "max_iterations" and stopped:
        reason = stopped[-1]
    if reason in _GUARDRAILS:
        name = _GUARDRAILS[reason]
        spine = compiled.blueprint.spine
        limit = {"max_tool_calls": spine.max_tool_calls, "timeout_seconds": spine.timeout_seconds}.get(name)
        return GuardrailViolated(f"guardrail {name} ended the run", guardrail=name, limit=limit)
    if error.get("code") == TooManyFunctions.code:
        # Servers grew the agent's tools past what a provider takes mid-run: the blueprint's to change.
        return TooManyFunctions(str(error.get("message")), **(error.get("details") or {}))
    if reason in ("model_error", "output_invalid"):
        return ModelError(str(error.get("message") or "the model provider failed"), reason=reason)
    return RunFailed(f"the run ended without an answer ({reason})", reason=reason)


async def run_blueprint(
    compiled: CompiledBlueprint,
    message: str,
    *,
    session_id: str | None,
    store: SessionStore,
    log_limits: LogLimits | None = None,
) -> RunReply:
    """One message through the blueprint, its log kept within `log_limits`. Raises `GuardrailViolated`,
    `ModelError` or another `AwbError`."""
    check_run_input(message, session_id)
    blueprint = compiled.blueprint
    session_id = session_id or uuid.uuid4().hex
    memory = blueprint.heart.memory
    history = await anyio.to_thread.run_sync(store.history, session_id, memory.history_length) if memory.enabled else []
    journal = RunJournal(
        uuid.uuid4().hex, blueprint.spine.max_tool_calls, compiled.options.secrets(), log_limits or LogLimits()
    )
    journal.log(
        "run_start",
        blueprint_id=compiled.blueprint_id,
        blueprint_name=blueprint.name,
        mode=blueprint.legs.mode,
        history_turns=len(history),
    )
    started = anyio.current_time()
    results: list[RunResult] = []
    failure: AwbError | None = None
    try:
        with anyio.move_on_after(blueprint.spine.timeout_seconds) as scope:
            journal.scope = scope
            async with compiled.open_toolbox(journal) as box:
                results = await _drive(compiled, message, history, box)
        if scope.cancelled_caught and journal.violation is None:
            limit = blueprint.spine.timeout_seconds
            journal.violate("timeout_seconds", f"the run passed {limit} s", fatal=True, limit=limit)
        if journal.violation is not None:
            name = journal.violation["guardrail"]
            failure = GuardrailViolated(
                f"guardrail {name} ended the run", guardrail=name, limit=journal.violation.get("limit")
            )
        elif not results or not (results[-1].ok or _refusal(results[-1]) is not None):
            failure = _failure(results[-1], compiled) if results else RunFailed("the blueprint has no agents")
            if isinstance(failure, GuardrailViolated):
                journal.violate(
                    failure.details["guardrail"], failure.message, fatal=True, limit=failure.details["limit"]
                )
    except AwbError as err:  # unreachable MCP servers and the like: reported, logged, never lost
        failure = err
    except anyio.get_cancelled_exc_class():
        # The caller went away (a REST client hung up, a server shutting down): the run's tool calls are
        # cancelled with it, and its log still says what it did and how it ended.
        latency_ms = round((anyio.current_time() - started) * 1000, 3)
        journal.log("run_end", status="cancelled", latency_ms=latency_ms)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_SAVE_ON_CANCEL_SECONDS):
            await anyio.to_thread.run_sync(store.append_logs, session_id, journal.entries)
        raise
    except Exception:
        # Not awb's own error (a bug in a tool's handler): the face answers with its generic error and keeps
        # the details in the server log; the run's log, which was lost whole, says what ran and that it
        # ended so. The exception's text stays out of it, as it stays out of the face's answer.
        latency_ms = round((anyio.current_time() - started) * 1000, 3)
        error = {"code": "internal_error", "message": "the run failed unexpectedly; see the server log", "details": {}}
        journal.log("run_end", status="internal_error", latency_ms=latency_ms, error=error)
        await anyio.to_thread.run_sync(store.append_logs, session_id, journal.entries)
        raise
    latency_ms = round((anyio.current_time() - started) * 1000, 3)
    refusal = _refusal(results[-1]) if failure is None else None
    response = str((results[-1].output or {}).get("response", "")) if failure is None else ""
    status = "ok" if failure is None else failure.code
    end: dict[str, Any] = {"status": status, "latency_ms": latency_ms}
    if refusal is not None:
        response, status = refusal, "refused"
        end.update(status=status, refusal=refusal)
    if failure is not None:
        end["error"] = failure.to_dict()
    journal.log("run_end", **end)
    await anyio.to_thread.run_sync(store.append_logs, session_id, journal.entries)
    if failure is not None:
        failure.details.setdefault("session_id", session_id)
        failure.details.setdefault("run_id", journal.run_id)
        raise failure
    if memory.enabled:
        now = datetime.now(UTC)
        await anyio.to_thread.run_sync(store.add_exchange, session_id, compiled.blueprint_id, now, message, response)
    usage = Usage()
    for result in results:
        usage.add(result.usage)
    return RunReply(
        response=response,
        session_id=session_id,
        run_id=journal.run_id,
        blueprint_id=compiled.blueprint_id,
        status=status,
        latency_ms=latency_ms,
        tool_calls=journal.calls,
        usage=usage,
    )
