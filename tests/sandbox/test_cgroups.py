"""Per-worker memory cgroups against a fake cgroup filesystem (a directory tree whose `mkdir` adds the
interface files the kernel would, and whose `rmdir` refuses a group that still has processes), so the
file-writing logic of both versions runs here, where the machine only has cgroup v1. What the fake
cannot show: the kernel's own rules (controller delegation, no processes in inner v2 groups, memory
accounting and OOM kills), which only a real v2 machine exercises."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from awb.sandbox.base import Limits
from awb.sandbox.cpython.cgroups import (
    INITIAL_LIMIT_BYTES,
    MemoryCgroups,
    oom_killed_at,
    open_memory_cgroups,
    own_memory_cgroup,
)
from awb.sandbox.cpython.watch import CGROUP_HEADROOM_BYTES, set_cgroup_limit

#: The interface files a new group gets, per version, when the memory controller is delegated to it.
V1_FILES = ("cgroup.procs", "memory.limit_in_bytes", "memory.oom_control")
V2_FILES = ("cgroup.procs", "cgroup.controllers", "cgroup.subtree_control", "memory.max", "memory.events")
V2_SWAP = "memory.swap.max"


class FakeCgroupFs:
    """Makes `os.mkdir`/`os.rmdir` under `root` behave like a cgroup filesystem (files start empty,
    so what the code writes is exactly what a test reads back)."""

    def __init__(self, root: Path, version: int, *, memory: bool = True, swap: bool = True) -> None:
        self.root = root
        self.version = version
        self.files = (V1_FILES if version == 1 else V2_FILES) if memory else ("cgroup.procs",)
        if version == 2 and memory and swap:
            self.files = (*self.files, V2_SWAP)
        self._mkdir, self._rmdir = os.mkdir, os.rmdir

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(os, "mkdir", self.mkdir)
        monkeypatch.setattr(os, "rmdir", self.rmdir)

    def group(self, path: Path) -> Path:
        """A group that exists already (ours, made by whoever started the server)."""
        path.mkdir(parents=True)
        self._populate(path)
        return path

    def mkdir(self, path: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        self._mkdir(path, mode, dir_fd=dir_fd)
        full = self._resolve(path, dir_fd)
        if full.is_relative_to(self.root):
            self._populate(full)

    def rmdir(self, path: str, *, dir_fd: int | None = None) -> None:
        full = self._resolve(path, dir_fd)
        if not full.is_relative_to(self.root):
            self._rmdir(path, dir_fd=dir_fd)
            return
        if any(p.is_dir() for p in full.iterdir()) or (full / "cgroup.procs").read_text().strip():
            raise OSError(errno.EBUSY, "the group has children or processes", str(full))
        for name in self.files:
            (full / name).unlink(missing_ok=True)
        self._rmdir(full)

    def _populate(self, directory: Path) -> None:
        for name in self.files:
            (directory / name).write_text("")

    @staticmethod
    def _resolve(path: str, dir_fd: int | None) -> Path:
        base = Path(os.readlink(f"/proc/self/fd/{dir_fd}")) if dir_fd is not None else Path.cwd()
        return base / path


@pytest.fixture
def fake_v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCgroupFs, Path, Path]:
    """(fake filesystem, cgroup root, our /proc/self/cgroup) for a v2 machine where the server runs in
    /awb.slice with the memory controller delegated."""
    root = tmp_path / "cgroup"
    fs = FakeCgroupFs(root, 2)
    fs.group(root)
    fs.group(root / "awb.slice")
    self_cgroup = tmp_path / "self_cgroup"
    self_cgroup.write_text("0::/awb.slice\n")
    fs.install(monkeypatch)
    return fs, root, self_cgroup


def test_v2_finds_its_own_group_from_the_unified_line(fake_v2: tuple[FakeCgroupFs, Path, Path]) -> None:
    _, root, self_cgroup = fake_v2
    assert own_memory_cgroup(str(root), str(self_cgroup)) == (str(root / "awb.slice"), 2)
    (root / "cgroup.controllers").unlink()  # not a v2 mount after all
    assert own_memory_cgroup(str(root), str(self_cgroup)) is None


def test_v2_groups_enable_the_memory_controller_and_carry_each_workers_limit(
    fake_v2: tuple[FakeCgroupFs, Path, Path],
) -> None:
    _, root, self_cgroup = fake_v2
    groups = open_memory_cgroups(str(root), str(self_cgroup))
    assert isinstance(groups, MemoryCgroups) and groups.version == 2 and groups.limit_file == "memory.max"
    base = root / "awb.slice" / f"awb-{os.getpid()}"
    try:
        assert (base / "cgroup.subtree_control").read_text() == "+memory"
        assert not (base / "probe").exists()  # the end-to-end probe came and went
        path = groups.create("w1")
        assert path == str(base / "w1")
        assert (base / "w1" / "memory.max").read_text() == str(INITIAL_LIMIT_BYTES)
        assert (base / "w1" / "memory.swap.max").read_text() == "0"  # no swapping around the limit
        groups.join("w1")
        assert (base / "w1" / "cgroup.procs").read_text() == str(os.getpid())
        set_cgroup_limit(os.path.join(path, groups.limit_file), Limits(memory_mb=20))
        assert (base / "w1" / "memory.max").read_text() == str((20 << 20) + CGROUP_HEADROOM_BYTES)
        assert not groups.oom_killed("w1") and not oom_killed_at(os.path.join(path, "memory.max"))
        (base / "w1" / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n")
        assert groups.oom_killed("w1") and oom_killed_at(os.path.join(path, "memory.max"))
        assert groups.remove("w1") is False  # a process is still in it: the kernel refuses
        assert (base / "w1").is_dir()
        (base / "w1" / "cgroup.procs").write_text("")
        assert groups.remove("w1") is True
        assert not (base / "w1").exists()
        assert groups.remove("w1") is True  # already gone
    finally:
        groups.close()
    assert not base.exists()


def test_v2_without_swap_accounting_still_makes_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cgroup"
    fs = FakeCgroupFs(root, 2, swap=False)
    fs.group(root)
    fs.group(root / "s")
    (tmp_path / "self").write_text("0::/s\n")
    fs.install(monkeypatch)
    groups = open_memory_cgroups(str(root), str(tmp_path / "self"))
    assert groups is not None
    try:
        assert Path(groups.create("w1"), "memory.max").read_text() == str(INITIAL_LIMIT_BYTES)
        groups.remove("w1")
    finally:
        groups.close()


def test_v2_without_the_memory_controller_delegated_gives_no_groups_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cgroup"
    fs = FakeCgroupFs(root, 2, memory=False)
    fs.group(root)
    fs.group(root / "s")
    (root / "cgroup.controllers").write_text("")  # a v2 mount, with no memory controller for us
    (tmp_path / "self").write_text("0::/s\n")
    fs.install(monkeypatch)
    assert open_memory_cgroups(str(root), str(tmp_path / "self")) is None
    assert [p.name for p in (root / "s").iterdir() if p.is_dir()] == []


def test_v1_groups_carry_each_workers_limit_and_report_oom_kills(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cgroup"
    fs = FakeCgroupFs(root, 1)
    fs.group(root / "memory" / "awb.slice")
    self_cgroup = tmp_path / "self_cgroup"
    self_cgroup.write_text("12:pids:/awb.slice\n4:memory:/awb.slice\n0::/awb.slice\n")
    fs.install(monkeypatch)
    assert own_memory_cgroup(str(root), str(self_cgroup)) == (str(root / "memory" / "awb.slice"), 1)
    groups = open_memory_cgroups(str(root), str(self_cgroup))
    assert groups is not None and groups.limit_file == "memory.limit_in_bytes"
    try:
        path = groups.create("w1")
        limit = os.path.join(path, groups.limit_file)
        assert Path(limit).read_text() == str(INITIAL_LIMIT_BYTES)
        set_cgroup_limit(limit, Limits(memory_mb=7))
        assert Path(limit).read_text() == str((7 << 20) + CGROUP_HEADROOM_BYTES)
        assert not oom_killed_at(limit)
        Path(path, "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
        assert groups.oom_killed("w1") and oom_killed_at(limit)
        groups.remove("w1")
        assert not Path(path).exists()
    finally:
        groups.close()
