"""One run's log and guard: chronological entries (start, tool calls, violations, end) and the spine's
limits enforced around every tool handler.

What an agent or a tool sent is logged masked and cut (`LogLimits`): each value to a number of characters,
the whole run to a budget, a cut string ending in a marker with its full size and SHA-256. Masked are the
values under secret-named keys, the known secrets of the environment, and any text that looks like a
credential (a bearer token, an API key, a JWT, a private key: `awb.credentials`).

A fatal violation cancels the run's scope, so a team or workflow stops as a whole, not one member.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel

from awb.agents.context import to_text
from awb.agents.toolbox import Handler, ToolOutcome, ToolSpec
from awb.credentials import MASK, mask_credentials
from awb.redaction import off_loop
from awb.safe_copy import CopyRules, safe_copy

if TYPE_CHECKING:
    from awb.config import Config

log = logging.getLogger("awb.blueprints")

LogKind = Literal["run_start", "tool_call", "guardrail_violation", "run_end"]
SUMMARY_CHARS = 300
#: What a tool call past `max_tool_calls` returns instead of running.
LIMIT_REACHED = "guardrail max_tool_calls: the tool-call limit is reached"
#: Bounds of one walk over a logged value (a tool call's arguments, a violation's context).
_MAX_DEPTH = 32
_MAX_VALUES = 100_000
#: What a value keeps once its run's log is full: enough for a tool's name, a status, an error code.
FLOOR_CHARS = 160
CUT_MARKER = "…[cut: {chars} characters in all, sha256 {digest}]"
#: Characters past a cut still masked, so a credential straddling the cut is recognised whole (a 4096-bit
#: RSA key in PEM is about 3,300); an environment secret's own length is added to it.
_SECRET_REACH = 4096
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
    """A copy with secret-looking keys masked, and known secret values and credentials cut out of strings;
    bounded (`awb.safe_copy`): what nests too deep, is past the walk's budget or holds itself is a marker."""
    return safe_copy(value, _rules(secrets))


def masked_as_read(data: dict[str, Any]) -> dict[str, Any]:
    """A stored entry's data with credentials and secret-named keys masked again as it is read: an entry an
    older awb logged (or an import brought) was stored before credentials were masked. Its values were
    bounded when logged, so only the walk's depth allows for the entry's own level."""
    masked: dict[str, Any] = safe_copy(data, replace(_rules(()), max_depth=_MAX_DEPTH + 1, max_values=sys.maxsize))
    return masked


def mask_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with the known `secrets` and anything that looks like a credential masked, in time linear in
    its length."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return mask_credentials(text, MASK)


def _rules(secrets: tuple[str, ...], *, max_chars: int | None = None) -> CopyRules:
    reach = _SECRET_REACH + max(map(len, secrets), default=0)

    def text(value: str) -> str:
        if max_chars is None:
            return mask_text(value, secrets)
        if len(value) <= max_chars + reach:
            # Cut after the secrets are out, so no part of one is left at the cut.
            return mask_text(value, secrets)[: max_chars + 1]
        # Only what can show is masked, so a summary of 20 MB costs what one of 20 kB does; a mask may leave
        # it shorter than the cut, and the "…" still says there was more.
        kept = mask_text(value[: max_chars + reach], secrets)[: max_chars + 1]
        return kept if len(kept) > max_chars else kept + "…"

    def masked(key: object, value: object) -> bool:
        return _SECRET_KEY.search(str(key)) is not None

    return CopyRules(max_depth=_MAX_DEPTH, max_values=_MAX_VALUES, text=text, masked=masked, mask=MASK)


def _cut_marked(text: str, keep: int) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text[:keep] + CUT_MARKER.format(chars=len(text), digest=digest)


def summarize(payload: Any, secrets: tuple[str, ...] = ()) -> str:
    """At most SUMMARY_CHARS of `payload` as text, secrets masked; only what can show is walked and masked."""
    if isinstance(payload, str):
        text = _rules(secrets, max_chars=SUMMARY_CHARS).text(payload)
    else:
        shown = safe_copy(payload, replace(_rules(secrets, max_chars=SUMMARY_CHARS), max_values=SUMMARY_CHARS))
        text = mask_text(to_text(shown), secrets)  # keys are text too
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
        kept, spent = self._kept(data, self._left)
        return self._append(kind, kept, spent)

    def _append(self, kind: LogKind, kept: dict[str, Any], spent: int) -> dict[str, Any]:
        self._left -= spent
        self.entries.append(LogEntry(at=datetime.now(UTC), run_id=self.run_id, kind=kind, data=kept))
        return kept

    def _kept(self, data: dict[str, Any], left: int) -> tuple[dict[str, Any], int]:
        """Each value of `data` masked and cut, with `left` characters of the log still free; and how many
        of them it took. Touches nothing of the journal's, so it can run in a worker thread."""
        kept: dict[str, Any] = {}
        free = left
        for name, value in data.items():
            room = min(self.limits.value_chars, max(free, FLOOR_CHARS))
            kept[name] = safe_copy(value, replace(self._rules, max_chars=room))
            free -= len(to_text(kept[name]))
        return kept, left - free

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

    async def record(
        self, tool: str, arguments: Mapping[str, Any], started: float, *, success: bool, output: Any
    ) -> None:
        """Log a finished (or abandoned) tool call that began at `started` (`anyio.current_time()`)."""
        duration_ms = round((anyio.current_time() - started) * 1000, 3)
        self.calls.append(ToolCallSummary(tool=tool, duration_ms=duration_ms, success=success))
        data = {
            "tool": tool,
            "arguments": arguments,
            "duration_ms": duration_ms,
            "success": success,
            "output_summary": summarize(output, self.secrets),
        }
        # A model's arguments can be tens of megabytes, each string masked whole (its digest is of all of it):
        # in a worker thread, while the run's other work goes on. Shielded, so a call the run's end cut off
        # is logged too; the work is bounded by the arguments' size.
        with anyio.CancelScope(shield=True):
            kept, spent = await off_loop(self._kept, data, self._left)
        self._append("tool_call", kept, spent)

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
                await self.record(spec.name, arguments, started, success=ok, output=payload)

        return call
