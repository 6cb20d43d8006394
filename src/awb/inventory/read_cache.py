"""A store's cache of what it reads most: tools, versions, recent calls, counts.

On PostgreSQL, every write to a tool (here, or on another server, announced on the change feed, calls
included) invalidates that tool's entries; counts go with any write that can change them. A read only
fills the cache if no invalidation happened while it ran (a generation number), so a read racing a
write never leaves the older value behind. The SQLite store keeps only tool records here, and empties
the cache whenever its file may have changed (awb.inventory.sqlite_cache).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any

#: Tool records kept (the hot ones: equipped, often called); far fewer than an inventory can hold.
MAX_TOOLS = 20_000
#: Marks "no such tool" in the tool cache (a negative answer is cached and invalidated like any other).
MISSING: Any = object()


class ReadCache:
    def __init__(self, max_tools: int = MAX_TOOLS) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self._max = max_tools
        self.tools: OrderedDict[str, Any] = OrderedDict()
        self.names: dict[str, str] = {}  # live name -> tool_id
        self._name_of: dict[str, str] = {}  # tool_id -> the name it is listed under in `names`
        self.versions: dict[str, Any] = {}
        self.calls: dict[str, tuple[int, Any]] = {}
        self.counts: dict[Hashable, int] = {}
        #: Tools whose cached record a call of this server kept warm (`counted`): their counters may
        #: trail calls other servers made a moment ago, so an inspection reads them again.
        self.warmed: set[str] = set()

    def generation(self) -> int:
        return self._generation

    def invalidate(self, tool_ids: Iterable[str], *, counts: bool = True) -> None:
        with self._lock:
            self._generation += 1
            for tool_id in tool_ids:
                self._drop(tool_id)
            if counts:
                self.counts.clear()

    def counted(self, tool_id: str, counters: dict[str, Any]) -> None:
        """A call moved a tool's counters (read back from the same statement): keep its cached record
        warm with them, so the next call of a hot tool does not read it again. Its recent calls and
        version counts moved too and are dropped. Two calls answering out of order never move a
        counter back: an older answer drops the record instead."""
        with self._lock:
            self._generation += 1
            self.versions.pop(tool_id, None)
            self.calls.pop(tool_id, None)
            tool = self.tools.get(tool_id)
            if tool is None or tool is MISSING:
                return
            if counters["usage_count"] < tool.usage_count or counters["failure_count"] < tool.failure_count:
                self._drop(tool_id)
                return
            self.tools[tool_id] = tool.model_copy(update=counters)
            self.warmed.add(tool_id)

    def updated(self, tool_id: str, fields: dict[str, Any]) -> None:
        """This server set these fields of a tool (a compare-and-set that held): its cached record takes
        them instead of being read again; counts may have moved and are dropped. A renamed tool is
        dropped (its name entry would be stale)."""
        with self._lock:
            self._generation += 1
            self.counts.clear()
            tool = self.tools.get(tool_id)
            if tool is None or tool is MISSING or "name" in fields:
                self._drop(tool_id)
                return
            try:
                changed = tool.model_copy(update=fields)
            except Exception:  # a field the record does not have: read it again instead
                self._drop(tool_id)
                return
            self.tools[tool_id] = changed
            if changed.status == "deleted":
                name = self._name_of.pop(tool_id, None)
                if name is not None and self.names.get(name) == tool_id:
                    del self.names[name]

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self.tools.clear()
            self.warmed.clear()
            self.names.clear()
            self._name_of.clear()
            self.versions.clear()
            self.calls.clear()
            self.counts.clear()

    def put_tool(self, generation: int, tool_id: str, tool: Any) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self.tools[tool_id] = tool
            self.tools.move_to_end(tool_id)
            if tool is not MISSING and tool.status != "deleted":
                self.names[tool.name] = tool_id
                self._name_of[tool_id] = tool.name
            while len(self.tools) > self._max:
                self._drop(next(iter(self.tools)))

    def _drop(self, tool_id: str) -> None:
        """Forget one tool (called under the lock)."""
        self.tools.pop(tool_id, None)
        self.warmed.discard(tool_id)
        self.versions.pop(tool_id, None)
        self.calls.pop(tool_id, None)
        name = self._name_of.pop(tool_id, None)
        if name is not None and self.names.get(name) == tool_id:
            del self.names[name]

    def tool_named(self, name: str) -> Any:
        with self._lock:
            tool_id = self.names.get(name)
            return None if tool_id is None else self.tools.get(tool_id)

    def put(self, generation: int, table: dict[Any, Any], key: Any, value: Any) -> None:
        with self._lock:
            if generation == self._generation:
                table[key] = value


__all__ = ["MISSING", "ReadCache"]
