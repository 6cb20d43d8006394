"""Two workbenches on one inventory (one SQLite file, or one PostgreSQL database), as two servers are:
what both attempt at once is done, and announced, once. Each test makes the two interleave at the
moment that matters (one reads, the other writes, the first writes) instead of hoping threads do."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from test_store_contract import make_tool

from awb.clock import ManualClock
from awb.config import Config
from awb.errors import NameConflict, ToolDeleted
from awb.events import Event
from awb.inventory.models import CallRecord
from awb.workbench import Workbench
from support import add_tool, once_after

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def two_servers(config: Config, clock: ManualClock) -> AsyncIterator[tuple[Workbench, Workbench]]:
    async with Workbench(config, clock=clock) as one, Workbench(config, clock=clock) as other:
        yield one, other


def purges(*workbenches: Workbench) -> list[str]:
    """The ids of every purge announced by any of `workbenches`, as they are announced."""
    seen: list[str] = []

    def heard(event: Event) -> None:
        if event.kind == "deleted" and event.data.get("purged") and event.tool_id is not None:
            seen.append(event.tool_id)

    for workbench in workbenches:
        workbench.events.subscribe(heard)
    return seen


async def test_two_servers_purging_the_same_deleted_tools_remove_and_announce_each_once(store_config: Config) -> None:
    async with two_servers(store_config, ManualClock()) as (one, other):
        ids = [(await one.craft(add_tool(name))).tool_id for name in ("p1", "p2")]
        for name in ("p1", "p2"):
            one.delete(name)
        heard = purges(one, other)
        by_other: list[str] = []
        once_after(one.store, lambda: by_other.extend(t.tool_id for t in other.purge(deleted=True)), "purge_candidates")
        by_one = [t.tool_id for t in one.purge(deleted=True)]
    assert sorted(by_other) == sorted(ids)
    assert by_one == []  # they were gone when it came to remove them: it says it removed nothing
    assert sorted(heard) == sorted(ids)


async def test_deletes_past_max_deleted_tools_on_two_servers_announce_each_purge_once(store_config: Config) -> None:
    config = store_config.model_copy(update={"max_deleted_tools": 1})
    clock = ManualClock()
    async with two_servers(config, clock) as (one, other):
        for name in ("d1", "d2", "d3"):
            await one.craft(add_tool(name))
        one.delete("d1")
        clock.advance(seconds=1)
        heard = purges(one, other)
        # `one` deletes d2 and lists what is past the cap (d1); `other` deletes d3 and purges d1 and d2
        # before `one` comes to purge d1.
        once_after(one.store, lambda: (clock.advance(seconds=1), other.delete("d3")), "deleted_past")
        one.delete("d2")
        left = one.store.purge_candidates(archived_before=None, deleted=True)
    assert [t.name for t in left] == ["d3"]
    assert len(heard) == len(set(heard)) == 2


async def test_an_archived_tool_called_back_to_life_while_a_purge_lists_it_is_not_purged(store_config: Config) -> None:
    clock = ManualClock()
    async with two_servers(store_config, clock) as (one, other):
        crafted = await one.craft(add_tool("sleeper"))
        clock.advance(days=61)
        assert [c.after for c in one.maintain()] == ["archived"]
        clock.advance(days=1)

        def called_on_the_other_server() -> None:
            call = CallRecord(tool_id=crafted.tool_id, version=1, at=clock.now(), duration_ms=1, ok=True)
            other.store.record_call(call)

        once_after(one.store, called_on_the_other_server, "purge_candidates")
        purged = one.purge(archived_before_days=0)
        tool = other.inspect(crafted.tool_id).tool
    assert purged == []
    assert (tool.status, tool.usage_count) == ("active", 1)


async def test_one_tool_deleted_on_two_servers_at_once_is_deleted_and_announced_once(store_config: Config) -> None:
    async with two_servers(store_config, ManualClock()) as (one, other):
        await one.craft(add_tool("contested"))
        deletes: list[Event] = []
        for workbench in (one, other):
            workbench.events.subscribe(lambda e: deletes.append(e) if e.kind == "deleted" else None)
        stale = one.resolve("contested")
        other.delete("contested")
        real_resolve = one.resolve
        reads = iter([stale])  # `one` read the tool just before `other` deleted it
        one.resolve = lambda ref, **kw: next(reads, None) or real_resolve(ref, **kw)  # type: ignore[method-assign]
        with pytest.raises(ToolDeleted):
            one.delete("contested")
    assert len(deletes) == 1


async def test_a_craft_that_loses_its_name_to_another_servers_craft_says_so_on_the_panel(store_config: Config) -> None:
    """Both crafts found the name free; the other's row went in first. The loser's `craft_started` (a
    "crafting ..." toast on every panel) is followed by a `craft_rejected` naming the reason, as an
    admission failure is, not left without an outcome."""
    async with two_servers(store_config, ManualClock()) as (one, other):
        heard: list[Event] = []
        one.events.subscribe(heard.append)
        once_after(one.store, lambda: other.store.add_tool(make_tool("contested")), "check_room")
        with pytest.raises(NameConflict):
            await one.craft(add_tool("contested"))
    assert [e.kind for e in heard] == ["craft_started", "craft_rejected"]
    assert heard[1].data == {"name": "contested", "reason": "a tool named 'contested' already exists"}
