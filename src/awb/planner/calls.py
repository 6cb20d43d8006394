"""The tool calls a task made, in order, and how each went. A task or a plan that stops early reports
them, because calls may have had effects: the model or the user continues from there, not from scratch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: `cancelled`: still running when its plan ended (a deadline); it may have had its effect.
CallOutcome = Literal["ok", "failed", "cancelled"]
#: `direct`: one `planner.call_tool` action; `plan`: bridged from a `run_code` plan.
CallRoute = Literal["direct", "plan"]
#: Runs of calls a report lists; a longer history ends with how many runs were left out.
MAX_RUNS = 30


@dataclass
class CallMade:
    server: str
    tool: str
    via: CallRoute
    #: Set when the call returns; a call interrupted before that counts as cancelled.
    outcome: CallOutcome = "cancelled"

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "tool": self.tool, "via": self.via, "outcome": self.outcome}


def call_runs(calls: Sequence[CallMade], *, with_route: bool = True) -> list[str]:
    """Consecutive calls of the same tool, route and outcome as one line each, in order:
    `chat.post_message ×3 ok (in a plan)`."""
    runs: list[tuple[tuple[str, CallRoute, CallOutcome], int]] = []
    for call in calls:
        key = (f"{call.server}.{call.tool}", call.via, call.outcome)
        if runs and runs[-1][0] == key:
            runs[-1] = (key, runs[-1][1] + 1)
        else:
            runs.append((key, 1))
    lines = []
    for (name, via, outcome), count in runs[:MAX_RUNS]:
        times = f" ×{count}" if count > 1 else ""
        route = (" (in a plan)" if via == "plan" else " (direct)") if with_route else ""
        lines.append(f"{name}{times} {outcome}{route}")
    if len(runs) > MAX_RUNS:
        lines.append(f"… {len(runs) - MAX_RUNS} more runs of calls")
    return lines


def calls_report(calls: Sequence[CallMade]) -> str:
    """One sentence for a stopped task: how many calls ran, which, in order, and how each went."""
    if not calls:
        return "no tool call ran before the task stopped"
    count = f"{len(calls)} tool call{'s' if len(calls) > 1 else ''}"
    return f"{count} ran before the task stopped (their effects stand), in order: " + "; ".join(call_runs(calls))
