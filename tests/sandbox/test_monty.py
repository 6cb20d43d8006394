"""The Monty runtime's sessions and deadlines: a fresh session per call under load and when limits
change, the time limit counted from when a worker runs the call, and closing never waits on a worker
that is not coming."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import anyio
import pytest

import awb.sandbox.monty as monty_module
from awb.errors import ToolRuntimeError, ToolTimeout
from awb.sandbox.host import HostBridge
from awb.sandbox.monty import MontyRuntime
from sandbox_support import LIMITS, SHORT, Staged

pytestmark = pytest.mark.anyio

CODE = "def run(params):\n    return params['x'] * 2\n"


def host() -> HostBridge:
    return HostBridge(read_dirs=[], stage=Staged(), max_log_bytes=LIMITS.max_log_bytes)


async def test_more_concurrent_calls_than_workers_all_finish_and_close_returns() -> None:
    runtime = MontyRuntime(pool_size=2, max_processes=2)
    results: list[int] = []

    async def call(x: int) -> None:
        results.append((await runtime.execute(CODE, {"x": x}, LIMITS, host())).value)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            for x in range(12):
                tasks.start_soon(call, x)
        await runtime.close()
    assert sorted(results) == [2 * x for x in range(12)]


async def test_calls_alternating_limits_each_run_under_their_own() -> None:
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    sleeper = "import time\n\ndef run(params):\n    time.sleep(0.7)\n    return params['x'] * 2\n"
    try:
        with anyio.fail_after(30):
            for x in range(6):
                if x % 2:  # 3 s: the sleep fits
                    assert (await runtime.execute(sleeper, {"x": x}, LIMITS, host())).value == 2 * x
                else:  # 0.6 s: it does not
                    with pytest.raises(ToolTimeout):
                        await runtime.execute(sleeper, {"x": x}, SHORT, host())
    finally:
        with anyio.fail_after(10):
            await runtime.close()


async def test_waiting_for_a_free_worker_is_not_charged_to_the_call() -> None:
    """Three calls, two workers: the third waits for one, and its limit counts from when it runs."""
    runtime = MontyRuntime(pool_size=1, max_processes=1)  # one worker: one call at a time
    sleeper = "import time\n\ndef run(params):\n    time.sleep(0.5)\n    return params['x']\n"
    results: list[int] = []

    async def call(x: int) -> None:
        results.append((await runtime.execute(sleeper, {"x": x}, SHORT, host())).value)

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                for x in range(3):
                    tasks.start_soon(call, x)
    finally:
        with anyio.fail_after(10):
            await runtime.close()
    # Each ran 0.5 s of a 0.6 s limit; the last began once another had finished, 1 s or more after it
    # was made, past the limit and its grace if the wait had counted.
    assert sorted(results) == [0, 1, 2]


class Announcing(HostBridge):
    """A host whose `log` tells the test that the tool is running in its worker."""

    def __init__(self) -> None:
        super().__init__(read_dirs=[], stage=None, max_log_bytes=LIMITS.max_log_bytes)
        self.running = threading.Event()

    def log(self, message: str) -> None:
        super().log(message)
        self.running.set()


async def test_a_cancelled_call_ends_its_worker_and_the_runtime_keeps_serving() -> None:
    # One worker. Left running, the spinning call would hold it for its whole 60 s limit, and the calls
    # after it would wait for that worker.
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    busy = "def run(params):\n    log('spinning')\n    n = 0\n    while True:\n        n += 1\n"
    spinning = replace(LIMITS, timeout_ms=60_000)
    spinner = Announcing()
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(runtime.execute, busy, {}, spinning, spinner)
                while not spinner.running.is_set():
                    await anyio.to_thread.run_sync(spinner.running.wait, 0.05)
                tasks.cancel_scope.cancel()
        # Cancelled while its worker spins: the runtime ends that worker, the pool replaces it, and the
        # next calls are answered well inside the time the spinning call had left (a new worker's start
        # takes a second or two on a loaded machine: the bound is far from both).
        with anyio.fail_after(20):
            for x in range(4):
                assert (await runtime.execute(CODE, {"x": x}, LIMITS, host())).value == 2 * x
    finally:
        with anyio.fail_after(10):
            await runtime.close()


class Stuck(HostBridge):
    """A host whose `log` does not return until the test lets it: a run that stopped answering."""

    def __init__(self) -> None:
        super().__init__(read_dirs=[], stage=None, max_log_bytes=LIMITS.max_log_bytes)
        self.entered = threading.Event()
        self.release = threading.Event()

    def log(self, message: str) -> None:
        self.entered.set()
        self.release.wait(30)


async def test_a_run_that_stops_answering_is_a_timeout_at_its_deadline_and_the_runtime_keeps_serving() -> None:
    runtime = MontyRuntime(pool_size=1, max_processes=2)
    stuck = Stuck()
    try:
        with anyio.fail_after(30):
            await runtime.start()
        started = anyio.current_time()
        # Monty's own limit counts only executing time, so only the server's watch can end this call.
        with anyio.fail_after(5), pytest.raises(ToolTimeout):
            await runtime.execute("def run(params):\n    log('waiting')\n    return 1\n", {}, SHORT, stuck)
        assert stuck.entered.is_set()
        assert anyio.current_time() - started >= SHORT.timeout_ms / 1000
        with anyio.fail_after(10):  # the other worker serves meanwhile
            assert (await runtime.execute(CODE, {"x": 4}, LIMITS, host())).value == 8
    finally:
        stuck.release.set()
        with anyio.fail_after(10):
            await runtime.close()


async def spare_ready(runtime: MontyRuntime) -> None:
    """Wait (bounded) until the idle runtime holds a spare session for the next call."""
    with anyio.fail_after(10):
        while runtime._spare._spare is None:
            await anyio.sleep(0.005)


async def test_a_lone_call_runs_in_a_fresh_session_checked_out_ahead_and_other_limits_never_wait_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = MontyRuntime(pool_size=1, max_processes=1)  # the spare holds the only worker
    checkouts: list[object] = []
    checkout = monty_module._checkout

    def counted(*args: Any) -> Any:
        checkouts.append(args)
        return checkout(*args)

    monkeypatch.setattr(monty_module, "_checkout", counted)
    leaves = "leak = 42\n\ndef run(params):\n    return params['x']\n"
    reads = "def run(params):\n    return leak\n"
    try:
        with anyio.fail_after(30):
            assert (await runtime.execute(leaves, {"x": 1}, LIMITS, host())).value == 1
            await spare_ready(runtime)
            before = len(checkouts)
            # The spare is fresh: what the last call left in its globals is not there.
            with pytest.raises(ToolRuntimeError, match="NameError"):
                await runtime.execute(reads, {}, LIMITS, host())
            # It ran in the spare: the one checkout since is the next call's spare, which starts on
            # the call's turn after its answer (so it is counted once that spare is ready, not before).
            await spare_ready(runtime)
            assert len(checkouts) == before + 1
            # Other limits: the spare goes back to the pool and the call gets the one worker.
            sleeper = "import time\n\ndef run(params):\n    time.sleep(0.7)\n    return 1\n"
            with pytest.raises(ToolTimeout):
                await runtime.execute(sleeper, {}, SHORT, host())
            # Monty refuses a sleep past the limit at once, in the worker: the worker answered, so
            # a spare with the new limits is checked out for the next call.
            await spare_ready(runtime)
            assert len(checkouts) == before + 3  # its own, then that spare
            assert checkouts[-1][1] == checkouts[-2][1] != checkouts[0][1]
    finally:
        with anyio.fail_after(10):
            await runtime.close()


async def test_an_error_with_a_huge_message_is_cut_where_the_runtime_reads_it() -> None:
    """A tool's own exception may carry tens of megabytes of message: the error kept it whole twice
    (in its message before the cap, and as the traceback's last line), rebuilt by pydantic-monty each
    time, ~120 ms of work holding the interpreter's lock per call."""
    runtime = MontyRuntime(pool_size=1)
    await runtime.start()
    try:
        with anyio.fail_after(20), pytest.raises(ToolRuntimeError) as raised:
            code = "def run(params):\n    raise ValueError('x' * 20_000_000)\n"
            await runtime.execute(code, {}, LIMITS, HostBridge(read_dirs=[], stage=None, max_log_bytes=1024))
    finally:
        await runtime.close()
    error = raised.value
    assert error.message.startswith("ValueError: xxx") and len(error.message) < 5000
    assert error.details["traceback"][-1].startswith("ValueError: xxx")
    assert all(len(line) < 5000 for line in error.details["traceback"])


async def test_a_check_of_code_without_run_says_it_does_not_define_run_as_the_other_runtimes_do() -> None:
    """Monty said `NameError: name 'run' is not defined` (from the line the check adds), where cpython and
    javascript say the code does not define run(params); a NameError of the tool's own stays one."""
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    try:
        with anyio.fail_after(30):
            with pytest.raises(ToolRuntimeError) as missing:
                await runtime.check("x = 1\n", LIMITS)
            assert missing.value.message == "the tool's code does not define run(params)"
            with pytest.raises(ToolRuntimeError) as own:
                await runtime.check("y = nothing_here\n\ndef run(params):\n    return 1\n", LIMITS)
            assert own.value.message == "NameError: name 'nothing_here' is not defined"
            with pytest.raises(ToolRuntimeError) as early:  # the tool's own code names run before defining it
                await runtime.check("run(1)\n\ndef run(params):\n    return 1\n", LIMITS)
            assert early.value.message == "NameError: name 'run' is not defined"
    finally:
        await runtime.close()


async def test_a_traceback_names_no_function_it_does_not_know() -> None:
    """A `run()` that takes no params failed with `line 1, in None: def run():`, Monty's frame having no
    function name: the line is shown without the `in None`."""
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    try:
        with anyio.fail_after(30), pytest.raises(ToolRuntimeError) as failed:
            await runtime.execute("def run():\n    return 1\n", {}, LIMITS, host())
    finally:
        await runtime.close()
    trace = failed.value.details["traceback"]
    assert trace == ["line 1: def run():", "TypeError: run() takes 0 positional arguments but 1 was given"], trace


async def test_a_worker_is_settled_in_once_however_many_checks_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's first feed (`_settled_in`) happens once: checks, which are not measured, used to feed
    it again on every checkout, a round trip to the worker each."""
    settles: list[int | None] = []
    checkout = monty_module._checkout

    class Counted:
        def __init__(self, session: Any) -> None:
            self._session = session

        def __getattr__(self, name: str) -> Any:
            return getattr(self._session, name)

        def __exit__(self, *args: Any) -> None:
            self._session.__exit__(*args)

        def feed_run(self, code: str, **kwargs: Any) -> Any:
            if code == "None":
                settles.append(self._session.worker_pid)
            return self._session.feed_run(code, **kwargs)

    monkeypatch.setattr(monty_module, "_checkout", lambda pool, limits: Counted(checkout(pool, limits)))
    runtime = MontyRuntime(pool_size=1, max_processes=1)
    try:
        with anyio.fail_after(30):
            for _ in range(5):
                await runtime.check(CODE, LIMITS)
    finally:
        with anyio.fail_after(10):
            await runtime.close()
    assert settles
    assert len(settles) == len(set(settles))  # each worker once
