"""One run's log and guard: chronological entries (start, tool calls, violations, end) and the spine's
limits enforced around every tool handler.

What an agent or a tool sent is logged masked and cut (`LogLimits`): each value to a number of characters,
the whole run to a budget, a cut string ending in a marker with its full size and SHA-256.

A fatal violation cancels the run's scope, so a team or workflow stops as a whole, not one member.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel

from awb.agents.context import to_text
from awb.agents.toolbox import Handler, ToolOutcome, ToolSpec
from awb.safe_copy import CopyRules, safe_copy

if TYPE_CHECKING:
    from awb.config import Config

log = logging.getLogger("awb.blueprints")

LogKind = Literal["run_start", "tool_call", "guardrail_violation", "run_end"]
SUMMARY_CHARS = 300
REDACTED = "***"
#: What a tool call past `max_tool_calls` returns instead of running.
LIMIT_REACHED = "guardrail max_tool_calls: the tool-call limit is reached"
#: Bounds of one walk over a logged value (a tool call's arguments, a violation's context).
_MAX_DEPTH = 32
_MAX_VALUES = 100_000
#: What a value keeps once its run's log is full: enough for a tool's name, a status, an error code.
FLOOR_CHARS = 160
CUT_MARKER = "…[cut: {chars} characters in all, sha256 {digest}]"
_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|cookie|credential)", re.I)


@dataclass(frozen=True)
class LogLimits:
    """How much a run's log keeps of what the run sent (`blueprints.log_value_chars`, `log_run_chars`)."""

    #: Characters one logged value keeps: a call's arguments, a violation's URL, an error.
    value_chars: int = 4000
    #: Characters one run's log keeps in all; past them, each value keeps FLOOR_CHARS.
    run_chars: int = 256_000


def log_limits(config: Config) -> LogLimits:
    """The limits `config` sets (`blueprints.log_value_chars`, `blueprints.log_run_chars`)."""
    return LogLimits(config.blueprints.log_value_chars, config.blueprints.log_run_chars)


class ToolCallSummary(BaseModel):
    """A tool call as a run's reply names it (from the call itself, not from its cut log entry)."""

    tool: str
    duration_ms: float
    success: bool


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


def _cut_marked(text: str, keep: int) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text[:keep] + CUT_MARKER.format(chars=len(text), digest=digest)


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
    limits: LogLimits = field(default_factory=LogLimits)
    entries: list[LogEntry] = field(default_factory=list)
    #: Every finished tool call, whole, for the run's reply.
    calls: list[ToolCallSummary] = field(default_factory=list)
    tool_calls: int = 0
    #: The first fatal violation, once one happened.
    violation: dict[str, Any] | None = None
    scope: anyio.CancelScope | None = None

    def __post_init__(self) -> None:
        self._rules = replace(_rules(self.secrets), cut=_cut_marked, other=str)
        #: Characters the log may still take before values are cut to FLOOR_CHARS.
        self._left = self.limits.run_chars

    def log(self, kind: LogKind, **data: Any) -> dict[str, Any]:
        """Log an entry; each of its values masked and cut to the limits. Returns what was logged."""
        kept = {name: self._keep(value) for name, value in data.items()}
        self.entries.append(LogEntry(at=datetime.now(UTC), run_id=self.run_id, kind=kind, data=kept))
        return kept

    def _keep(self, value: Any) -> Any:
        room = min(self.limits.value_chars, max(self._left, FLOOR_CHARS))
        kept = safe_copy(value, replace(self._rules, max_chars=room))
        self._left -= len(to_text(kept))
        return kept

    def violate(self, guardrail: str, message: str, *, fatal: bool, **context: Any) -> None:
        """Log a violation with its context; a fatal one ends the whole run."""
        entry = self.log("guardrail_violation", guardrail=guardrail, message=message, fatal=fatal, **context)
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
        duration_ms = round((anyio.current_time() - started) * 1000, 3)
        self.calls.append(ToolCallSummary(tool=tool, duration_ms=duration_ms, success=success))
        self.log(
            "tool_call",
            tool=tool,
            arguments=arguments,
            duration_ms=duration_ms,
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
