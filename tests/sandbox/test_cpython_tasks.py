"""Tasks (threads and processes) a cpython tool can make: each costs the kernel a pid and a kernel
stack that no memory limit of the tool's counts, and the machine's pid space is shared with the server
and everything else on it. One call is stopped past `MAX_TOOL_THREADS`; all workers together never pass
`MAX_SANDBOX_TASKS`, even where the server's watchdog is late or blind."""

from __future__ import annotations

import errno
import platform
import sys
from typing import Any

import anyio
import pytest

from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.cpython import runtime as runtime_module
from awb.sandbox.cpython.lockdown import MAX_SANDBOX_TASKS
from awb.sandbox.cpython.watch import MAX_TOOL_THREADS
from sandbox_support import LIMITS, failure

pytestmark = pytest.mark.anyio

ADD = "def run(params):\n    return params['a'] + params['b']\n"

THREADS = """
import threading
def run(params):
    threading.stack_size(32768)  # the smallest stacks: hundreds fit the address-space limit
    hold = threading.Event()
    started = 0
    try:
        for _ in range(params['n']):
            threading.Thread(target=hold.wait, daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    return started
"""

#: x86_64 machine code, called through ctypes: `clone(CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|
#: CLONE_THREAD|CLONE_SYSVSEM, stack=0)` in a loop, each new thread parked in `pause()` without
#: touching a stack. Threads that cost no address space at all: RLIMIT_AS does not bound them.
CLONES = """
import ctypes, mmap, struct

def machine_code(n):
    loop = (b"\\xB8\\x38\\x00\\x00\\x00" b"\\xBF\\x00\\x0F\\x05\\x00"
            b"\\x31\\xF6\\x31\\xD2\\x45\\x31\\xD2\\x45\\x31\\xC0" b"\\x0F\\x05" b"\\x48\\x85\\xC0")
    body = len(loop) + 9
    return (b"\\x41\\xB9" + struct.pack("<I", n) + loop + b"\\x74\\x0A" b"\\x78\\x11" b"\\x41\\xFF\\xC9"
            + b"\\x75" + struct.pack("b", -body) + b"\\x31\\xC0\\xC3"
            + b"\\xB8\\x22\\x00\\x00\\x00\\x0F\\x05\\xEB\\xF7" + b"\\xC3")

KEPT = []  # the code page outlives run(): a thread scheduled after run() returned still runs it

def run(params):
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    KEPT.append(page)
    page.write(machine_code(params['n']))
    clones = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
    return clones()  # 0 once n threads started, else the first clone's -errno
"""

CEILING = """
import resource
def run(params):
    before = resource.getrlimit(resource.RLIMIT_NPROC)
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        raised = True
    except (ValueError, OSError):
        raised = False
    return {'limit': list(before), 'raised': raised}
"""

x86_64_linux = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"), reason="x86_64 machine code"
)


async def test_a_tool_running_hundreds_of_threads_is_stopped(cpython: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(20):
        error = await failure(cpython, THREADS, {"n": 4 * MAX_TOOL_THREADS}, host_factory())
    assert error.code == "sandbox_violation" and "threads" in error.message, error
    assert error.details["limit"] == MAX_TOOL_THREADS
    with anyio.fail_after(10):
        assert (await cpython.execute(ADD, {"a": 1, "b": 2}, LIMITS, host_factory())).value == 3


async def test_a_tool_with_a_few_threads_runs(cpython: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(20):
        assert (await cpython.execute(THREADS, {"n": 32}, LIMITS, host_factory())).value == 32


async def test_the_task_ceiling_is_set_and_cannot_be_raised(cpython: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(10):
        value = (await cpython.execute(CEILING, {}, LIMITS, host_factory())).value
    assert value == {"limit": [MAX_SANDBOX_TASKS, MAX_SANDBOX_TASKS], "raised": False}


@x86_64_linux
async def test_raw_clones_stop_at_the_task_ceiling_when_the_watchdog_is_blind(
    monkeypatch: pytest.MonkeyPatch, host_factory: Any
) -> None:
    async def blind_watchdog(*args: Any) -> None:
        return None

    monkeypatch.setattr(runtime_module, "watch_rss", blind_watchdog)
    monkeypatch.setattr(runtime_module, "over_thread_cap", lambda *args: False)
    cpython = CPythonRuntime(pool_size=1)
    try:
        # Kernel stacks are charged to a memory cgroup where there is one: room for the ceiling's.
        limits = Limits(timeout_ms=10_000, memory_mb=1024)
        with anyio.fail_after(30):
            value = (await cpython.execute(CLONES, {"n": MAX_SANDBOX_TASKS + 1000}, limits, host_factory())).value
        assert value == -errno.EAGAIN
        with anyio.fail_after(10):
            assert (await cpython.execute(ADD, {"a": 1, "b": 1}, LIMITS, host_factory())).value == 2
    finally:
        await cpython.close()


@x86_64_linux
async def test_raw_clones_are_stopped_by_the_watchdog(cpython: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(20):
        error = await failure(
            cpython, CLONES, {"n": MAX_SANDBOX_TASKS}, host_factory(), Limits(timeout_ms=5000, memory_mb=1024)
        )
    assert error.code == "sandbox_violation" and "threads" in error.message, error
