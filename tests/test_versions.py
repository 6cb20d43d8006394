"""Versions: updates admitted by their examples, immutable history, rollback, counters across versions."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import pytest
from mcp import Client

from awb.errors import AdmissionFailed, ExecutionError, InvalidParams, VersionConflict
from awb.events import Event
from awb.server.mcp import McpFace
from awb.workbench import Workbench
from support import ADD_CODE, add_tool

pytestmark = pytest.mark.anyio

# The same sum, written another way: it passes add_tool's example.
DOUBLE_SUM = "def run(params):\n    total = params['a'] + params['b']\n    return total\n"
TIMES_CODE = "def run(params):\n    return params['a'] * params['b']\n"
MULTIPLY = {
    "code": TIMES_CODE,
    "description": "Multiply two numbers",
    "examples": [{"params": {"a": 2, "b": 3}, "expected": 6}],
}


async def test_update_stores_a_new_version_and_keeps_the_old_one_inspectable(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    updated = await workbench.update(tool.tool_id, **MULTIPLY)
    assert (updated.version, updated.parent_version) == (2, 1)
    assert (await workbench.call(tool.name, {"a": 4, "b": 5})).result == 20
    inspection = workbench.inspect(tool.name)
    assert inspection.tool.version == 2
    assert [v.version for v in inspection.versions] == [1, 2]
    assert inspection.versions[0].code == tool.code
    assert inspection.versions[1].description == "Multiply two numbers"


async def test_update_whose_examples_fail_is_rejected_with_a_report_and_changes_nothing(
    workbench: Workbench,
) -> None:
    tool = await workbench.craft(add_tool())
    with pytest.raises(AdmissionFailed) as raised:
        await workbench.update(tool.name, code=TIMES_CODE)  # the current example expects 1 + 2 = 3
    report = raised.value.details["examples"]
    assert report[0]["ok"] is False and report[0]["got"] == 2 and report[0]["expected"] == 3
    assert workbench.inspect(tool.name).tool.version == 1
    assert [v.version for v in workbench.store.versions(tool.tool_id)] == [1]


async def test_update_without_any_field_is_invalid(workbench: Workbench) -> None:
    await workbench.craft(add_tool())
    with pytest.raises(InvalidParams):
        await workbench.update("add_numbers")


async def test_rollback_makes_an_earlier_version_current_and_the_next_update_gets_a_new_number(
    workbench: Workbench,
) -> None:
    tool = await workbench.craft(add_tool())
    await workbench.update(tool.name, **MULTIPLY)
    back = workbench.rollback(tool.name, 1)
    assert (back.version, back.parent_version) == (1, 2)
    assert (await workbench.call(tool.name, {"a": 4, "b": 5})).result == 9
    assert workbench.inspect(tool.name).tool.description == "Add two numbers and return the sum"
    again = await workbench.update(tool.name, description="Add two numbers (v3)")
    assert again.version == 3
    assert [v.version for v in workbench.store.versions(tool.tool_id)] == [1, 2, 3]


async def test_a_rollback_to_the_current_version_writes_nothing_and_says_it_moved_nothing(
    workbench: Workbench,
) -> None:
    tool = await workbench.craft(add_tool())
    await workbench.update(tool.name, **MULTIPLY)
    before = workbench.inspect(tool.name)
    events: list[Event] = []
    workbench.events.subscribe(events.append)
    stay = workbench.rollback(tool.name, 2)
    # The version current before this request was 2 itself: not the record's parent_version (1),
    # which would read as a move from 1 to 2.
    assert (stay.version, stay.parent_version) == (2, 2)
    assert events == []
    assert workbench.inspect(tool.name) == before  # the record keeps its own parent_version and updated_at
    back = workbench.rollback(tool.name, 1)
    assert (back.version, back.parent_version) == (1, 2)
    again = workbench.rollback(tool.name, 1)
    assert (again.version, again.parent_version) == (1, 1)
    assert workbench.inspect(tool.name).tool.parent_version == 2
    assert [e.kind for e in events] == ["updated"]


async def test_rollback_to_a_version_that_does_not_exist_is_invalid_params(workbench: Workbench) -> None:
    await workbench.craft(add_tool())
    with pytest.raises(InvalidParams) as raised:
        workbench.rollback("add_numbers", 7)
    assert raised.value.details["versions"] == [1]
    assert raised.value.details["field"] == "to_version"


async def test_usage_stays_with_the_tool_while_failures_are_counted_per_version(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    await workbench.call(tool.name, {"a": 1, "b": 1})
    await workbench.update(
        tool.name,
        code="def run(params):\n    return 1 // params['a'] + params['b'] - 1\n",
        examples=[{"params": {"a": 1, "b": 1}, "expected": 1}],
    )
    await workbench.call(tool.name, {"a": 1, "b": 2})
    with pytest.raises(ExecutionError):
        await workbench.call(tool.name, {"a": 0, "b": 2})
    inspection = workbench.inspect(tool.name)
    assert inspection.tool.usage_count == 2  # successes across both versions
    assert inspection.tool.failure_count == 1
    v1, v2 = inspection.versions
    assert (v1.usage_count, v1.failure_count) == (1, 0)
    assert (v2.usage_count, v2.failure_count) == (2, 1)


async def test_a_new_version_of_an_equipped_tool_changes_the_tool_list(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    workbench.equip(tool.name)
    events: list[Event] = []
    workbench.events.subscribe(events.append)
    await workbench.update(tool.name, **MULTIPLY)
    workbench.rollback(tool.name, 1)
    assert [e.kind for e in events] == ["updated", "updated"]
    assert all(e.changes_tool_list for e in events)
    assert workbench.equipped_tools()[0].version == 1


async def test_a_new_version_of_an_unequipped_tool_leaves_the_tool_list_alone(workbench: Workbench) -> None:
    tool = await workbench.craft(add_tool())
    events: list[Event] = []
    workbench.events.subscribe(events.append)
    await workbench.update(tool.name, **MULTIPLY)
    assert [e.changes_tool_list for e in events] == [False]


async def test_two_updates_built_on_the_same_version_do_not_lose_one_another(workbench: Workbench) -> None:
    """Each update keeps the fields it leaves out from the version it was built on: the second to finish
    would make current a version without the first one's change. It gets `version_conflict` instead."""
    await workbench.craft(add_tool())
    outcomes: dict[str, Any] = {}

    async def update(label: str, **fields: Any) -> None:
        try:
            outcomes[label] = await workbench.update("add_numbers", **fields)
        except VersionConflict as conflict:
            outcomes[label] = conflict

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(partial(update, "description", description="Add two numbers, described anew"))
            group.start_soon(partial(update, "code", code=DOUBLE_SUM))
    conflicts = [o for o in outcomes.values() if isinstance(o, VersionConflict)]
    updated = [o for o in outcomes.values() if not isinstance(o, VersionConflict)]
    assert len(conflicts) == 1 and len(updated) == 1, outcomes
    assert conflicts[0].code == "version_conflict"
    assert (conflicts[0].details["based_on"], conflicts[0].details["current"]) == (1, 2)
    current = workbench.resolve("add_numbers")
    assert (current.version, current.code, current.description) == (2, updated[0].code, updated[0].description)
    assert [v.version for v in workbench.store.versions(current.tool_id)] == [1, 2]
    # The update that lost, sent again, is built on version 2: both changes are current.
    lost = next(label for label, outcome in outcomes.items() if isinstance(outcome, VersionConflict))
    fields = {"description": "Add two numbers, described anew"} if lost == "description" else {"code": DOUBLE_SUM}
    again = await workbench.update("add_numbers", **fields)
    assert (again.version, again.code, again.description) == (3, DOUBLE_SUM, "Add two numbers, described anew")


async def test_a_rollback_from_a_version_another_writer_replaced_meanwhile_is_a_conflict(
    workbench: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another server (or the CLI) makes version 3 current between the rollback's read and its write: the
    rollback, built on version 2, is refused and version 3 stays current."""
    await workbench.craft(add_tool())
    await workbench.update("add_numbers", description="second")
    await workbench.update("add_numbers", description="third")
    tool = workbench.rollback("add_numbers", 2)
    store, versions = workbench.store, workbench.store.versions

    def versions_while_another_writer_moves_it(tool_id: str) -> Any:
        history = versions(tool_id)
        third = next(v for v in history if v.version == 3)
        store.update(tool_id, version=3, parent_version=2, code=third.code, description=third.description)
        return history

    monkeypatch.setattr(store, "versions", versions_while_another_writer_moves_it)
    with pytest.raises(VersionConflict) as conflict:
        workbench.rollback("add_numbers", 1)
    assert (conflict.value.details["based_on"], conflict.value.details["current"]) == (tool.version, 3)
    monkeypatch.undo()
    current = workbench.resolve("add_numbers")
    assert (current.version, current.description) == (3, "third")


async def test_an_older_record_named_like_a_tool_id_can_still_be_updated(workbench: Workbench) -> None:
    """New names may not look like tool ids; a record stored before that rule keeps working."""
    tool = await workbench.craft(add_tool())
    workbench.store.update(tool.tool_id, name="tool_0123456789abcdef")
    with pytest.raises(InvalidParams, match="look like a tool id"):
        await workbench.craft({**add_tool(), "name": "tool_0123456789abcdee"})
    updated = await workbench.update(tool.tool_id, description="Add two numbers, again")
    assert (updated.version, updated.name) == (2, "tool_0123456789abcdef")


async def test_an_update_that_changes_nothing_writes_no_version_and_evicts_no_history(
    workbench: Workbench,
) -> None:
    """A client retrying an update (its answer lost to a timeout) wrote the same version again on each try, and
    past `max_versions_per_tool` the copies pushed the tool's earlier versions out of its history."""
    workbench.config.max_versions_per_tool = 3
    tool = await workbench.craft(add_tool())
    await workbench.update(tool.name, code=DOUBLE_SUM)
    events: list[Event] = []
    workbench.events.subscribe(events.append)
    for _ in range(3):
        same = await workbench.update(tool.name, code=DOUBLE_SUM, description=tool.description)
        assert (same.version, same.parent_version) == (2, 2)  # as a rollback to the current version says
    assert events == []
    assert [v.version for v in workbench.inspect(tool.name).versions] == [1, 2]
    changed = await workbench.update(tool.name, **MULTIPLY)
    assert (changed.version, changed.parent_version) == (3, 2)


async def test_awb_update_that_changes_nothing_says_unchanged(workbench: Workbench) -> None:
    await workbench.craft(add_tool())
    async with Client(McpFace(workbench).server) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("awb_update", {"name": "add_numbers", "code": ADD_CODE})
    assert result.structured_content is not None and not result.is_error
    assert result.structured_content["status"] == "unchanged" and result.structured_content["version"] == 1
