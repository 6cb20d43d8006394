"""Forgetting: a soft delete, and for good: purge removes archived and soft-deleted tools with everything
recorded about them, and a delete past `max_deleted_tools` purges the longest-deleted ones.

Several servers may share the inventory: each write here holds only while the tool is as it was read,
so what two servers attempt at once is done, and announced, once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from awb.clock import Clock
from awb.errors import Busy, InvalidParams
from awb.events import Event, EventBus
from awb.inventory.models import Tool, ToolSummary
from awb.inventory.store import Store

log = logging.getLogger("awb.workbench")

#: A hundred years: past it a cutoff date is out of range, and nothing was archived that long ago.
MAX_PURGE_DAYS = 36_500

#: Times a delete reads the tool again when it changed under it (a call brought it back from the archive).
DELETE_TRIES = 3


def delete(
    store: Store,
    events: EventBus,
    tool: Tool,
    resolve: Callable[[str], Tool],
    now: datetime,
    max_deleted: int,
) -> Tool:
    """Soft delete `tool` (as `resolve` read it), then purge the deleted tools past `max_deleted`.

    The delete holds only while the tool's status is as read: when another server deleted it first, that
    delete stands (and was announced), and `resolve`, reading it again, says the tool is deleted."""
    for _ in range(DELETE_TRIES):
        if store.update_if(tool.tool_id, {"status": tool.status}, status="deleted", equipped=False, updated_at=now):
            break
        tool = resolve(tool.tool_id)
    else:
        raise Busy(f"tool {tool.name!r} kept changing while it was deleted; try again", tool_id=tool.tool_id)
    log.info("deleted %s (%s)", tool.name, tool.tool_id)
    events.publish(Event("deleted", tool.tool_id, {"equipped": tool.equipped}))
    purge_deleted_past(store, events, max_deleted)
    return tool.model_copy(update={"status": "deleted", "equipped": False, "updated_at": now})


def purge(
    store: Store,
    clock: Clock,
    events: EventBus,
    *,
    archived_before_days: float | None = None,
    deleted: bool = False,
    dry_run: bool = False,
    only: set[str] | None = None,
) -> list[ToolSummary]:
    """Remove archived tools untouched for `archived_before_days` days and, if `deleted`, soft-deleted ones.

    Returns what this purge removed (or, with `dry_run`, would remove).
    """
    if archived_before_days is None and not deleted:
        raise InvalidParams("say what to purge: archived_before_days, deleted, or both")
    if archived_before_days is not None and not 0 <= archived_before_days <= MAX_PURGE_DAYS:  # NaN too
        raise InvalidParams(
            f"archived_before_days must be a number of days from 0 to {MAX_PURGE_DAYS}",
            archived_before_days=archived_before_days,
        )
    cutoff = None if archived_before_days is None else clock.now() - timedelta(days=archived_before_days)
    doomed = store.purge_candidates(archived_before=cutoff, deleted=deleted)
    if only is not None:
        doomed = [t for t in doomed if t.tool_id in only]
    if dry_run:
        return [t.summary() for t in doomed]
    return _forget(store, events, doomed)


def purge_deleted_past(store: Store, events: EventBus, keep: int) -> list[ToolSummary]:
    """Purge the soft-deleted tools past the `keep` most recently deleted (`max_deleted_tools`): a
    delete pays for it, so an agent that crafts and deletes in a loop cannot fill the disk."""
    return _forget(store, events, store.deleted_past(keep))


def _forget(store: Store, events: EventBus, doomed: list[Tool]) -> list[ToolSummary]:
    """Purge `doomed` and announce what this purge removed: a tool that another server purged first, or
    that a call brought back from the archive since it was read, is left to that and not announced."""
    if not doomed:
        return []
    removed = set(store.purge(doomed))
    gone = [t for t in doomed if t.tool_id in removed]
    for tool in gone:
        events.publish(Event("deleted", tool.tool_id, {"purged": True, "equipped": tool.equipped}))
    return [t.summary() for t in gone]
