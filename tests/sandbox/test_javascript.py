"""The javascript runtime: QuickJS in worker processes, host functions, and hostile tools."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.sandbox import javascript, javascript_worker
from awb.sandbox.host import HostBridge
from awb.sandbox.javascript import JavaScriptRuntime
from awb.text import MAX_RESULT_DEPTH, nesting_depth
from sandbox_support import LIMITS, SHORT, Staged, failure

pytestmark = pytest.mark.anyio

ADD = "function run(params) { return params.a + params.b; }"


async def assert_still_serves(runtime: JavaScriptRuntime, host_factory: Any) -> None:
    with anyio.fail_after(10):
        assert (await runtime.execute(ADD, {"a": 2, "b": 3}, LIMITS, host_factory())).value == 5


async def test_run_returns_a_json_value_and_console_output_is_logged(
    javascript: JavaScriptRuntime, host_factory: Any
) -> None:
    host = host_factory()
    code = (
        "function run(p) { console.log('seen', p.n); log('logged'); return {double: p.n * 2, list: [1, 'a', null]}; }"
    )
    result = await javascript.execute(code, {"n": 21}, LIMITS, host)
    assert result.value == {"double": 42, "list": [1, "a", None]}
    assert result.logs == ["seen 21\n"]
    assert host.logs == ["logged"]


async def test_host_functions_read_granted_files_and_stage_writes(
    javascript: JavaScriptRuntime, host_factory: Any, staged: Staged, dirs: dict[str, Path]
) -> None:
    target = str(dirs["granted"] / "out.txt")
    code = "function run(p) { const text = readFile('data.txt'); return writeFile(p.target, text.toUpperCase()); }"
    result = await javascript.execute(code, {"target": target}, LIMITS, host_factory())
    assert result.value["staged"] is True
    assert staged.writes == [(target, "HELLO FROM A GRANTED DIR")]
    assert not Path(target).exists()


async def test_a_refused_host_call_can_be_caught_by_the_tool(javascript: JavaScriptRuntime, host_factory: Any) -> None:
    code = "function run(p) { try { read_file('/etc/passwd'); } catch (e) { return 'refused'; } }"
    assert (await javascript.execute(code, {}, LIMITS, host_factory())).value == "refused"


async def test_check_refuses_code_without_run(javascript: JavaScriptRuntime) -> None:
    with pytest.raises(Exception, match="does not define"):
        await javascript.check("const x = 1;", LIMITS)


HOSTILE: list[tuple[str, str, set[str]]] = [
    ("read_etc_passwd", "function run(p) { return readFile('/etc/passwd'); }", {"sandbox_violation"}),
    (
        "read_server_environ",
        "function run(p) { return readFile('/proc/' + p.pid + '/environ'); }",
        {"sandbox_violation"},
    ),
    ("read_through_dotdot", "function run(p) { return readFile('../outside/secret.txt'); }", {"sandbox_violation"}),
    ("read_through_symlink", "function run(p) { return readFile('link.txt'); }", {"sandbox_violation"}),
    ("node_apis_are_absent", "function run(p) { return require('child_process').execSync('id'); }", {"runtime_error"}),
    ("infinite_loop", "function run(p) { for (;;) {} }", {"timeout"}),
    ("allocate_1gb", "function run(p) { const a = []; for (;;) a.push(new Array(1e6).fill(1)); }", {"memory_exceeded"}),
    (
        "big_buffer",
        "function run(p) { return new ArrayBuffer(1 << 30).byteLength; }",
        {"memory_exceeded", "runtime_error"},
    ),
    (
        "print_100mb",
        "function run(p) { for (let i = 0; i < 100; i++) console.log('x'.repeat(1e6)); }",
        {"output_exceeded"},
    ),
    ("return_5mb", "function run(p) { return 'x'.repeat(5e6); }", {"output_exceeded"}),
    ("deep_recursion", "function run(p) { function f() { return f() + 1; } return f(); }", {"runtime_error"}),
    (
        "return_deeply_nested",
        "function run(p) { let a = []; for (let i = 0; i < 2e5; i++) a = [a]; return a; }",
        {"output_exceeded"},
    ),
    ("return_itself", "function run(p) { const a = {b: [1]}; a.b.push(a); return a; }", {"runtime_error"}),
    (
        "to_json_deeply_nested",
        "function run(p) { return {toJSON() { let a = 1; for (let i = 0; i < 2e5; i++) a = [a]; return a; }}; }",
        {"output_exceeded"},
    ),
    (
        "getter_deeply_nested",
        "function run(p) { return {get v() { let a = 1; for (let i = 0; i < 2e5; i++) a = [a]; return a; }}; }",
        {"output_exceeded"},
    ),
    (
        "json_stringify_replaced",
        "JSON.stringify = () => '{\"ok\": true, \"text\": \"' + '['.repeat(1e5) + '\"}';"
        "function run(p) { let a = 1; for (let i = 0; i < 2e5; i++) a = [a]; return a; }",
        {"output_exceeded"},
    ),
]


@pytest.mark.parametrize(("name", "code", "codes"), HOSTILE, ids=[h[0] for h in HOSTILE])
async def test_hostile_tool_ends_in_a_structured_error_and_the_next_call_succeeds(
    javascript: JavaScriptRuntime, host_factory: Any, name: str, code: str, codes: set[str]
) -> None:
    limits = SHORT if name == "infinite_loop" else LIMITS
    with anyio.fail_after(20):
        error = await failure(javascript, code, {"pid": os.getpid()}, host_factory(), limits)
    assert error.code in codes, error
    await assert_still_serves(javascript, host_factory)


async def test_twenty_hostile_calls_in_parallel_leave_normal_calls_working(
    javascript: JavaScriptRuntime, host_factory: Any
) -> None:
    hostile = [HOSTILE[i % len(HOSTILE)][1] for i in range(20)]

    async def attack(code: str) -> str:
        try:
            await javascript.execute(code, {"pid": 1}, SHORT, host_factory())
        except Exception as exc:
            return type(exc).__name__
        return "succeeded"

    async def normal(i: int) -> Any:
        return (await javascript.execute(ADD, {"a": i, "b": 1}, LIMITS, host_factory())).value

    with anyio.fail_after(60):
        results = await asyncio.gather(*(attack(c) for c in hostile), *(normal(i) for i in range(10)))
    assert "succeeded" not in results[:20]
    assert results[20:] == [i + 1 for i in range(10)]


async def test_worker_runs_under_the_kernel_lockdown(javascript: JavaScriptRuntime) -> None:
    layers = javascript.protections()
    assert layers["worker_process"] and layers["seccomp"] and layers["no_new_privs"]


async def test_a_result_nested_past_the_limit_is_refused_in_the_worker_and_one_at_it_returns(
    javascript: JavaScriptRuntime, host_factory: Any
) -> None:
    nest = "function run(p) { let a = 1; for (let i = 0; i < p.n; i++) a = [a]; return a; }"
    value = (await javascript.execute(nest, {"n": MAX_RESULT_DEPTH}, LIMITS, host_factory())).value
    assert nesting_depth(value, MAX_RESULT_DEPTH) == MAX_RESULT_DEPTH
    error = await failure(javascript, nest, {"n": 200_000}, host_factory())
    assert (error.code, str(error)) == ("output_exceeded", f"the result nests deeper than {MAX_RESULT_DEPTH} levels")
    assert javascript_worker.MAX_RESULT_DEPTH == MAX_RESULT_DEPTH
    # What is measured is what is written: toJSON's result, not the object that has it.
    shallow = "function run(p) { let a = 1; for (let i = 0; i < 200; i++) a = [a]; return {deep: a, toJSON: () => 1}; }"
    assert (await javascript.execute(shallow, {}, LIMITS, host_factory())).value == 1


@pytest.mark.parametrize(("signum", "named"), [(signal.SIGSEGV, "SIGSEGV (QuickJS"), (signal.SIGKILL, "SIGKILL")])
async def test_a_worker_ended_by_a_signal_mid_call_is_named_in_the_error(
    javascript: JavaScriptRuntime, host_factory: Any, monkeypatch: pytest.MonkeyPatch, signum: int, named: str
) -> None:
    # A tool cannot signal its worker; QuickJS itself dies of SIGSEGV when JSON.stringify overflows its
    # native stack (a value ~25,000 deep, which takes seconds to build), so the test sends the signal.
    workers: list[Any] = []
    drive = javascript._drive

    async def recorded(worker: Any, *args: Any) -> Any:
        workers.append(worker)
        return await drive(worker, *args)

    monkeypatch.setattr(javascript, "_drive", recorded)
    running = anyio.Event()

    class Host(HostBridge):
        def log(self, message: str) -> None:
            super().log(message)
            running.set()

    host = host_factory()
    host.__class__ = Host
    errors: list[Exception] = []

    async def call() -> None:
        errors.append(await failure(javascript, "function run(p) { log('running'); for (;;) {} }", {}, host))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await running.wait()
            os.kill(workers[0].process.pid, signum)
    (error,) = errors
    assert error.code == "runtime_error" and str(error).startswith("the javascript worker crashed during the call: ")
    assert named in str(error) and error.details["signal"] == signal.Signals(signum).name
    await assert_still_serves(javascript, host_factory)


@pytest.mark.parametrize(
    "pollution",
    [
        "Object.prototype.toJSON = function () { return undefined; };",
        "Object.prototype.toJSON = function () { return 'hijacked'; };",
        "Object.prototype.toJSON = function () { return {ok: false, code: 'timeout', message: 'forged'}; };",
        "Object.defineProperty(Object.prototype, 'ok', {get() { return false; }, enumerable: true});",
    ],
)
async def test_tool_code_reshaping_every_object_cannot_reshape_the_report_of_its_run(
    javascript: JavaScriptRuntime, host_factory: Any, pollution: str
) -> None:
    # The worker serialises each run's report in the tool's context: with Object.prototype.toJSON set the
    # report came out as text the worker could not read, and the worker died.
    code = pollution + " function run(p) { return 'real ' + p.n; }"  # a string: no toJSON of its own
    result = await javascript.execute(code, {"n": 7}, LIMITS, host_factory())
    assert result.value == "real 7"
    await assert_still_serves(javascript, host_factory)


@pytest.mark.parametrize(
    "code",
    [
        "function run(p) { for (;;) console.log('x'.repeat(1000)); }",
        "function run(p) { for (;;) { try { console.log('é'.repeat(1000)); } catch (e) { return 'caught'; } } }",
    ],
    ids=["uncaught", "caught"],
)
async def test_printing_past_the_log_cap_stops_the_run_in_output_exceeded(
    javascript: JavaScriptRuntime, host_factory: Any, code: str
) -> None:
    # console.log went quiet past the cap and the run went on: a tool printing in a loop ran to its time
    # limit and the call ended in `timeout`, where the other runtimes stop it in `output_exceeded`.
    with anyio.fail_after(20):
        error = await failure(javascript, code, {}, host_factory(), SHORT)
    assert error.code == "output_exceeded", error


async def test_a_start_cancelled_while_its_workers_start_leaves_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server stopped while it warms up cancels the workers' start. Before: each worker started so
    # far was left running after the server had exited.
    started: list[asyncio.subprocess.Process] = []
    real_exec = asyncio.create_subprocess_exec

    async def spawn(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        started.append(await real_exec(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn)
    runtime = JavaScriptRuntime(pool_size=2, max_concurrent=4)
    try:
        with anyio.fail_after(30):
            start = asyncio.ensure_future(runtime.start())
            while len(started) < 2:
                await anyio.sleep(0.001)
            start.cancel()
            with pytest.raises(asyncio.CancelledError):
                await start
        assert [process.returncode is not None for process in started] == [True, True]
    finally:
        await runtime.close()
        for process in started:
            if process.returncode is None:
                process.kill()
                await process.wait()


def test_a_worker_loads_the_engine_without_the_packages_thread_pool() -> None:
    """The `quickjs` package's __init__ defines a thread-pool `Function` (importing concurrent.futures and
    logging, ~10 ms of every worker's start) that the worker never uses: it imports the engine itself."""
    import subprocess
    import sys

    pytest.importorskip("quickjs")
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('javascript_worker', {javascript_worker.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(module.quickjs.Context is not None, sorted(m for m in ('concurrent.futures', 'logging') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "[]"]


async def test_a_worker_launched_ahead_is_sent_its_ids_and_runs_the_first_call(
    host_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`awb doctor` starts a worker's interpreter before it has loaded its config (and so before the worker
    ids are claimed): the runtime sends that worker its ids rather than starting another."""
    launched = await javascript.launch_worker(sys.executable)

    async def no_second_worker(python: str, worker_ids: tuple[int, int] | None = None) -> Any:
        raise AssertionError("the runtime started a worker of its own")

    monkeypatch.setattr(javascript, "launch_worker", no_second_worker)
    runtime = JavaScriptRuntime(pool_size=0, launched=launched)
    try:
        with anyio.fail_after(30):
            assert (await runtime.execute(ADD, {"a": 2, "b": 3}, LIMITS, host_factory())).value == 5
        if os.geteuid() == 0:  # the worker left root for the ids it was sent
            assert runtime.protections()["unprivileged_uid"]
    finally:
        await runtime.close()
    assert launched.returncode is not None


async def test_a_runtime_closed_before_it_started_ends_the_worker_launched_for_it() -> None:
    launched = await javascript.launch_worker(sys.executable)
    with anyio.fail_after(10):
        await JavaScriptRuntime(launched=launched).close()
    assert launched.returncode is not None
