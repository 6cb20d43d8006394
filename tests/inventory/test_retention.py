"""What the inventory keeps is bounded: `max_versions_per_tool` versions of a tool and `max_deleted_tools`
soft-deleted tools; every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.errors import InvalidParams
from awb.events import Event
from awb.inventory.models import ToolVersion
from awb.inventory.store import Store
from awb.workbench import Workbench
from inventory.test_store_contract import NOW, make_tool
from support import add_tool

pytestmark = pytest.mark.anyio


def numbered(version: int) -> ToolVersion:
    return ToolVersion(
        version=version,
        code=f"def run(params):\n    return {version}\n",
        description=f"v{version}",
        input_schema={},
        runtime="monty",
        created_at=NOW + timedelta(seconds=version),
    )


def test_a_version_past_the_cap_removes_the_oldest_but_never_the_current_one_or_itself(store: Store) -> None:
    store.add_tool(make_tool("evolving"))  # version 1 is current, and stays so throughout
    for version in (2, 3):
        assert store.add_version("tool_evolving", numbered(version), keep=3) == []
    assert store.add_version("tool_evolving", numbered(4), keep=3) == [2]
    assert store.add_version("tool_evolving", numbered(5), keep=3) == [3]
    assert [v.version for v in store.versions("tool_evolving")] == [1, 4, 5]
    # Both spared versions past a cap of one: the current one and the one just added.
    assert store.add_version("tool_evolving", numbered(6), keep=1) == [4, 5]
    assert [v.version for v in store.versions("tool_evolving")] == [1, 6]
    assert store.add_version("tool_evolving", numbered(7)) == []  # no cap given: nothing goes
    assert [v.version for v in store.versions("tool_evolving")] == [1, 6, 7]


def test_making_a_version_current_holds_only_while_that_version_is_kept(store: Store) -> None:
    store.add_tool(make_tool("evolving"))
    store.add_version("tool_evolving", numbered(2))
    store.add_version("tool_evolving", numbered(3))
    store.update("tool_evolving", version=3, parent_version=1)
    assert store.add_version("tool_evolving", numbered(4), keep=2) == [1, 2]
    # A rollback that read version 2 before it was pruned must not make it current.
    assert store.update_to_version("tool_evolving", {"version": 3}, version=2, code="x") is False
    tool = store.get("tool_evolving")
    assert tool is not None and tool.version == 3
    assert store.update_to_version("tool_evolving", {"version": 3}, version=4, parent_version=3) is True
    tool = store.get("tool_evolving")
    assert tool is not None and (tool.version, tool.parent_version) == (4, 3)


async def test_updates_keep_max_versions_per_tool_and_a_pruned_version_cannot_be_rolled_back_to(
    store_config: Config,
) -> None:
    config = store_config.model_copy(update={"max_versions_per_tool": 3})
    async with Workbench(config, clock=ManualClock()) as workbench:
        crafted = await workbench.craft(add_tool("adder"))
        for n in range(4):
            await workbench.update("adder", description=f"Add two numbers, take {n + 2}")
        assert [v.version for v in workbench.inspect("adder").versions] == [3, 4, 5]
        with pytest.raises(InvalidParams) as missing:
            workbench.rollback("adder", 1)
        assert missing.value.details == {"field": "to_version", "tool_id": crafted.tool_id, "versions": [3, 4, 5]}
        assert workbench.rollback("adder", 3).version == 3
        updated = await workbench.update("adder", description="Add two numbers, after the rollback")
        assert (updated.version, updated.parent_version) == (6, 3)
        assert [v.version for v in workbench.inspect("adder").versions] == [4, 5, 6]
        assert (await workbench.call("adder", {"a": 2, "b": 3})).result == 5


async def test_a_rollback_whose_target_is_pruned_meanwhile_says_the_version_is_gone(store_config: Config) -> None:
    config = store_config.model_copy(update={"max_versions_per_tool": 2})
    async with Workbench(config, clock=ManualClock()) as workbench:
        crafted = await workbench.craft(add_tool("adder"))
        await workbench.update("adder", description="Add two numbers, second")
        store = workbench.store
        read_versions = store.versions

        def versions_then_another_server_updates(tool_id: str) -> list[ToolVersion]:
            history = read_versions(tool_id)
            # Between the rollback's read and its write, another server updates (version 3, which
            # prunes version 1, the rollback's target) and rolls back to 2: the compare-and-set on
            # the current version alone would hold.
            store.update(tool_id, version=3, parent_version=2)
            store.add_version(tool_id, numbered(3), keep=2)
            store.update(tool_id, version=2, parent_version=3)
            workbench.store.versions = read_versions  # type: ignore[method-assign]
            return history

        store.versions = versions_then_another_server_updates  # type: ignore[method-assign]
        with pytest.raises(InvalidParams) as gone:
            workbench.rollback("adder", 1)
        assert gone.value.details["versions"] == [2, 3]
        tool = workbench.inspect(crafted.tool_id).tool
        assert tool.version == 2
        assert [v.version for v in workbench.inspect(crafted.tool_id).versions] == [2, 3]


async def test_deletes_past_max_deleted_tools_purge_the_longest_deleted_with_their_records(
    store_config: Config,
) -> None:
    config = store_config.model_copy(update={"max_deleted_tools": 2})
    clock = ManualClock()
    async with Workbench(config, clock=clock) as workbench:
        purged: list[Event] = []
        workbench.events.subscribe(lambda e: purged.append(e) if e.data.get("purged") else None)
        ids = []
        for name in ("t1", "t2", "t3", "t4"):
            crafted = await workbench.craft(add_tool(name))
            await workbench.call(name, {"a": 1, "b": 1})
            await workbench.update(name, description=f"Add two numbers ({name})")
            ids.append(crafted.tool_id)
        for name in ("t3", "t1", "t4", "t2"):  # deleted in this order, a moment apart
            clock.advance(seconds=1)
            workbench.delete(name)
        store = workbench.store
        for gone in (ids[2], ids[0]):
            assert store.get(gone) is None
            assert store.versions(gone) == [] and store.calls(gone) == []
        assert [e.tool_id for e in purged] == [ids[2], ids[0]]
        assert [t.tool_id for t in store.purge_candidates(archived_before=None, deleted=True)] == [ids[1], ids[3]]
        assert workbench.inspect(ids[1]).tool.status == "deleted"  # the kept ones stay inspectable


async def test_max_deleted_tools_of_zero_purges_a_tool_as_it_is_deleted(store_config: Config) -> None:
    config = store_config.model_copy(update={"max_deleted_tools": 0})
    async with Workbench(config, clock=ManualClock()) as workbench:
        crafted = await workbench.craft(add_tool("brief"))
        assert workbench.delete("brief").status == "deleted"
        assert workbench.store.get(crafted.tool_id) is None
