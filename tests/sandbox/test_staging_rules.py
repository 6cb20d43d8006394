"""Staged writes are no way out: refused outside the tool's granted directories and on the workbench's
own files (through symlinks, `..` and case tricks too), capped in bytes, and checked again at apply."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.config import Config, load_config, with_overrides
from awb.errors import ExecutionError, SandboxViolation
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging
from awb.sandbox.host import HostBridge
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

WRITER = "def run(params):\n    return write_file(params['to'], params.get('data', 'payload'))\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory granted to the tool, holding the workbench's own files (as `awb init` lays them out)."""
    root = tmp_path / "project"
    (root / ".awb").mkdir(parents=True)
    (root / "awb.config.json").write_text("{}")
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    (root / "db-link").symlink_to(root / ".awb" / "inventory.db")
    return root


@pytest.fixture
async def wb(project: Path) -> AsyncIterator[Workbench]:
    config = Config(
        inventory_path=project / ".awb" / "inventory.db",
        pid_file=project / ".awb" / "awb.pid",
        log_file=project / "awb.log",
    )
    config.sandbox.grants = {"writer": [str(project)], "other": [str(project)]}
    config.sandbox.max_staged_bytes_per_tool = 4096
    config.sandbox.max_staged_bytes_total = 6144
    async with Workbench(config) as workbench:
        for name in ("writer", "other"):
            await workbench.craft(
                {"name": name, "description": f"stages writes ({name})", "code": WRITER, "runtime": "cpython"}
            )
        yield workbench


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` with its content (symlinks not followed)."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink() and not name.startswith("inventory.db"):
                files[str(path)] = path.read_bytes()
    return files


def hostile_targets(project: Path) -> list[str]:
    outside = project.parent / "outside"
    return [
        str(outside / "new.txt"),
        "../outside/new.txt",
        "sub/../../outside/new.txt",
        "escape/new.txt",
        str(project / "escape" / "new.txt"),
        "/etc/cron.d/awb",
        str(project / ".awb" / "inventory.db"),
        str(project / ".awb" / "inventory.db-wal"),
        str(project / ".awb" / "inventory.db-shm"),
        ".awb/inventory.db",
        ".AWB/inventory.db",
        "./.awb/../.awb/awb.pid",
        ".awb/anything-new",
        "db-link",
        "awb.config.json",
        "AWB.CONFIG.JSON",
        "nested/awb.config.json",
        "awb.log",
        "AWB.LOG",
    ]


async def test_writes_outside_the_grants_or_onto_awbs_own_files_are_refused_at_staging(
    wb: Workbench, project: Path
) -> None:
    before = snapshot(project.parent)
    for target in hostile_targets(project):
        with pytest.raises(ExecutionError) as refused:
            await wb.call("writer", {"to": target})
        assert refused.value.code == "sandbox_violation", (target, refused.value.to_dict())
    assert isinstance(wb.store, SQLiteStore)
    assert wb.store.staged_writes() == []
    assert snapshot(project.parent) == before
    assert wb.resolve("writer").failure_count == len(hostile_targets(project))


async def test_a_write_inside_the_grants_is_staged(wb: Workbench, project: Path) -> None:
    receipt = (await wb.call("writer", {"to": "notes/today.txt"})).result
    assert receipt["path"] == str(project / "notes" / "today.txt")
    assert not (project / "notes").exists()


async def test_staged_bytes_are_capped_per_tool_and_in_all(wb: Workbench) -> None:
    await wb.call("writer", {"to": "a.txt", "data": "x" * 3000})
    with pytest.raises(ExecutionError) as per_tool:
        await wb.call("writer", {"to": "b.txt", "data": "x" * 2000})
    assert per_tool.value.code == "output_exceeded"
    assert "max_staged_bytes_per_tool" in per_tool.value.message
    await wb.call("other", {"to": "c.txt", "data": "y" * 3000})
    with pytest.raises(ExecutionError) as in_all:
        await wb.call("other", {"to": "d.txt", "data": "y" * 200})
    assert "max_staged_bytes_total" in in_all.value.message
    assert isinstance(wb.store, SQLiteStore)
    assert sorted(Path(w["path"]).name for w in wb.store.staged_writes()) == ["a.txt", "c.txt"]
    # Applying or discarding frees the room again.
    staging.discard_staged(wb.store, wb.store.staged_writes()[0]["id"])
    await wb.call("writer", {"to": "b.txt", "data": "x" * 2000})


def stage_directly(store: SQLiteStore, tool_id: str, path: Path) -> int:
    """A staged row as an older awb (or a hand-edited inventory) may hold it, unchecked."""
    return store.stage_write(tool_id, str(path), "overwritten", datetime.now(UTC), call_id="call_x")


async def test_apply_never_writes_awbs_own_files_even_with_force(wb: Workbench, project: Path) -> None:
    assert isinstance(wb.store, SQLiteStore)
    protected = staging.protected_paths(wb.config, project / "awb.config.json")
    tool_id = wb.resolve("writer").tool_id
    before = snapshot(project)
    for target in (project / "awb.config.json", project / ".awb" / "awb.pid", project / "db-link", project / "AWB.LOG"):
        staged_id = stage_directly(wb.store, tool_id, target)
        for force in (False, True):
            with pytest.raises(SandboxViolation):
                staging.apply_staged(
                    wb.store, staged_id, grants=wb.config.sandbox.grants, protected=protected, force=force
                )
        assert staging.get_staged(wb.store, staged_id).status == "pending"
    assert snapshot(project) == before


async def test_apply_outside_the_grants_needs_force(wb: Workbench, project: Path) -> None:
    assert isinstance(wb.store, SQLiteStore)
    outside = project.parent / "outside" / "forced.txt"
    staged_id = stage_directly(wb.store, wb.resolve("writer").tool_id, outside)
    with pytest.raises(SandboxViolation, match="--force"):
        staging.apply_staged(wb.store, staged_id, grants=wb.config.sandbox.grants)
    assert not outside.exists()
    staging.apply_staged(wb.store, staged_id, grants=wb.config.sandbox.grants, force=True)
    assert outside.read_text() == "overwritten"


async def test_a_symlink_swapped_in_after_staging_is_caught_at_apply(wb: Workbench, project: Path) -> None:
    assert isinstance(wb.store, SQLiteStore)
    receipt = (await wb.call("writer", {"to": "swap/target.txt"})).result
    (project / "swap").symlink_to(project.parent / "outside")
    with pytest.raises(SandboxViolation):
        staging.apply_staged(
            wb.store, receipt["id"], grants=wb.config.sandbox.grants, protected=staging.protected_paths(wb.config)
        )
    assert not (project.parent / "outside" / "target.txt").exists()
    assert staging.get_staged(wb.store, receipt["id"]).status == "pending"


async def test_paths_and_data_that_are_not_valid_text_are_refused(wb: Workbench) -> None:
    host_code = "def run(params):\n    return write_file('bad\\udcff.txt', 'x')\n"
    await wb.craft({"name": "surrogate", "description": "stages a bad path", "code": host_code})
    with pytest.raises(ExecutionError) as refused:
        await wb.call("surrogate", {})
    assert refused.value.code in ("sandbox_violation", "runtime_error")
    assert isinstance(wb.store, SQLiteStore)
    assert wb.store.staged_writes() == []


def test_the_host_bridge_refuses_every_hostile_target_for_every_runtime(project: Path) -> None:
    """Every runtime stages through HostBridge.write_file: the refusal is made there, once."""
    config = Config(
        inventory_path=project / ".awb" / "inventory.db",
        pid_file=project / ".awb" / "awb.pid",
        log_file=project / "awb.log",
    )
    staged: list[str] = []
    host = HostBridge(
        read_dirs=[str(project)],
        stage=lambda path, data: staged.append(path) or len(staged),
        max_log_bytes=1024,
        protected=staging.protected_paths(config),
    )
    for target in hostile_targets(project):
        with pytest.raises(SandboxViolation):
            host.write_file(target, "x")
    assert staged == []


async def test_the_config_file_in_use_is_awbs_own_whatever_its_name(project: Path) -> None:
    """`awb start --config ops/prod.json` in a granted folder: the tool may not stage a write over the file
    the server's config came from (the panel's Apply checks the same list), though it is not named
    awb.config.json; a command-line override keeps it."""
    (project / "ops").mkdir()
    config_file = project / "ops" / "prod.json"
    config_file.write_text(
        '{"inventory_path": "../.awb/inventory.db", "pid_file": "../.awb/awb.pid",'
        f' "sandbox": {{"grants": {{"writer": ["{project}"]}}}}}}'
    )
    config = with_overrides(load_config(config_file, environ={}), port=0)
    assert config.source_file == config_file
    with pytest.raises(SandboxViolation):
        staging.protected_paths(config).refuse(str(config_file))
    async with Workbench(config) as workbench:
        await workbench.craft({"name": "writer", "description": "stages writes", "code": WRITER, "runtime": "cpython"})
        for target in ("ops/prod.json", str(config_file), "ops/../ops/PROD.json"):
            with pytest.raises(ExecutionError) as refused:
                await workbench.call("writer", {"to": target})
            assert refused.value.code == "sandbox_violation", (target, refused.value.to_dict())
        receipt = (await workbench.call("writer", {"to": "ops/other.json"})).result
        assert receipt["path"] == str(project / "ops" / "other.json")
