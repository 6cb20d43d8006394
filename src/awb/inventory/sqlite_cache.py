"""The SQLite store's cache of tool records, for the lookups every call makes (a tool by name or id).

Reading a tool is a query and a record built from its row; under concurrent calls each query also
hands the GIL to the threads running tools and back (measured: ~0.2 ms of the server's CPU a call). The
cache (the read cache PostgreSQL uses, awb.inventory.read_cache, tool records only) keeps the records
it read for as long as the file is provably unchanged since:

- `PRAGMA data_version` moves when another connection (the CLI, another process) commits;
- the connection's `total_changes` moves with every row this store writes (any method, a rolled-back
  transaction included).

Either moving empties the cache, so no write path has to remember to invalidate it. The one write that
happens on every call, the call record, reads the tool's new counters back in its own transaction
(`counted_in`): when nothing else was written since the cache's stamp, the cached record takes them and
the stamp moves past that transaction, so a hot tool is read from the file once, not once a call.

Everything here runs under the store's lock.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from awb.inventory.read_cache import ReadCache

#: Tool records kept: the hot ones (a listing or search does not go through this cache).
MAX_TOOLS = 4096


class ToolCache(ReadCache):
    def __init__(self, db: sqlite3.Connection, max_tools: int = MAX_TOOLS) -> None:
        super().__init__(max_tools)
        self._db = db
        self._stamp: tuple[int, int] | None = None

    def check(self) -> None:
        """Empty the cache if anything was committed since it was filled (one `PRAGMA`)."""
        stamp = (int(self._db.execute("PRAGMA data_version").fetchone()[0]), self._db.total_changes)
        if stamp != self._stamp:
            self.clear()
            self._stamp = stamp

    def counted_in(self, changes_before: int, moves: list[tuple[str, dict[str, Any]]]) -> None:
        """Calls' records moved these fields of their tools, in one transaction that began when the
        connection had made `changes_before` changes. If the cache was current then, it stays current:
        the records take the new values (in call order) and the stamp moves past the transaction."""
        if self._stamp is None or self._stamp[1] != changes_before:
            return  # something else was written too: the next `check` empties the cache
        self._stamp = (self._stamp[0], self._db.total_changes)
        for tool_id, fields in moves:
            self.counted(tool_id, fields)
