"""One run's log and guard: chronological entries (start, tool calls, violations, end) and the spine's
limits enforced around every tool handler.

A fatal violation cancels the run's scope, so a team or workflow stops as a whole, not one member.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from pydantic import BaseModel

from awb.agents.context import to_text
from awb.agents.toolbox import Handler, ToolOutcome, ToolSpec
from awb.safe_copy import CopyRules, safe_copy

log = logging.getLogger("awb.blueprints")

LogKind = Literal["run_start", "tool_call", "guardrail_violation", "run_end"]
SUMMARY_CHARS = 300
REDACTED = "***"
#: What a tool call past `max_tool_calls` returns instead of running.
LIMIT_REACHED = "guardrail max_tool_calls: the tool-call limit is reached"
#: Bounds of one walk over a logged value (a tool call's arguments, a violation's context).
_MAX_DEPTH = 32
_MAX_VALUES = 100_000
_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|cookie|credential)", re.I)


class LogEntry(BaseModel):
    at: datetime
    run_id: str
    kind: LogKind
    data: dict[str, Any]


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy with secret-looking keys masked and known secret values cut out of strings; bounded
    (`awb.safe_copy`): what nests too deep, is past the walk's budget or holds itself is a marker."""
    return safe_copy(value, _rules(secrets))


def _rules(secrets: tuple[str, ...], *, max_chars: int | None = None) -> CopyRules:
    def text(value: str) -> str:
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        # Cut after the secrets are out, so no part of one is left at the cut.
        return value if max_chars is None else value[: max_chars + 1]

    def masked(key: object, value: object) -> bool:
        return _SECRET_KEY.search(str(key)) is not None

    return CopyRules(max_depth=_MAX_DEPTH, max_values=_MAX_VALUES, text=text, masked=masked, mask=REDACTED)


def summarize(payload: Any, secrets: tuple[str, ...] = ()) -> str:
    """At most SUMMARY_CHARS of `payload` as text, secrets masked; only what can show is walked."""
    rules = _rules(secrets)
    if isinstance(payload, str):
        text = rules.text(payload)
    else:
        shown = safe_copy(payload, replace(_rules(secrets, max_chars=SUMMARY_CHARS), max_values=SUMMARY_CHARS))
        text = rules.text(to_text(shown))  # keys are text too
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


@dataclass
class RunJournal:
    run_id: str
    max_tool_calls: int
    #: Values never written to a log (API keys from the environment).
    secrets: tuple[str, ...] = ()
    entries: list[LogEntry] = field(default_factory=list)
    tool_calls: int = 0
    #: The first fatal violation, once one happened.
    violation: dict[str, Any] | None = None
    scope: anyio.CancelScope | None = None

    def log(self, kind: LogKind, **data: Any) -> None:
        self.entries.append(LogEntry(at=datetime.now(UTC), run_id=self.run_id, kind=kind, data=data))

    def violate(self, guardrail: str, message: str, *, fatal: bool, **context: Any) -> None:
        """Log a violation with its context; a fatal one ends the whole run."""
        entry = {"guardrail": guardrail, "message": message, "fatal": fatal, **redact(context, self.secrets)}
        self.log("guardrail_violation", **entry)
        log.warning("run %s: guardrail %s: %s %s", self.run_id, guardrail, message, entry)
        if fatal and self.violation is None:
            self.violation = entry
            if self.scope is not None:
                self.scope.cancel()

    def admit(self, tool: str) -> bool:
        """Count one more tool call; past `max_tool_calls` it is refused and the run ends."""
        self.tool_calls += 1
        if self.tool_calls <= self.max_tool_calls:
            return True
        self.violate(
            "max_tool_calls",
            f"more than {self.max_tool_calls} tool calls",
            fatal=True,
            limit=self.max_tool_calls,
            tool=tool,
        )
        return False

    def record(self, tool: str, arguments: Mapping[str, Any], started: float, *, success: bool, output: Any) -> None:
        """Log a finished (or abandoned) tool call that began at `started` (`anyio.current_time()`)."""
        self.log(
            "tool_call",
            tool=tool,
            arguments=redact(arguments, self.secrets),
            duration_ms=round((anyio.current_time() - started) * 1000, 3),
            success=success,
            output_summary=summarize(output, self.secrets),
        )

    def guard(self, spec: ToolSpec, handler: Handler) -> Handler:
        """`handler` counted against `max_tool_calls`, timed and logged."""

        async def call(arguments: dict[str, Any]) -> ToolOutcome:
            if not self.admit(spec.name):
                return ToolOutcome(ok=False, payload=LIMIT_REACHED)
            started = anyio.current_time()
            ok, payload = False, "the call did not finish"
            try:
                outcome = await handler(arguments)
                ok, payload = outcome.ok, outcome.payload
                return outcome
            finally:
                self.record(spec.name, arguments, started, success=ok, output=payload)

        return call
