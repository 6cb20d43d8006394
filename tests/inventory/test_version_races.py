"""Updates and rollbacks on two servers sharing one inventory (one SQLite file, or one PostgreSQL
database), interleaved at the moment that matters by hooks, not by hoping threads do: a deleted tool
gains no version, and no two versions of a tool get one number."""

from __future__ import annotations

import pytest
from anyio.from_thread import start_blocking_portal

from awb.clock import ManualClock
from awb.config import Config
from awb.errors import ToolDeleted
from awb.workbench import Workbench
from support import add_tool, once_after

pytestmark = pytest.mark.anyio

NEW_CODE = "def run(params):\n    return params['a'] + params['b'] + 0\n"


def code(mark: str) -> str:
    """The same sum, told apart by a comment."""
    return f"# {mark}\n{NEW_CODE}"


async def test_an_update_racing_a_delete_on_another_server_adds_no_version(store_config: Config) -> None:
    clock = ManualClock()
    async with Workbench(store_config, clock=clock) as one, Workbench(store_config, clock=clock) as other:
        crafted = await one.craft(add_tool("doomed"))
        # The delete lands while the update's examples run, after the update read the tool.
        once_after(one, lambda: other.delete("doomed"), "admit_version")
        with pytest.raises(ToolDeleted, match="deleted while it was updated"):
            await one.update("doomed", code=NEW_CODE)
        versions = other.store.versions(crafted.tool_id)
        tool = other.store.get(crafted.tool_id)
    assert [v.version for v in versions] == [1]
    assert tool is not None and (tool.status, tool.version, tool.code) == ("deleted", 1, crafted.code)


async def test_a_rollback_racing_a_delete_on_another_server_leaves_the_tool_deleted_and_unmoved(
    store_config: Config,
) -> None:
    clock = ManualClock()
    async with Workbench(store_config, clock=clock) as one, Workbench(store_config, clock=clock) as other:
        crafted = await one.craft(add_tool("doomed"))
        await one.update("doomed", code=NEW_CODE)
        once_after(one.store, lambda: other.delete("doomed"), "versions")  # right after the rollback read them
        with pytest.raises(ToolDeleted, match="deleted while it was rolled back"):
            one.rollback("doomed", 1)
        tool = other.store.get(crafted.tool_id)
    assert tool is not None and (tool.status, tool.version) == ("deleted", 2)


async def test_updates_and_a_rollback_on_two_servers_never_give_two_versions_one_number(store_config: Config) -> None:
    """Server one's update moves the tool from 3; before it stores its version, server two rolls the
    tool back to 3 and updates it: numbered outside the write, both new versions were 4."""
    clock = ManualClock()
    async with Workbench(store_config, clock=clock) as one:
        crafted = await one.craft(add_tool("contested"))
        for n in (2, 3):
            await one.update("contested", code=code(f"v{n}"))
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(Workbench(store_config, clock=clock)) as other,
        ):
            theirs: list[int] = []

            def rolled_back_and_updated_elsewhere() -> None:
                portal.call(other.rollback, "contested", 3)
                updated = portal.call(lambda: other.update("contested", code=code("theirs")))
                theirs.append(updated.version)

            # Right after the first write the update makes.
            once_after(one.store, rolled_back_and_updated_elsewhere, "update_if", "add_current_version")
            ours = await one.update("contested", code=code("ours"))
            versions = {v.version: v.code for v in one.store.versions(crafted.tool_id)}
            current = portal.call(other.store.get, crafted.tool_id)
    assert (ours.version, theirs) == (4, [5])
    assert (versions[4], versions[5]) == (code("ours"), code("theirs"))
    assert current is not None and (current.version, current.code) == (5, code("theirs"))
