"""Tier maintenance: demote idle medium-term tools, archive idle short-term ones; and keep each
tool's call history to its `memory.calls_kept_per_tool` most recent records.

It runs when asked (`awb maintain`, `Workbench.maintain`, which prunes every tool's history) and by
itself every `memory.maintenance_every_calls` calls (which prunes the histories of the tools called
since the last run: a tool nobody calls gains no records). The automatic run happens in a worker
thread, one at a time: it reads and writes the store, and a call that happens to be the hundredth
must not stall the event loop (or every other request) for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from awb.clock import Clock
from awb.events import Event, EventBus
from awb.inventory.memory import MemoryPolicy, TierChange
from awb.inventory.rows import TIER_SNAPSHOT
from awb.inventory.store import Store

log = logging.getLogger("awb.maintenance")


class Upkeep:
    def __init__(
        self, store: Store, policy: MemoryPolicy, clock: Clock, events: EventBus, every: int, calls_kept: int = 0
    ) -> None:
        self.store, self.policy, self.clock, self.events = store, policy, clock, events
        self.every, self.calls_kept = every, calls_kept
        self._calls = 0
        #: Tools called since their histories were last pruned (calls may come from more than one thread).
        self._called: set[str] = set()
        self._called_lock = threading.Lock()
        self._running: asyncio.Future[Any] | None = None

    def counted(self, tool_id: str) -> None:
        """One more call of `tool_id`; every `every` calls, maintenance starts (off the event loop when
        there is one)."""
        self._calls += 1
        if self.calls_kept:
            with self._called_lock:
                self._called.add(tool_id)
        if not self.every or self._calls < self.every:
            return
        self._calls = 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is not None and self._running is not None and not self._running.done():
            return  # a run is still going: these tools wait for the next one
        with self._called_lock:  # the run owns its tools alone
            called, self._called = sorted(self._called), set()
        if loop is None:
            self._run_logged(called)
        else:
            self._running = loop.run_in_executor(None, self._run_logged, called)

    def _run_logged(self, called: list[str]) -> None:
        try:
            self.run()
            self.prune_calls(called)
        except Exception:  # the next round tries again; a call never fails because of it
            log.exception("automatic maintenance failed")

    def prune_calls(self, tool_ids: list[str] | None = None) -> int:
        """Drop call records past each tool's `calls_kept` most recent (None: every tool's); how many."""
        if not self.calls_kept or tool_ids == []:
            return 0
        pruned = self.store.prune_calls(self.calls_kept, tool_ids)
        if pruned:  # routine on a busy server (every `maintenance_every_calls` calls): debug detail
            log.debug("maintenance pruned %d old call records", pruned)
        return pruned

    async def settled(self) -> None:
        """Wait for an automatic maintenance run in flight, if any."""
        if self._running is not None:
            await asyncio.shield(self._running)

    def run(self) -> list[TierChange]:
        """Each change is conditional on the tool as it was read (tier, status, last use, usage,
        equipped): a call, an equip or another process's maintenance that lands in between wins, and
        the tool is looked at again next time. Only tools idle long enough are read at all."""
        now = self.clock.now()
        changes = []
        for tool in self.store.iter_maintainable(self.policy.idle_before(now)):
            change = self.policy.maintenance_change(tool, now)
            if change is None:
                continue
            fields: dict[str, Any] = {"memory_level": change.after}
            data: dict[str, Any] = {"before": change.before, "after": change.after}
            if change.after == "archived":
                # Archived tools leave the equipped set; updated_at dates the archiving (for purge).
                fields.update(status="archived", equipped=False, updated_at=now)
                data["equipped"] = tool.equipped
            read = {column: getattr(tool, column) for column in TIER_SNAPSHOT}
            if not self.store.update_if(tool.tool_id, read, **fields):
                continue
            changes.append(change)
            self.events.publish(Event("tier_changed", tool.tool_id, data))
        if changes:
            log.info("maintenance moved %d tools", len(changes))
        return changes
