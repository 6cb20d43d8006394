"""Tier maintenance: demote idle medium-term tools, archive idle short-term ones.

It runs when asked (`awb maintain`, `Workbench.maintain`) and by itself every
`memory.maintenance_every_calls` calls. The automatic run happens in a worker thread, one at a time:
it reads and writes the store, and a call that happens to be the hundredth must not stall the event
loop (or every other request) for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from awb.clock import Clock
from awb.events import Event, EventBus
from awb.inventory.memory import MemoryPolicy, TierChange
from awb.inventory.rows import TIER_SNAPSHOT
from awb.inventory.store import Store

log = logging.getLogger("awb.maintenance")


class Upkeep:
    def __init__(self, store: Store, policy: MemoryPolicy, clock: Clock, events: EventBus, every: int) -> None:
        self.store, self.policy, self.clock, self.events = store, policy, clock, events
        self.every = every
        self._calls = 0
        self._running: asyncio.Future[Any] | None = None

    def counted(self) -> None:
        """One more call; every `every` calls, maintenance starts (off the event loop when there is one)."""
        self._calls += 1
        if not self.every or self._calls < self.every:
            return
        self._calls = 0
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.run()
            return
        if self._running is None or self._running.done():
            self._running = loop.run_in_executor(None, self._run_logged)

    def _run_logged(self) -> None:
        try:
            self.run()
        except Exception:  # the next round tries again; a call never fails because of it
            log.exception("automatic maintenance failed")

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
