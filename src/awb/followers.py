"""What follows the workbench's events, whichever path (face, CLI, maintenance) published them: the
search index's vectors, and the inventory's journal that other processes read (the web panel of a
server, `awb.feed`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from awb.clock import Clock
from awb.events import Event
from awb.inventory.store import Store
from awb.search.hybrid import HybridSearch

log = logging.getLogger("awb.workbench")


def search_follower(current: Callable[[], HybridSearch], store: Store) -> Callable[[Event], None]:
    """Vectors follow every craft, new version, rollback and delete, in the engine `current()` gives at
    that moment (a workbench's engine can be swapped after it is built)."""

    def follow(event: Event) -> None:
        engine = current()
        if engine.mode != "hybrid" or event.tool_id is None:
            return
        if event.kind == "deleted":
            engine.remove_tool(event.tool_id)
        elif event.kind in ("crafted", "updated"):
            tool = store.get(event.tool_id)
            if tool is not None:
                engine.index_tool(tool)

    return follow


def journal_writer(store: Store, clock: Clock) -> Callable[[Event], None]:
    """Each event into the inventory's journal, with the tool's name, version and runtime (a store
    without a journal writes nothing)."""

    def write(event: Event) -> None:
        append = getattr(store, "append_event", None)
        # Tier moves are not toasts; "external" events were journaled by the server that made them.
        if append is None or event.kind in ("tier_changed", "external"):
            return
        data = dict(event.data)
        tool = store.get(event.tool_id) if event.tool_id else None
        if tool is not None:
            data.update(name=tool.name, version=tool.version, runtime=tool.runtime)
        try:
            append(event.kind, event.tool_id, data, clock.now())
        except Exception as exc:  # the journal is for watchers; a craft or call never fails for it
            log.warning("could not journal the %s event: %s", event.kind, exc)

    return write
