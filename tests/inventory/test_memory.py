"""Memory tiers: promotion on use, demotion and archiving on maintenance, resurrection on call."""

from __future__ import annotations

import pytest

from awb.clock import ManualClock
from awb.config import Config, MemoryConfig
from awb.errors import ToolRuntimeError
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


async def test_a_call_brings_a_demoted_then_archived_tool_straight_back_to_the_tier_its_uses_earned(
    workbench: Workbench, clock: ManualClock
) -> None:
    code = "def run(params):\n    if params.get('fail'):\n        raise ValueError('asked to')\n    return 1\n"
    tool = await workbench.craft({"name": "flaky", "description": "Fail when asked", "code": code})
    for _ in range(5):
        await workbench.call(tool.tool_id, {})
    clock.advance(days=31)
    workbench.maintain()
    clock.advance(days=61)
    workbench.maintain()
    assert workbench.resolve(tool.tool_id).memory_level == "archived"
    with pytest.raises(ToolRuntimeError):
        await workbench.call(tool.tool_id, {"fail": True})  # a failed call leaves it archived
    assert workbench.resolve(tool.tool_id).status == "archived"
    result = await workbench.call(tool.tool_id, {})
    assert (result.memory_level, result.usage_count) == ("medium_term", 6)


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
        await workbench.upkeep.settled()  # it ran in a worker thread, off the event loop
        assert workbench.resolve(stale.tool_id).memory_level == "archived"


async def test_maintenance_never_overwrites_a_call_or_equip_another_process_made_meanwhile(
    store_config: Config, clock: ManualClock
) -> None:
    from awb.inventory.models import CallRecord
    from awb.inventory.open import open_store

    async with Workbench(store_config, clock=clock) as workbench:
        busy = await workbench.craft(add_tool("busy_adder"))
        for _ in range(5):
            await workbench.call(busy.tool_id, {"a": 1, "b": 1})
        idle = await workbench.craft(add_tool("idle_adder"))
        kept = await workbench.craft(add_tool("kept_adder"))
        clock.advance(days=61)  # busy is due for demotion, idle and kept for the archive
        other = open_store(store_config)  # another process's connection to the same inventory
        read_tools = workbench.store.iter_maintainable

        def read_then_others_act(idle_before: object = None) -> object:
            tools = list(read_tools(idle_before))  # type: ignore[arg-type]
            other.record_call(
                CallRecord(tool_id=busy.tool_id, version=1, at=clock.now(), duration_ms=1.0, ok=True),
            )
            other.update(kept.tool_id, equipped=True)
            return iter(tools)

        workbench.store.iter_maintainable = read_then_others_act  # type: ignore[method-assign]
        try:
            changes = workbench.maintain()
        finally:
            other.close()
        assert [(c.tool_id, c.after) for c in changes] == [(idle.tool_id, "archived")]
        after_busy, after_kept = workbench.resolve(busy.tool_id), workbench.resolve(kept.tool_id)
        assert (after_busy.memory_level, after_busy.usage_count, after_busy.last_used_at) == (
            "medium_term",
            6,
            clock.now(),
        )
        assert (after_kept.memory_level, after_kept.status, after_kept.equipped) == ("short_term", "active", True)
        del workbench.store.iter_maintainable
        # Looked at again later, with nothing in between, the due changes happen.
        clock.advance(days=61)
        assert {(c.tool_id, c.after) for c in workbench.maintain()} == {
            (busy.tool_id, "short_term"),
            (kept.tool_id, "archived"),
        }


async def test_maintenance_keeps_each_called_tools_most_recent_call_records(
    tmp_path: object, clock: ManualClock
) -> None:
    memory = MemoryConfig(maintenance_every_calls=4, calls_kept_per_tool=3)
    config = Config(inventory_path=f"{tmp_path}/inv.db", memory=memory)
    async with Workbench(config, clock=clock) as workbench:
        busy = await workbench.craft(add_tool("busy"))
        ids = [(await workbench.call(busy.tool_id, {"a": 1, "b": n})).call_id for n in range(8)]
        await workbench.upkeep.settled()  # the 8th call started a run in a worker thread
        assert [c.call_id for c in workbench.store.calls(busy.tool_id, limit=100)] == ids[:-4:-1]
        assert workbench.resolve(busy.tool_id).usage_count == 8  # counters never shrink
        await workbench.call(busy.tool_id, {"a": 1, "b": 9})
        assert len(workbench.store.calls(busy.tool_id, limit=100)) == 4  # until the next run
        assert workbench.prune_calls() == 1


async def test_calls_kept_zero_keeps_every_call_record(tmp_path: object, clock: ManualClock) -> None:
    memory = MemoryConfig(maintenance_every_calls=2, calls_kept_per_tool=0)
    async with Workbench(Config(inventory_path=f"{tmp_path}/inv.db", memory=memory), clock=clock) as workbench:
        tool = await workbench.craft(add_tool("kept_all"))
        for n in range(5):
            await workbench.call(tool.tool_id, {"a": 1, "b": n})
        await workbench.upkeep.settled()
        assert workbench.prune_calls() == 0
        assert len(workbench.store.calls(tool.tool_id, limit=100)) == 5
