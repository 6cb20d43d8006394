"""`awb doctor`'s sandbox protection rows: one per class, from what the workers applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.cpython.cgroups import own_memory_cgroup
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.report import protection_checks
from sandbox_support import LIMITS
from support import awb_env

pytestmark = pytest.mark.anyio

CLASSES = ["filesystem", "identity", "ipc", "memory", "network", "processes", "syscalls"]


async def test_every_protection_class_is_active_here(
    cpython: CPythonRuntime, javascript: JavaScriptRuntime, host_factory: Any
) -> None:
    await cpython.execute("def run(params):\n    return 1\n", {}, LIMITS, host_factory())
    rows = protection_checks({"cpython": cpython, "javascript": javascript})
    by_name = {row["check"]: row for row in rows}
    assert sorted(n.split(":")[2] for n in by_name if n.startswith("sandbox:cpython:")) == CLASSES
    assert sorted(n.split(":")[2] for n in by_name if n.startswith("sandbox:javascript:")) == [
        "identity",
        "ipc",
        "network",
        "syscalls",
    ]
    assert all(row["ok"] and "missing" not in row["detail"] for row in rows), rows
    identity = by_name["sandbox:cpython:identity"]["detail"]
    if os.geteuid() == 0:  # the server's own worker uid, which both runtimes share
        assert cpython.identity.ids is not None
        assert f"uid/gid {cpython.identity.ids[0]}, this server's own" in identity
        assert "65534" not in identity
    assert "not dumpable" in identity
    assert "allowlist" in by_name["sandbox:cpython:syscalls"]["detail"]
    assert "PID namespace" in by_name["sandbox:cpython:processes"]["detail"]
    assert "supervisor alone holds the server's channel" in by_name["sandbox:cpython:processes"]["detail"]
    cgroups = os.geteuid() == 0 and own_memory_cgroup() is not None
    assert ("a memory cgroup per worker" in by_name["sandbox:cpython:memory"]["detail"]) is cgroups


async def test_a_missing_protection_fails_its_row_only_when_the_runtime_would_still_run(host_factory: Any) -> None:
    for degraded in (False, True):
        runtime = CPythonRuntime(pool_size=1, network_namespace=False, allow_degraded=degraded)
        try:
            await runtime.start()
            network = {row["check"]: row for row in protection_checks({"cpython": runtime})}["sandbox:cpython:network"]
            assert "missing: network_namespace" in network["detail"]
            assert network["ok"] is (not degraded)
        finally:
            await runtime.close()


def test_awb_doctor_lists_the_protection_rows(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "awb", "doctor", "--json"],
        env=awb_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(result.stdout)
    rows = {c["check"]: c for c in report["checks"] if c["check"].startswith("sandbox:cpython:")}
    assert sorted(name.split(":")[2] for name in rows) == CLASSES
    assert all(row["ok"] for row in rows.values()), rows
