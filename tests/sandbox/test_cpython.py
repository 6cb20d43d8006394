"""The cpython runtime: the tool contract, host functions, and the hostile-tool suite."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.errors import Busy, Unavailable
from awb.sandbox.base import Limits
from awb.sandbox.cpython import CPythonRuntime, handles
from sandbox_support import LIMITS, SECRET, SHORT, Staged, failure

pytestmark = pytest.mark.anyio

ADD = "def run(params):\n    return params['a'] + params['b']\n"


async def assert_still_serves(runtime: CPythonRuntime, host_factory: Any) -> None:
    with anyio.fail_after(10):
        result = await runtime.execute(ADD, {"a": 2, "b": 3}, LIMITS, host_factory())
    assert result.value == 5


async def test_tool_using_full_cpython_returns_its_value(cpython: CPythonRuntime, host_factory: Any) -> None:
    code = (
        "import csv, io, statistics, textwrap\n"
        "def gen(n):\n    yield from range(n)\n"
        "def run(params):\n"
        "    rows = list(csv.reader(io.StringIO(params['csv'])))\n"
        "    return {'mean': statistics.mean(int(r[1]) for r in rows), 'n': sum(gen(4)),\n"
        "            'wrapped': textwrap.wrap('a b c', 3)}\n"
    )
    result = await cpython.execute(code, {"csv": "a,1\nb,3\n"}, LIMITS, host_factory())
    assert result.value == {"mean": 2, "n": 6, "wrapped": ["a b", "c"]}


async def test_prints_and_log_calls_come_back_as_logs(cpython: CPythonRuntime, host_factory: Any) -> None:
    host = host_factory()
    result = await cpython.execute(
        "def run(params):\n    print('printed')\n    log('logged')\n    return 1\n", {}, LIMITS, host
    )
    assert result.logs == ["printed\n"]
    assert host.logs == ["logged"]


async def test_read_file_host_function_reads_inside_a_granted_dir(cpython: CPythonRuntime, host_factory: Any) -> None:
    result = await cpython.execute("def run(params):\n    return read_file('data.txt')\n", {}, LIMITS, host_factory())
    assert result.value == "hello from a granted dir"


async def test_tool_opens_a_granted_file_directly_and_writes_its_scratch_dir(
    cpython: CPythonRuntime, host_factory: Any, dirs: dict[str, Path]
) -> None:
    code = (
        "import os\n"
        "def run(params):\n"
        "    open('out.txt', 'w').write('x')\n"
        "    return [open(params['path']).read(), open('out.txt').read()]\n"
    )
    result = await cpython.execute(code, {"path": str(dirs["granted"] / "data.txt")}, LIMITS, host_factory())
    assert result.value == ["hello from a granted dir", "x"]


async def test_write_file_stages_instead_of_writing(
    cpython: CPythonRuntime, host_factory: Any, staged: Staged, dirs: dict[str, Path]
) -> None:
    target = dirs["granted"] / "new.txt"
    code = "def run(params):\n    return write_file(params['path'], 'content')\n"
    result = await cpython.execute(code, {"path": str(target)}, LIMITS, host_factory())
    assert result.value == {"staged": True, "id": 1, "path": str(target)}
    assert staged.writes == [(str(target), "content")]
    assert not target.exists()


async def test_check_refuses_code_without_run(cpython: CPythonRuntime) -> None:
    with pytest.raises(Exception) as info:
        await cpython.check("x = 1\n", LIMITS)
    assert getattr(info.value, "code", None) == "runtime_error"


async def test_tool_exception_is_a_runtime_error_with_the_tools_traceback(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    error = await failure(cpython, "def run(params):\n    return 1 / 0\n", {}, host_factory())
    assert error.code == "runtime_error"
    assert error.details["exception"] == "ZeroDivisionError"
    assert error.details["traceback"][0] == "line 2, in run: return 1 / 0"


HOSTILE: list[tuple[str, str, set[str]]] = [
    ("read_etc_passwd", "def run(params):\n    return open('/etc/passwd').read()\n", {"sandbox_violation"}),
    (
        "read_server_environ",
        "def run(params):\n    return open(f\"/proc/{params['pid']}/environ\").read()\n",
        {"sandbox_violation"},
    ),
    (
        "write_outside_scratch",
        "def run(params):\n    open(params['escape'], 'w').write('pwned')\n",
        {"sandbox_violation"},
    ),
    (
        "os_system",
        "import os\ndef run(params):\n    return os.system('touch ' + params['escape'])\n",
        {"sandbox_violation"},
    ),
    (
        "subprocess",
        "import subprocess\ndef run(params):\n    return subprocess.run(['id'], capture_output=True).stdout.decode()\n",
        {"sandbox_violation"},
    ),
    ("exec", "import os\ndef run(params):\n    os.execv('/bin/sh', ['sh', '-c', 'id'])\n", {"sandbox_violation"}),
    ("fork_bomb", "import os\ndef run(params):\n    while True:\n        os.fork()\n", {"sandbox_violation"}),
    ("allocate_1gb", "def run(params):\n    return len(bytearray(1 << 30))\n", {"memory_exceeded"}),
    (
        "grow_slowly_past_the_limit",
        "def run(params):\n    chunks = []\n    while True:\n        chunks.append(bytearray(1 << 20))\n",
        {"memory_exceeded"},
    ),
    ("infinite_loop", "def run(params):\n    while True:\n        pass\n", {"timeout"}),
    (
        "print_100mb",
        "def run(params):\n    for _ in range(100):\n        print('x' * 1_000_000)\n",
        {"output_exceeded"},
    ),
    ("return_100mb", "def run(params):\n    return 'x' * 100_000_000\n", {"output_exceeded", "memory_exceeded"}),
    (
        "signal_the_server",
        "import os, signal\ndef run(params):\n    os.kill(params['pid'], signal.SIGTERM)\n",
        {"sandbox_violation"},
    ),
    (
        "signal_the_zygote",
        "import os, signal\ndef run(params):\n    os.kill(os.getppid(), signal.SIGKILL)\n",
        {"sandbox_violation"},
    ),
    (
        "ctypes_raw_fork_syscall",
        "import ctypes\ndef run(params):\n    return ctypes.CDLL(None).syscall(57)\n",
        {"sandbox_violation"},
    ),
    (
        "ctypes_raw_socket_syscall",
        "import ctypes\ndef run(params):\n    return ctypes.CDLL(None).socket(2, 1, 0)\n",
        {"sandbox_violation"},
    ),
    ("read_through_dotdot", "def run(params):\n    return read_file('../outside/secret.txt')\n", {"sandbox_violation"}),
    ("read_through_symlink", "def run(params):\n    return read_file('link.txt')\n", {"sandbox_violation"}),
    (
        "open_through_symlink",
        "def run(params):\n    return open(params['granted'] + '/link.txt').read()\n",
        {"sandbox_violation"},
    ),
    (
        "raise_own_rlimits",
        "import resource\ndef run(params):\n    resource.setrlimit(resource.RLIMIT_AS, (-1, -1))\n",
        {"runtime_error"},
    ),
]


@pytest.mark.parametrize(("name", "code", "codes"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_tool_ends_in_a_structured_error_and_the_next_call_succeeds(
    cpython: CPythonRuntime, host_factory: Any, dirs: dict[str, Path], name: str, code: str, codes: set[str]
) -> None:
    escape = dirs["root"] / f"escape-{name}.txt"
    params = {"pid": os.getpid(), "escape": str(escape), "granted": str(dirs["granted"])}
    limits = SHORT if name == "infinite_loop" else LIMITS
    with anyio.fail_after(20):
        error = await failure(cpython, code, params, host_factory(), limits)
    assert error.code in codes, error
    assert not escape.exists()
    await assert_still_serves(cpython, host_factory)


async def test_connect_to_a_loopback_port_reaches_nothing(cpython: CPythonRuntime, host_factory: Any) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "def run(params):\n"
            "    s = socket.create_connection(('127.0.0.1', params['port']), timeout=1)\n"
            "    s.sendall(b'leak')\n"
        )
        error = await failure(cpython, code, {"port": port}, host_factory())
        assert error.code == "sandbox_violation"
        with pytest.raises(BlockingIOError):
            listener.accept()
    await assert_still_serves(cpython, host_factory)


async def test_twenty_hostile_calls_in_parallel_leave_normal_calls_working(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    hostile = [HOSTILE[i % len(HOSTILE)] for i in range(20)]
    params = {"pid": os.getpid(), "escape": "/nonexistent/escape", "granted": "/nonexistent"}

    async def attack(code: str) -> str:
        try:
            await cpython.execute(code, params, SHORT, host_factory())
        except Exception as exc:  # every hostile run must fail, whatever the reason
            return type(exc).__name__
        return "succeeded"

    async def normal(i: int) -> Any:
        return (await cpython.execute(ADD, {"a": i, "b": 1}, LIMITS, host_factory())).value

    with anyio.fail_after(60):
        results = await asyncio.gather(*(attack(code) for _, code, _ in hostile), *(normal(i) for i in range(10)))
    assert "succeeded" not in results[:20]
    assert results[20:] == [i + 1 for i in range(10)]


async def test_runtime_past_its_concurrency_cap_answers_busy(host_factory: Any) -> None:
    runtime = CPythonRuntime(pool_size=1, max_concurrent=1)
    try:
        slow = asyncio.ensure_future(
            runtime.execute("def run(params):\n    while True: pass\n", {}, SHORT, host_factory())
        )
        with anyio.fail_after(10):
            while runtime._slots.active == 0:
                await asyncio.sleep(0.01)
            with pytest.raises(Busy):
                await runtime.execute(ADD, {"a": 1, "b": 1}, LIMITS, host_factory())
            with pytest.raises(Exception, match="ran past"):
                await slow
    finally:
        await runtime.close()


async def test_protections_report_every_layer_active_on_this_kernel(cpython: CPythonRuntime) -> None:
    from awb.sandbox.cpython import lockdown

    layers = cpython.protections()
    assert layers["landlock"] is (lockdown.landlock_abi() >= 1)
    assert layers["seccomp"] is lockdown.seccomp_available()
    assert layers["rlimits"] and layers["no_new_privs"] and layers["capabilities_dropped"]


async def test_missing_layer_is_refused_with_the_reason_unless_degraded_is_allowed(host_factory: Any) -> None:
    strict = CPythonRuntime(pool_size=1, network_namespace=False)
    try:
        with pytest.raises(Unavailable, match="network_namespace"):
            await strict.execute(ADD, {"a": 1, "b": 1}, LIMITS, host_factory())
        assert strict.protections()["network_namespace"] is False
    finally:
        await strict.close()
    degraded = CPythonRuntime(pool_size=1, network_namespace=False, allow_degraded=True)
    try:
        assert (await degraded.execute(ADD, {"a": 1, "b": 1}, LIMITS, host_factory())).value == 2
    finally:
        await degraded.close()


async def test_server_secret_environment_is_not_visible_to_the_tool(
    cpython: CPythonRuntime, host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = await cpython.execute(
        "import os\ndef run(params):\n    return dict(os.environ)\n", {}, LIMITS, host_factory()
    )
    assert SECRET not in repr(result.value)
    assert set(result.value) <= {"TMPDIR", "HOME", "LANG"}


async def test_small_memory_limit_is_enforced(cpython: CPythonRuntime, host_factory: Any) -> None:
    limits = Limits(timeout_ms=3000, memory_mb=20)
    code = "def run(params):\n    return len(bytearray(40 * 1024 * 1024))\n"
    error = await failure(cpython, code, {}, host_factory(), limits)
    assert error.code == "memory_exceeded"


async def test_a_burst_between_two_watchdog_polls_still_counts(
    cpython: CPythonRuntime, host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watchdog polls resident memory; a tool that allocates past its limit, frees it and returns
    # before the next poll is caught by the kernel's high-water mark when its result arrives. With the
    # poll pushed out of reach, only that check can see the burst.
    monkeypatch.setattr("awb.sandbox.cpython.watch.RSS_POLL_S", 60.0)
    limits = Limits(timeout_ms=3000, memory_mb=20)
    code = "def run(params):\n    block = bytearray(40 * 1024 * 1024)\n    del block\n    return 1\n"
    error = await failure(cpython, code, {}, host_factory(), limits)
    assert error.code == "memory_exceeded"
    # A tool within its limit still returns, with its peak recorded under the limit.
    within = await cpython.execute(
        "def run(params):\n    return len(bytearray(5 * 1024 * 1024))\n", {}, limits, host_factory()
    )
    assert within.value == 5 * 1024 * 1024


PRELOADED = "import sys\ndef run(params):\n    return sorted(m for m in ('decimal', 'difflib', 'statistics') if m in sys.modules)\n"


async def test_the_zygote_imports_common_modules_for_its_workers_unless_started_for_one_probe(
    cpython: CPythonRuntime, host_factory: Any
) -> None:
    """`awb doctor` runs one probe in a zygote of its own: importing the modules tools commonly need is
    ~15 ms of that zygote's start, on the path of every doctor run, for a worker that imports nothing."""
    with anyio.fail_after(30):
        assert (await cpython.execute(PRELOADED, {}, LIMITS, host_factory())).value == [
            "decimal",
            "difflib",
            "statistics",
        ]
        probing = CPythonRuntime(pool_size=1, preload=False)
        try:
            assert (await probing.execute(PRELOADED, {}, LIMITS, host_factory())).value == []
        finally:
            await probing.close()


async def test_a_zygote_launched_ahead_runs_the_first_call_and_ends_when_its_runtime_closes(
    host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`awb doctor` starts the zygote's interpreter before it has loaded its config: the runtime configures
    that process rather than starting another."""
    launched = handles.launch_zygote(sys.executable)

    def no_second_zygote(python: str) -> handles.LaunchedZygote:
        raise AssertionError("the runtime started a zygote of its own")

    monkeypatch.setattr(handles, "launch_zygote", no_second_zygote)
    runtime = CPythonRuntime(pool_size=0, preload=False, launched=launched)
    try:
        with anyio.fail_after(30):
            assert (await runtime.execute(ADD, {"a": 2, "b": 3}, LIMITS, host_factory())).value == 5
            assert launched.process.poll() is None
    finally:
        await runtime.close()
    assert launched.process.returncode is not None


async def test_a_runtime_closed_before_it_started_ends_the_zygote_launched_for_it() -> None:
    launched = handles.launch_zygote(sys.executable)
    await CPythonRuntime(launched=launched).close()
    assert launched.process.returncode is not None
