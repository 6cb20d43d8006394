"""One catalogue for everything an agent can invoke: MCP tools and subagents alike.

Each entry pairs what the model is shown (a `ToolSpec`) with an async handler that does the work.
MCP tools are named `<server>.<tool>`, so the server name is the namespace agents allow.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    namespace: str
    kind: Literal["tool", "subagent"] = "tool"


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    payload: Any
    #: A failure's error code when the tool gave one (awb tools do: `limit_exceeded`, ...).
    error_code: str | None = None

    def message(self) -> str:
        """A failure's message: awb's `{"error": {"message"}}`, a top-level `message`, or the payload."""
        payload = self.payload
        if isinstance(payload, str) and payload.startswith("{"):
            try:
                payload = json.loads(payload)
            except ValueError:
                pass
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return str(error["message"])
            if isinstance(payload.get("message"), str):
                return str(payload["message"])
        text = payload if isinstance(payload, str) else json.dumps(payload, default=str)
        return text[:1000]


Handler = Callable[[dict[str, Any]], Awaitable[ToolOutcome]]
#: Reads one namespace's tools again (an MCP server's current tool list).
Lister = Callable[[], Awaitable[list[tuple[ToolSpec, Handler]]]]


class Toolbox:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[ToolSpec, Handler]] = {}
        self._listers: dict[str, Lister] = {}

    def add(self, spec: ToolSpec, handler: Handler) -> None:
        self._entries[spec.name] = (spec, handler)

    def relists(self, namespace: str, lister: Lister) -> None:
        """Say how `refresh` reads `namespace`'s tools again."""
        self._listers[namespace] = lister

    async def refresh(self) -> None:
        """Read every re-listable namespace's tools again: tools a server added since appear, removed ones go.
        A server that fails to answer keeps the tools it had."""
        for namespace, lister in self._listers.items():
            try:
                entries = await lister()
            except Exception:  # boundary: a flaky server must not take the others' tools away
                continue
            for name in [n for n, (spec, _) in self._entries.items() if spec.namespace == namespace]:
                del self._entries[name]
            for spec, handler in entries:
                self.add(spec, handler)

    def view(self, namespaces: Collection[str], *, subagents: bool = True) -> Toolbox:
        """A narrower toolbox: tools of the allowed namespaces, and subagents unless refused."""
        narrowed = Toolbox()
        for spec, handler in self._entries.values():
            if (spec.kind == "tool" and spec.namespace in namespaces) or (spec.kind == "subagent" and subagents):
                narrowed.add(spec, handler)
        return narrowed

    def specs(self, kind: Literal["tool", "subagent"] | None = None) -> list[ToolSpec]:
        return [spec for spec, _ in self._entries.values() if kind is None or spec.kind == kind]

    def resolve(self, name: str, kind: Literal["tool", "subagent"]) -> ToolSpec | None:
        """Find by full name; an unqualified tool name is accepted when only one server has it."""
        entry = self._entries.get(name)
        if entry is not None:
            return entry[0] if entry[0].kind == kind else None
        matches = [s for s in self.specs(kind) if s.name.partition(".")[2] == name]
        return matches[0] if len(matches) == 1 else None

    async def call(self, spec: ToolSpec, arguments: dict[str, Any]) -> ToolOutcome:
        _, handler = self._entries[spec.name]
        return await handler(arguments)
