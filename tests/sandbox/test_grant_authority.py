"""A tool reads, stages and has its writes applied only inside what the configuration grants its name now
(`sandbox.grants`): not what its stored record says. The record was written when the tool was crafted
(or came with an import, or from a replica with other grants), so revoking a grant in the configuration
left the tool reading and writing there for good."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.config import Config
from awb.errors import ExecutionError, SandboxViolation
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging
from awb.workbench import Workbench
from sandbox_support import granted_tool

pytestmark = pytest.mark.anyio

READER = "def run(params):\n    return read_file(params['path'])\n"
WRITER = "def run(params):\n    return write_file(params['path'], 'changed')\n"


@pytest.fixture
def private(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "secret.txt").write_text("TOP SECRET")
    return folder


def config_granting(tmp_path: Path, grants: dict[str, list[str]]) -> Config:
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "awb.pid")
    config.sandbox.grants = grants
    return config


@pytest.fixture
async def revoked(tmp_path: Path, private: Path) -> AsyncIterator[Workbench]:
    """A workbench whose configuration no longer grants `private` to the tools crafted while it did; one
    write was staged then."""
    granted = config_granting(tmp_path, {"reader": [str(private)], "writer": [str(private)]})
    async with Workbench(granted) as workbench:
        await workbench.craft({"name": "reader", "description": "reads a granted file", "code": READER})
        await workbench.craft({"name": "writer", "description": "stages a write to a file", "code": WRITER})
        assert (await workbench.call("reader", {"path": str(private / "secret.txt")})).result == "TOP SECRET"
        await workbench.call("writer", {"path": str(private / "secret.txt")})
    async with Workbench(config_granting(tmp_path, {})) as workbench:
        yield workbench


async def test_a_grant_revoked_in_the_configuration_no_longer_lets_a_tool_read(
    revoked: Workbench, private: Path
) -> None:
    with pytest.raises(ExecutionError) as refused:
        await revoked.call("reader", {"path": str(private / "secret.txt")})
    assert refused.value.code == "sandbox_violation"
    assert "TOP SECRET" not in str(refused.value.to_dict())


async def test_a_grant_revoked_in_the_configuration_no_longer_lets_a_tool_stage(
    revoked: Workbench, private: Path
) -> None:
    assert isinstance(revoked.store, SQLiteStore)
    before = len(revoked.store.staged_writes())
    with pytest.raises(ExecutionError) as refused:
        await revoked.call("writer", {"path": str(private / "secret.txt")})
    assert refused.value.code == "sandbox_violation"
    assert len(revoked.store.staged_writes()) == before


async def test_a_write_staged_before_the_grant_was_revoked_needs_force_to_apply(
    revoked: Workbench, private: Path
) -> None:
    assert isinstance(revoked.store, SQLiteStore)
    (pending,) = staging.list_staged(revoked.store)
    with pytest.raises(SandboxViolation, match="--force"):
        staging.apply_staged(revoked.store, pending.id, grants=revoked.config.sandbox.grants)
    assert (private / "secret.txt").read_text() == "TOP SECRET"


async def test_a_tool_record_that_claims_grants_gets_only_the_configurations(tmp_path: Path, private: Path) -> None:
    # What an import, a hand-edited inventory or a replica sharing the database with other grants can hold.
    config = config_granting(tmp_path, {})
    store = SQLiteStore(config.inventory_path)
    claimed = granted_tool("tool_0123456789abcdef", private).model_copy(update={"name": "smuggled", "code": READER})
    store.add_tool(claimed)
    store.close()
    async with Workbench(config) as workbench:
        with pytest.raises(ExecutionError) as refused:
            await workbench.call("smuggled", {"path": str(private / "secret.txt")})
        assert refused.value.code == "sandbox_violation"
        assert isinstance(workbench.store, SQLiteStore)
        staged_id = workbench.store.stage_write(
            "tool_0123456789abcdef", str(private / "secret.txt"), "x", datetime.now(UTC), call_id="call_1"
        )
        with pytest.raises(SandboxViolation, match="--force"):
            staging.apply_staged(workbench.store, staged_id, grants=workbench.config.sandbox.grants)


async def test_a_grant_added_to_the_configuration_reaches_a_tool_crafted_before(tmp_path: Path, private: Path) -> None:
    async with Workbench(config_granting(tmp_path, {})) as workbench:
        await workbench.craft({"name": "reader", "description": "reads a granted file", "code": READER})
    async with Workbench(config_granting(tmp_path, {"reader": [str(private)]})) as workbench:
        assert (await workbench.call("reader", {"path": str(private / "secret.txt")})).result == "TOP SECRET"
