"""Updates and rollbacks on two servers sharing one inventory (one SQLite file, or one PostgreSQL
database), interleaved at the moment that matters by hooks, not by hoping threads do: a deleted tool
gains no version, and no two versions of a tool get one number."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from awb.clock import ManualClock
from awb.config import Config
from awb.errors import ToolDeleted
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio

NEW_CODE = "def run(params):\n    return params['a'] + params['b'] + 0\n"


def code(mark: str) -> str:
    """The same sum, told apart by a comment."""
    return f"# {mark}\n{NEW_CODE}"


def then(workbench: Workbench, method: str, meanwhile: Callable[[], Any]) -> None:
    """Run `meanwhile` (another server's turn) once, right after `workbench.<method>` (sync or async)
    returns, before the rest of the request goes on."""
    original = getattr(workbench, method)
    done = False

    async def first_then_the_other(*args: Any, **kwargs: Any) -> Any:
        nonlocal done
        result = await original(*args, **kwargs)
        if not done:
            done = True
            meanwhile()
        return result

    setattr(workbench, method, first_then_the_other)


def after_first_write(workbench: Workbench, meanwhile: Callable[[], Any]) -> None:
    """Run `meanwhile` once, right after the first write an update makes to `workbench.store`."""
    store = workbench.store
    done = False
    for name in ("update_if", "add_current_version"):
        original = getattr(store, name, None)
        if original is None:
            continue

        def written_then_the_other(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            nonlocal done
            result = _original(*args, **kwargs)
            if not done:
                done = True
                meanwhile()
            return result

        setattr(store, name, written_then_the_other)


async def test_an_update_racing_a_delete_on_another_server_adds_no_version(store_config: Config) -> None:
    clock = ManualClock()
    async with Workbench(store_config, clock=clock) as one, Workbench(store_config, clock=clock) as other:
        crafted = await one.craft(add_tool("doomed"))
        # The delete lands while the update's examples run, after the update read the tool.
        then(one, "admit_version", lambda: other.delete("doomed"))
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
        original = one.store.versions

        def read_then_deleted_elsewhere(tool_id: str) -> Any:
            history = original(tool_id)
            other.delete("doomed")
            return history

        one.store.versions = read_then_deleted_elsewhere  # type: ignore[method-assign]
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

            after_first_write(one, rolled_back_and_updated_elsewhere)
            ours = await one.update("contested", code=code("ours"))
            versions = {v.version: v.code for v in one.store.versions(crafted.tool_id)}
            current = portal.call(other.store.get, crafted.tool_id)
    assert (ours.version, theirs) == (4, [5])
    assert (versions[4], versions[5]) == (code("ours"), code("theirs"))
    assert current is not None and (current.version, current.code) == (5, code("theirs"))
