"""Memory tiers: promotion on use, demotion and archiving on maintenance, resurrection on call."""

from __future__ import annotations

import pytest

from awb.clock import ManualClock
from awb.config import Config, MemoryConfig
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio


async def test_a_new_tool_starts_in_short_term_memory_with_no_use(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    assert (tool.memory_level, tool.usage_count, tool.last_used_at) == ("short_term", 0, None)


async def test_successful_calls_promote_at_the_configured_thresholds(tmp_path: object, clock: ManualClock) -> None:
    config = Config(
        inventory_path=f"{tmp_path}/inv.db",
        memory=MemoryConfig(promotion_threshold_medium=2, promotion_threshold_long=4),
    )
    async with Workbench(config, clock=clock) as workbench:
        tool = await workbench.craft(add_tool())
        levels = [(await workbench.call(tool.tool_id, {"a": 1, "b": 1})).memory_level for _ in range(4)]
        assert levels == ["short_term", "medium_term", "medium_term", "long_term"]
        assert workbench.resolve(tool.tool_id).last_used_at == clock.now()


async def test_failed_calls_count_failures_but_never_promote(workbench: Workbench) -> None:
    tool = await workbench.craft(
        {"name": "boom", "description": "fails", "code": "def run(params):\n    raise ValueError('no')\n"}
    )
    for _ in range(6):
        with pytest.raises(Exception, match="ValueError"):
            await workbench.call(tool.tool_id, {})
    after = workbench.resolve(tool.tool_id)
    assert (after.memory_level, after.usage_count, after.failure_count) == ("short_term", 0, 6)


async def test_idle_medium_term_tools_are_demoted_after_thirty_days(workbench: Workbench, clock: ManualClock) -> None:
    tool = await workbench.craft(add_tool())
    for _ in range(5):
        await workbench.call(tool.tool_id, {"a": 1, "b": 1})
    clock.advance(days=29)
    assert workbench.maintain() == []
    clock.advance(days=2)
    [change] = workbench.maintain()
    assert (change.before, change.after) == ("medium_term", "short_term")
    assert workbench.resolve(tool.tool_id).memory_level == "short_term"


async def test_idle_short_term_tools_are_archived_yet_stay_searchable(workbench: Workbench, clock: ManualClock) -> None:
    cold = await workbench.craft(add_tool("cold_adder"))
    clock.advance(days=61)
    warm = await workbench.craft(add_tool("warm_adder"))
    [change] = workbench.maintain()
    assert (change.tool_id, change.after) == (cold.tool_id, "archived")
    hits = workbench.search("add numbers").results
    assert [h.name for h in hits] == ["warm_adder", "cold_adder"]
    assert hits[-1].memory_level == "archived"
    assert warm.tool_id == hits[0].tool_id


async def test_calling_an_archived_tool_brings_it_back_to_short_term(workbench: Workbench, clock: ManualClock) -> None:
    tool = await workbench.craft(add_tool())
    clock.advance(days=90)
    workbench.maintain()
    assert workbench.resolve(tool.tool_id).memory_level == "archived"
    result = await workbench.call(tool.tool_id, {"a": 2, "b": 3})
    assert (result.result, result.memory_level) == (5, "short_term")
    assert workbench.resolve(tool.tool_id).status == "active"


async def test_long_term_tools_are_never_demoted(tmp_path: object, clock: ManualClock) -> None:
    config = Config(inventory_path=f"{tmp_path}/inv.db", memory=MemoryConfig(promotion_threshold_long=5))
    async with Workbench(config, clock=clock) as workbench:
        tool = await workbench.craft(add_tool())
        for _ in range(5):
            await workbench.call(tool.tool_id, {"a": 1, "b": 1})
        clock.advance(days=365)
        assert workbench.maintain() == []
        assert workbench.resolve(tool.tool_id).memory_level == "long_term"


async def test_maintenance_runs_by_itself_every_n_calls(tmp_path: object, clock: ManualClock) -> None:
    config = Config(inventory_path=f"{tmp_path}/inv.db", memory=MemoryConfig(maintenance_every_calls=3))
    async with Workbench(config, clock=clock) as workbench:
        stale = await workbench.craft(add_tool("stale"))
        busy = await workbench.craft(add_tool("busy"))
        clock.advance(days=61)
        for _ in range(2):
            await workbench.call(busy.tool_id, {"a": 1, "b": 1})
        assert workbench.resolve(stale.tool_id).memory_level == "short_term"
        await workbench.call(busy.tool_id, {"a": 1, "b": 1})
        assert workbench.resolve(stale.tool_id).memory_level == "archived"
