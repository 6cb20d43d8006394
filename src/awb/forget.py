"""Forgetting for good: purge removes archived and soft-deleted tools with everything recorded about them,
and a delete past `max_deleted_tools` purges the longest-deleted ones."""

from __future__ import annotations

from datetime import timedelta

from awb.clock import Clock
from awb.errors import InvalidParams
from awb.events import Event, EventBus
from awb.inventory.models import Tool, ToolSummary
from awb.inventory.store import Store

#: A hundred years: past it a cutoff date is out of range, and nothing was archived that long ago.
MAX_PURGE_DAYS = 36_500


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

    Returns what was (or, with `dry_run`, would be) removed.
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
    if dry_run or not doomed:
        return [t.summary() for t in doomed]
    _forget(store, events, doomed)
    return [t.summary() for t in doomed]


def purge_deleted_past(store: Store, events: EventBus, keep: int) -> list[ToolSummary]:
    """Purge the soft-deleted tools past the `keep` most recently deleted (`max_deleted_tools`): a
    delete pays for it, so an agent that crafts and deletes in a loop cannot fill the disk."""
    doomed = store.deleted_past(keep)
    if doomed:
        _forget(store, events, doomed)
    return [t.summary() for t in doomed]


def _forget(store: Store, events: EventBus, doomed: list[Tool]) -> None:
    store.delete_forever([t.tool_id for t in doomed])
    for tool in doomed:
        events.publish(Event("deleted", tool.tool_id, {"purged": True, "equipped": tool.equipped}))
