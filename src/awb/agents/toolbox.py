"""One catalogue for everything an agent can invoke: MCP tools and subagents alike.

Each entry pairs what the model is shown (a `ToolSpec`) with an async handler that does the work.
MCP tools are named `<server>.<tool>`, so the server name is the namespace agents allow.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

from awb.safe_copy import safe_dumps


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    namespace: str
    kind: Literal["tool", "subagent"] = "tool"
    #: Whether a call counts against `max_tool_calls`: not for a lookup that calls nothing (the planner's
    #: `search_tools`), which would spend the budget before any tool ran.
    counted: bool = True


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
            except (ValueError, RecursionError):  # not JSON, or JSON nested past the decoder's stack
                pass
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return str(error["message"])
            if isinstance(payload.get("message"), str):
                return str(payload["message"])
        text = payload if isinstance(payload, str) else safe_dumps(payload, default=str)
        return text[:1000]


Handler = Callable[[dict[str, Any]], Awaitable[ToolOutcome]]
#: Reads one namespace's tools again (an MCP server's current tool list).
Lister = Callable[[], Awaitable[list[tuple[ToolSpec, Handler]]]]


#: A server that cannot tell of changes to its tools is read again at most this often (seconds), unless we
#: called one of its tools since or a call names a tool it is not known to have (`refresh(force=True)`).
#: Reading 5,000 tools costs ~0.55-0.6 s (mostly the MCP SDK encoding and checking them), which every
#: search step paid; a tool another client adds meanwhile is found this much later at most.
RELIST_AFTER_S = 15.0


@dataclass
class ListWatch:
    """Whether a server's tool list may have changed since it was last read.

    `following` is true while the server tells us of changes (`tools/list_changed`, either protocol
    generation); `stale` is set by such a notice, and by any call we make to the server ourselves, because
    a server's notice may arrive after its answer (a workbench's `awb_equip` answers first). `listed_at`:
    when the list was last read (`Toolbox.clock`), which decides for a server that cannot tell."""

    following: bool = False
    stale: bool = False
    listed_at: float | None = None


class Toolbox:
    def __init__(self) -> None:
        self._entries: dict[str, tuple[ToolSpec, Handler]] = {}
        self._listers: dict[str, Lister] = {}
        self._watches: dict[str, ListWatch] = {}
        #: How many times each namespace's tools were read again (telemetry, and the proof of following).
        self.relisted: dict[str, int] = {}
        self.relist_after_s = RELIST_AFTER_S
        self.clock: Callable[[], float] = time.monotonic

    def add(self, spec: ToolSpec, handler: Handler) -> None:
        self._entries[spec.name] = (spec, handler)

    def relists(self, namespace: str, lister: Lister, watch: ListWatch | None = None) -> None:
        """Say how `refresh` reads `namespace`'s tools again, and (with a `watch`) when it needs to."""
        self._listers[namespace] = lister
        if watch is not None:
            self._watches[namespace] = watch
            if watch.listed_at is None:  # registered right after its first listing
                watch.listed_at = self.clock()

    async def refresh(self, *, force: bool = False) -> bool:
        """Read the tools again of every namespace that may have changed: one whose server follows
        `list_changed` only after a notice or a call of ours; one that cannot tell after a call of ours or
        once its list is `relist_after_s` old; any other every time; all of them with `force`. Tools a
        server added since appear, removed ones go; a server that fails to answer keeps the tools it had.
        True when the catalogue changed."""
        changed = False
        for namespace, lister in self._listers.items():
            watch = self._watches.get(namespace)
            now = self.clock()
            if watch is not None and not watch.stale and not force:
                if watch.following:
                    continue
                if watch.listed_at is not None and now - watch.listed_at < self.relist_after_s:
                    continue
            if watch is not None:
                watch.stale = False  # a notice during the listing below marks it again
            try:
                entries = await lister()
            except Exception:  # boundary: a flaky server must not take the others' tools away
                if watch is not None:
                    watch.stale = True
                continue
            self.relisted[namespace] = self.relisted.get(namespace, 0) + 1
            if watch is not None:
                watch.listed_at = now  # when the reading began: a change made during it is not missed
            before = {n: spec for n, (spec, _) in self._entries.items() if spec.namespace == namespace}
            for name in before:
                del self._entries[name]
            for spec, handler in entries:
                self.add(spec, handler)
            changed = changed or before != {spec.name: spec for spec, _ in entries}
        return changed

    def view(self, namespaces: Collection[str], *, subagents: bool = True) -> Toolbox:
        """A narrower toolbox: tools of the allowed namespaces, and subagents unless refused."""
        narrowed = Toolbox()
        for spec, handler in self._entries.values():
            if (spec.kind == "tool" and spec.namespace in namespaces) or (spec.kind == "subagent" and subagents):
                narrowed.add(spec, handler)
        # Calls through the view still tell the watches that the server may have changed its list.
        narrowed._watches = {ns: w for ns, w in self._watches.items() if ns in namespaces}
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
        try:
            return await handler(arguments)
        finally:
            watch = self._watches.get(spec.namespace)
            if watch is not None:
                watch.stale = True
