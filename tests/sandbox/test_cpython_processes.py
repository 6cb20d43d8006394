"""The two processes of a cpython worker: the tool process runs alone in a PID namespace (it can name
no other process, not even its supervisor), is locked down as the host sees it, and its peak memory is
reported per call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_cpython_kernel import assert_locked, seen_from_the_host

from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.workbench import Workbench
from sandbox_support import LIMITS

pytestmark = pytest.mark.anyio

PIDS = """
import errno, os
def run(params):
    seen = {}
    for name, pid in params['pids'].items():
        try:
            os.getpgid(pid)
            seen[name] = 'visible'
        except ProcessLookupError:
            seen[name] = 'no such process'
    return {'pid': os.getpid(), 'ppid': os.getppid(), 'seen': seen}
"""


async def test_the_tool_process_can_name_no_other_process(cpython: CPythonRuntime, host_factory: Any) -> None:
    assert cpython._zygote is not None
    pids = {"server": os.getpid(), "zygote": cpython._zygote.process.pid, "init": 1 if os.getpid() != 1 else 2}
    value = (await cpython.execute(PIDS, {"pids": pids}, LIMITS, host_factory())).value
    assert value["pid"] == 1 and value["ppid"] == 0  # process 1 of its own namespace; its parent is outside
    assert value["seen"] == {"server": "no such process", "zygote": "no such process", "init": "visible"}


def pid_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


async def test_the_tool_process_is_locked_down_in_a_pid_namespace_of_its_own(cpython: CPythonRuntime) -> None:
    with anyio.fail_after(10):
        first, second = await cpython._new_worker(), await cpython._new_worker()
    try:
        views = [seen_from_the_host(w.tool_pid) for w in (first, second)]
        namespaces = [pid_namespace(w.tool_pid) for w in (first, second)]
        supervisors = [pid_namespace(w.pid) for w in (first, second)]
        nspid = Path(f"/proc/{first.tool_pid}/status").read_text().split("NSpid:")[1].split("\n")[0].split()
    finally:
        first.close()
        second.close()
    for view in views:
        assert_locked(view)
    assert namespaces[0] != namespaces[1]  # one namespace per tool process
    assert set(namespaces).isdisjoint({*supervisors, pid_namespace(os.getpid())})
    assert nspid == [str(first.tool_pid), "1"]
    assert cpython.protections()["pid_namespace"] is True


ALLOCATE = "def run(params):\n    data = b'x' * (params['mb'] << 20)\n    return len(data)\n"


async def test_a_call_reports_the_peak_memory_its_tool_process_reached(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    limits = Limits(timeout_ms=5000, memory_mb=100)
    big = await cpython.execute(ALLOCATE, {"mb": 50}, limits, host_factory())
    small = await cpython.execute("def run(params):\n    return 1\n", {}, limits, host_factory())
    assert big.value == 50 << 20 and small.value == 1
    assert big.peak_memory_bytes is not None and small.peak_memory_bytes is not None
    # The figure is above the size at the fork, whose pages the allocation may partly reuse: allow 1 MB.
    assert 49 << 20 < big.peak_memory_bytes < 70 << 20, big.peak_memory_bytes
    assert small.peak_memory_bytes < 8 << 20, small.peak_memory_bytes


async def test_the_call_record_keeps_the_peak_memory_of_a_cpython_call(workbench: Workbench) -> None:
    if "cpython" not in workbench.runtimes:
        pytest.skip("no cpython runtime here")
    await workbench.craft(
        {
            "name": "allocator",
            "description": "Allocate some megabytes and say how many bytes",
            "code": ALLOCATE,
            "runtime": "cpython",
            "input_schema": {"type": "object", "properties": {"mb": {"type": "integer"}}},
            "examples": [{"params": {"mb": 1}, "expected": 1 << 20}],
        }
    )
    await workbench.call("allocator", {"mb": 30})
    [record] = workbench.inspect("allocator").recent_calls
    assert record.peak_memory_bytes is not None and record.peak_memory_bytes > 29 << 20


async def test_large_non_ascii_host_replies_cross_the_supervisor_whole(
    cpython: CPythonRuntime, host_factory: Any, dirs: dict[str, Path]
) -> None:
    text = "字" * 1_250_000 + "😀" * 100_000  # 4.15 MB of UTF-8, 8.7 MB as JSON escapes
    (dirs["granted"] / "wide.txt").write_text(text, encoding="utf-8")
    code = "def run(params):\n    data = read_file('wide.txt')\n    return [len(data), data[-1]]\n"
    value = (await cpython.execute(code, {}, Limits(timeout_ms=10_000, memory_mb=200), host_factory())).value
    assert value == [len(text), "😀"]


DEEP_TREE = """
import os
def run(params):
    fd = os.open(os.environ['TMPDIR'], os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(params['depth']):
        os.mkdir('d', dir_fd=fd)
        inner = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    return params['depth']
"""


async def test_a_tree_deeper_than_the_recursion_limit_left_in_scratch_does_not_end_the_zygote(
    cpython: CPythonRuntime, host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The zygote empties a finished worker's scratch for the next one; a directory chain past Python's
    # recursion limit made that raise, which ended the zygote and every cpython call in flight.
    zygote = cpython._zygote
    assert zygote is not None
    used = []
    checkout = cpython._checkout

    async def remembered() -> Any:
        worker = await checkout()
        used.append(worker)
        return worker

    monkeypatch.setattr(cpython, "_checkout", remembered)
    with anyio.fail_after(20):
        # 3,000 directories take ~0.5 s on a quiet machine; a loaded one (a full suite on two workers) took
        # past the usual 3 s, and this is about the zygote surviving the tree, not about its speed.
        patient = Limits(timeout_ms=15_000, memory_mb=LIMITS.memory_mb)
        assert (await cpython.execute(DEEP_TREE, {"depth": 3000}, patient, host_factory())).value == 3000
        while not (used[0].exited.done() or zygote.dead):  # the zygote has reaped the worker, or died
            await anyio.sleep(0.01)
        assert not zygote.dead
        assert (await cpython.execute("def run(params):\n    return 1\n", {}, LIMITS, host_factory())).value == 1
    assert cpython._zygote is zygote
