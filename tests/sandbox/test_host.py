"""Host functions: reads confined to granted directories, writes only staged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from awb.errors import OutputExceeded, SandboxViolation
from awb.sandbox.host import HostBridge
from sandbox_support import Staged


def test_read_inside_a_granted_dir_by_relative_and_absolute_path(host_factory: Any, dirs: dict[str, Path]) -> None:
    host = host_factory()
    assert host.read_file("data.txt") == "hello from a granted dir"
    assert host.read_file(str(dirs["granted"] / "data.txt")) == "hello from a granted dir"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link.txt", "/etc/passwd", "", "a\x00b", "."])
def test_read_escaping_the_granted_dir_is_refused(host_factory: Any, path: str) -> None:
    with pytest.raises(SandboxViolation):
        host_factory().read_file(path)


def test_read_of_a_fifo_is_refused_without_blocking(host_factory: Any, dirs: dict[str, Path]) -> None:
    os.mkfifo(dirs["granted"] / "pipe")
    with pytest.raises(SandboxViolation, match="regular file"):
        host_factory().read_file("pipe")


def test_read_without_grants_is_refused(host_factory: Any) -> None:
    with pytest.raises(SandboxViolation, match="no granted"):
        host_factory(grant=False).read_file("data.txt")


def test_write_is_staged_with_an_absolute_path(host_factory: Any, staged: Staged, dirs: dict[str, Path]) -> None:
    receipt = host_factory().write_file("sub/../new.txt", "data")
    assert receipt == {"staged": True, "id": 1, "path": str(dirs["granted"] / "new.txt")}
    assert staged.writes == [(str(dirs["granted"] / "new.txt"), "data")]
    assert not (dirs["granted"] / "new.txt").exists()


def test_relative_write_without_a_granted_dir_is_refused(host_factory: Any) -> None:
    with pytest.raises(SandboxViolation, match="absolute"):
        host_factory(grant=False).write_file("new.txt", "data")


def test_oversized_or_too_many_writes_are_refused(host_factory: Any) -> None:
    host = host_factory()
    with pytest.raises(OutputExceeded):
        host.write_file("big", "x" * (4 * 1024 * 1024 + 1))
    for i in range(100):
        host.write_file(f"f{i}", "x")
    with pytest.raises(OutputExceeded, match="at most"):
        host.write_file("one-more", "x")


def test_log_is_capped() -> None:
    host = HostBridge(read_dirs=[], stage=None, max_log_bytes=10)
    host.log("12345")
    with pytest.raises(OutputExceeded):
        host.log("123456")
    assert host.logs == ["12345"]


@pytest.mark.parametrize("path", [".", "", "GRANT", "sub"])
def test_a_write_to_a_directory_is_refused_when_staged_not_when_applied(
    host_factory: Any, staged: Staged, dirs: dict[str, Path], path: str
) -> None:
    (dirs["granted"] / "sub").mkdir()
    target = str(dirs["granted"]) if path == "GRANT" else path
    with pytest.raises(SandboxViolation, match=r"needs a file path|non-empty string"):
        host_factory().write_file(target, "data")
    assert staged.writes == []


def test_an_overlong_path_is_refused_for_its_length(host_factory: Any) -> None:
    with pytest.raises(SandboxViolation, match="4096 characters at most"):
        host_factory().write_file("a" * 5000, "data")
    with pytest.raises(SandboxViolation, match="4096 characters at most"):
        host_factory().read_file("a" * 5000)


def test_reads_and_writes_past_the_calls_budget_exhaust_the_host_for_good(
    host_factory: Any, dirs: dict[str, Path], staged: Staged, monkeypatch: pytest.MonkeyPatch
) -> None:
    import awb.sandbox.host as host_module

    monkeypatch.setattr(host_module, "MAX_HOST_BYTES_PER_CALL", 100)
    (dirs["granted"] / "forty.txt").write_text("x" * 40)
    host = host_factory()
    host.read_file("forty.txt")
    with pytest.raises(SandboxViolation):  # refused writes count: they cost the server as much
        host.write_file("/etc/passwd", "y" * 40)
    assert host.exhausted is None
    with pytest.raises(OutputExceeded, match="moved more than 100 bytes") as info:
        host.read_file("forty.txt")
    assert host.exhausted is info.value and info.value.details["reason"] == "host_bytes"
    for later in (lambda: host.read_file("data.txt"), lambda: host.write_file("w.txt", "z"), lambda: host.log("hi")):
        with pytest.raises(OutputExceeded):
            later()
    assert staged.writes == []
    with pytest.raises(OutputExceeded):
        host_module.end_if_exhausted(host)
    host_module.end_if_exhausted(host_factory())  # a fresh call's host has its whole budget


def test_host_calls_past_the_calls_count_exhaust_the_host(host_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import awb.sandbox.host as host_module

    monkeypatch.setattr(host_module, "MAX_HOST_CALLS_PER_CALL", 3)
    host = host_factory()
    host.log("")
    host.read_file("data.txt")
    with pytest.raises(SandboxViolation):  # refused calls count too
        host.read_file("nope.txt")
    with pytest.raises(OutputExceeded, match="more than 3 host function calls") as info:
        host.log("")
    assert host.exhausted is info.value and info.value.details["reason"] == "host_calls"
    with pytest.raises(OutputExceeded):
        host.read_file("data.txt")
