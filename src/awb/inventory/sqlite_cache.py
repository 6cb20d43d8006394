"""The SQLite store's cache of tool records, for the lookups every call makes (a tool by name or id).

Reading a tool is a query and a record built from its row; under concurrent calls each query also
hands the GIL to the threads running tools and back (measured: ~0.2 ms of the server's CPU a call). The
cache keeps the records it read for as long as the file is provably unchanged since:

- `PRAGMA data_version` moves when another connection (the CLI, another process) commits;
- the connection's `total_changes` moves with every row this store writes (any method, a rolled-back
  transaction included).

Either moving empties the cache, so no write path has to remember to invalidate it. The one write that
happens on every call, the call record, reads the tool's new counters back in its own transaction
(`counted`): when nothing else was written since the cache's stamp, the cached record takes them and the
stamp moves past that transaction, so a hot tool is read from the file once, not once a call.

Everything here runs under the store's lock.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from typing import Any

from awb.inventory.models import Tool

#: Tool records kept: the hot ones (a listing or search does not go through this cache).
MAX_TOOLS = 4096


class ToolCache:
    def __init__(self, db: sqlite3.Connection, max_tools: int = MAX_TOOLS) -> None:
        self._db = db
        self._max = max_tools
        self._stamp: tuple[int, int] | None = None
        #: tool_id -> its record, or None for "no such tool".
        self._tools: OrderedDict[str, Tool | None] = OrderedDict()
        #: (name, include_deleted) -> the tool_id that lookup found, or None for none.
        self._names: dict[tuple[str, bool], str | None] = {}

    def check(self) -> None:
        """Empty the cache if anything was committed since it was filled (one `PRAGMA`)."""
        stamp = (int(self._db.execute("PRAGMA data_version").fetchone()[0]), self._db.total_changes)
        if stamp != self._stamp:
            self._tools.clear()
            self._names.clear()
            self._stamp = stamp

    def by_id(self, tool_id: str) -> tuple[bool, Tool | None]:
        """(found in the cache, the record or None). Call `check` first."""
        if tool_id not in self._tools:
            return False, None
        self._tools.move_to_end(tool_id)
        return True, self._tools[tool_id]

    def by_name(self, name: str, include_deleted: bool) -> tuple[bool, Tool | None]:
        key = (name, include_deleted)
        if key not in self._names:
            return False, None
        tool_id = self._names[key]
        if tool_id is None:
            return True, None
        return self.by_id(tool_id)

    def put(self, tool_id: str, tool: Tool | None, *, name: tuple[str, bool] | None = None) -> None:
        """Keep what a lookup read (in the same lock hold as its `check`)."""
        self._tools[tool_id] = tool
        self._tools.move_to_end(tool_id)
        if name is not None:
            self._names[name] = tool_id if tool is not None else None
        while len(self._tools) > self._max:
            dropped, _ = self._tools.popitem(last=False)
            for key in [k for k, v in self._names.items() if v == dropped]:
                del self._names[key]

    def put_missing_name(self, name: str, include_deleted: bool) -> None:
        self._names[(name, include_deleted)] = None

    def counted(self, changes_before: int, moves: list[tuple[str, dict[str, Any]]]) -> None:
        """Calls' records moved these fields of their tools, in one transaction that began when the
        connection had made `changes_before` changes. If the cache was current then, it stays current:
        the records take the new values (in call order) and the stamp moves past the transaction."""
        if self._stamp is None or self._stamp[1] != changes_before:
            return  # something else was written too: the next `check` empties the cache
        self._stamp = (self._stamp[0], self._db.total_changes)
        for tool_id, fields in moves:
            tool = self._tools.get(tool_id)
            if tool is not None:
                self._tools[tool_id] = tool.model_copy(update=fields)
