"""A live, compact view of a run for a terminal: one line per step, a running total below."""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from awb.agents.events import RunEvent

#: Lines of history the view keeps on screen; older steps scroll away.
_VISIBLE_LINES = 12


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: RunEvent) -> str | None:
    """One line for the events a person wants to see; None for the rest."""
    data = event.data
    indent = "  " * event.depth
    where = f"{indent}{event.agent} #{event.step}"
    if event.type == "model_reply":
        action = data.get("action") or {}
        kind = action.get("action")
        if kind == "call_tool":
            line = f"{where} → {action.get('tool')} {_short(action.get('arguments', {}))}"
        elif kind == "spawn_subagent":
            line = f"{where} ⇢ subagent {action.get('agent')}"
        else:
            line = f"{where} {kind}"
        if data.get("not_run"):
            line += f" (not run: {', '.join(data['not_run'])})"
        return line
    if event.type == "rejected":
        return f"{where} ✗ rejected: {data.get('code')}"
    if event.type == "tool_result":
        mark = "✓" if data.get("ok") else f"✗ {(data.get('error') or {}).get('code', 'error')}"
        return f"{where}   {mark} {data.get('tool')} {data.get('duration_seconds', 0):.2f}s"
    if event.type == "done" and event.depth == 0:
        result = data.get("result") or {}
        return f"{event.agent} finished: {result.get('termination_reason')} in {result.get('iterations')} steps"
    return None


class ProgressView:
    """Feed it events (`view.handle`); it redraws in place while the run lasts."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines: list[str] = []
        self.tokens = 0
        #: Some replies' tokens are estimates (the provider reported no usage): the total shows as `~N`.
        self.estimated = False
        self.tool_calls = 0
        self._live = Live(console=console, auto_refresh=False, transient=False)

    def __enter__(self) -> ProgressView:
        self._live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._live.stop()

    def handle(self, event: RunEvent) -> None:
        if event.type == "model_reply":
            usage = event.data.get("usage") or {}
            self.tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            self.estimated = self.estimated or bool(usage.get("estimated_replies"))
        if event.type == "tool_call":
            self.tool_calls += 1
        line = describe(event)
        if line is not None:
            self.lines.append(line)
        tokens = f"~{self.tokens}" if self.estimated else str(self.tokens)
        status = Text(f"steps/tool calls/tokens: {event.step}/{self.tool_calls}/{tokens}", style="dim")
        body = Group(*(Text(line) for line in self.lines[-_VISIBLE_LINES:]), status)
        self._live.update(body, refresh=True)
