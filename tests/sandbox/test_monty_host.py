"""Monty runs driven by the server: host functions answered on the event loop with file reads in a
thread, sleeps and host waits within the call's deadline, and refusals reported with the host's code."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.errors import ExecutionError, ToolTimeout
from awb.sandbox.host import HostBridge
from awb.sandbox.monty import MontyRuntime
from awb.sandbox.monty_host import MontyRun
from sandbox_support import LIMITS, SHORT, Staged, failure

pytestmark = pytest.mark.anyio


@pytest.fixture
async def monty() -> AsyncIterator[MontyRuntime]:
    runtime = MontyRuntime(pool_size=2)
    await runtime.start()
    try:
        yield runtime
    finally:
        with anyio.fail_after(20):
            await runtime.close()


class GatedReads(HostBridge):
    """A host whose reads wait for the test to open a gate, and note the thread they ran on."""

    def __init__(self, read_dir: Path) -> None:
        super().__init__(read_dirs=[str(read_dir)], stage=None, max_log_bytes=LIMITS.max_log_bytes)
        self.gate = threading.Event()
        self.reading = threading.Event()
        self.threads: list[threading.Thread] = []

    def read_file(self, path: str) -> str:
        self.threads.append(threading.current_thread())
        self.reading.set()
        self.gate.wait(timeout=30)  # bounded: the test opens it
        return super().read_file(path)


async def wait_for(event: threading.Event) -> None:
    with anyio.fail_after(10):
        while not event.is_set():
            await anyio.to_thread.run_sync(event.wait, 0.05)


async def test_read_file_runs_in_a_thread_and_a_blocked_read_stalls_no_other_call(
    monty: MontyRuntime, dirs: dict[str, Path]
) -> None:
    reader = GatedReads(dirs["granted"])
    code = "def run(params):\n    return read_file('data.txt').upper()\n"
    adder = "def run(params):\n    return params['a'] + 1\n"
    result: list[Any] = []

    async def read() -> None:
        result.append((await monty.execute(code, {}, LIMITS, reader)).value)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            await wait_for(reader.reading)
            # The read is blocked in its thread; the event loop and the pool still serve calls.
            for a in range(3):
                other = HostBridge(read_dirs=[], stage=None, max_log_bytes=LIMITS.max_log_bytes)
                assert (await monty.execute(adder, {"a": a}, LIMITS, other)).value == a + 1
            assert result == []
            reader.gate.set()
    assert result == ["HELLO FROM A GRANTED DIR"]
    # A thread of the server's own (not the event loop's, not one of the pool's native threads,
    # which Python names Dummy-N: a read blocking there would stall the pool's other sessions).
    [thread] = reader.threads
    assert thread is not threading.current_thread() and not thread.name.startswith("Dummy"), thread.name


async def test_a_read_that_never_returns_ends_in_timeout_at_the_call_limit(
    monty: MontyRuntime, dirs: dict[str, Path]
) -> None:
    reader = GatedReads(dirs["granted"])
    try:
        with anyio.fail_after(10):
            error = await failure(monty, "def run(params):\n    return read_file('data.txt')\n", {}, reader, SHORT)
        assert error.code == "timeout", error
    finally:
        reader.gate.set()


async def test_sleeping_counts_against_the_time_limit(monty: MontyRuntime, host_factory: Any) -> None:
    """Monty's own limit counts only executing time; the server bounds the rest."""
    code = "import time\n\ndef run(params):\n    while True:\n        time.sleep(0.2)\n"
    with anyio.fail_after(10):
        error = await failure(monty, code, {}, host_factory(), SHORT)
    assert error.code == "timeout"
    asleep = "import asyncio\nimport time\n\ndef run(params):\n    time.sleep(0.01)\n    return 'rested'\n"
    assert (await monty.execute(asleep, {}, LIMITS, host_factory())).value == "rested"


async def test_host_functions_take_keywords_and_check_their_arguments(
    monty: MontyRuntime, host_factory: Any, staged: Staged, dirs: dict[str, Path]
) -> None:
    code = "def run(params):\n    return write_file(path='out.txt', data=read_file(path='data.txt'))\n"
    receipt = (await monty.execute(code, {}, LIMITS, host_factory())).value
    assert receipt["path"] == str(dirs["granted"] / "out.txt")
    assert staged.writes == [(str(dirs["granted"] / "out.txt"), "hello from a granted dir")]
    error = await failure(monty, "def run(params):\n    return read_file('a', 'b')\n", {}, host_factory())
    assert error.code == "runtime_error"
    assert "read_file() takes 1 positional argument but 2 were given" in error.message


REFUSED: list[tuple[str, str, str]] = [
    ("read_outside_the_grants", "return read_file('/etc/passwd')", "sandbox_violation"),
    ("read_through_dotdot", "return read_file('../outside/secret.txt')", "sandbox_violation"),
    ("read_through_a_symlink", "return read_file('link.txt')", "sandbox_violation"),
    ("read_a_path_that_is_not_text", "return read_file(12)", "sandbox_violation"),
    ("write_outside_the_grants", "return write_file('/etc/cron.d/evil', 'x')", "sandbox_violation"),
    ("write_through_dotdot", "return write_file('../outside/new.txt', 'x')", "sandbox_violation"),
    ("log_past_the_cap", "for i in range(200):\n        log('x' * 1000)", "output_exceeded"),
    ("open_a_host_file", "return open('/etc/passwd').read()", "sandbox_violation"),
    ("pathlib_read", "import pathlib\n    return pathlib.Path('/etc/passwd').read_text()", "sandbox_violation"),
    ("read_the_environment", "import os\n    return os.getenv('HOME')", "sandbox_violation"),
]


@pytest.mark.parametrize(("name", "body", "code"), REFUSED, ids=[r[0] for r in REFUSED])
async def test_a_refusal_the_tool_lets_through_ends_in_the_hosts_error(
    monty: MontyRuntime, host_factory: Any, staged: Staged, name: str, body: str, code: str
) -> None:
    source = f"def run(params):\n    {body}\n"
    error = await failure(monty, source, {}, host_factory())
    assert error.code == code, error.to_dict()
    # The tool's own line is in the traceback, as for any error of the tool's.
    assert any("run" in line for line in error.details.get("traceback", [])), error.details
    assert staged.writes == []


async def test_a_refusal_names_the_path_and_the_tool_may_catch_it(monty: MontyRuntime, host_factory: Any) -> None:
    error = await failure(monty, "def run(params):\n    return read_file('/etc/passwd')\n", {}, host_factory())
    assert error.details["path"] == "/etc/passwd"
    caught = (
        "def run(params):\n"
        "    try:\n"
        "        return read_file('/etc/passwd')\n"
        "    except PermissionError as refused:\n"
        "        return 'refused: ' + str(refused)\n"
    )
    value = (await monty.execute(caught, {}, LIMITS, host_factory())).value
    assert value.startswith("refused: read outside the granted directories")


async def test_a_permission_error_the_tool_raises_itself_is_its_own_runtime_error(
    monty: MontyRuntime, host_factory: Any
) -> None:
    """Only a refusal the host or the sandbox made is a sandbox violation: a tool cannot dress its own
    failure up as one, even with the very message of a refusal it never met."""
    forged = (
        "def run(params):\n    raise PermissionError('read outside the granted directories refused: /etc/passwd')\n"
    )
    error = await failure(monty, forged, {}, host_factory())
    assert error.code == "runtime_error"
    assert error.details["exception"] == "PermissionError"


async def test_a_tool_that_caught_a_refusal_and_failed_otherwise_keeps_its_own_error(
    monty: MontyRuntime, host_factory: Any
) -> None:
    code = (
        "def run(params):\n"
        "    try:\n"
        "        read_file('/etc/passwd')\n"
        "    except PermissionError:\n"
        "        pass\n"
        "    raise ValueError('something else went wrong')\n"
    )
    error = await failure(monty, code, {}, host_factory())
    assert error.code == "runtime_error"
    assert "something else went wrong" in error.message


async def test_an_unsupported_module_is_still_reported_as_unsupported(monty: MontyRuntime, host_factory: Any) -> None:
    """`python_runtime: auto` moves such tools to cpython: the import is not a sandbox refusal."""
    error = await failure(monty, "import socket\n\ndef run(params):\n    return 1\n", {}, host_factory())
    assert error.code == "runtime_error"
    assert error.details["unsupported"] is True


async def test_check_runs_without_host_functions(monty: MontyRuntime) -> None:
    with pytest.raises(ExecutionError):
        await monty.check("log('at import')\n\ndef run(params):\n    return 1\n", LIMITS)
    await monty.check("def run(params):\n    return log('only when called')\n", LIMITS)


async def test_printing_past_the_log_cap_is_output_exceeded_not_a_memory_error(
    monty: MontyRuntime, host_factory: Any
) -> None:
    """pydantic-monty reports its print cap as a MemoryError, as it does the heap limit."""
    printer = "def run(params):\n    for i in range(20000):\n        print('line', i)\n    return 1\n"
    error = await failure(monty, printer, {}, host_factory())
    assert (error.code, error.message) == (
        "output_exceeded",
        f"printed output is over the {LIMITS.max_log_bytes}-byte cap",
    )
    hog = "def run(params):\n    return len('x' * 200_000_000)\n"
    assert (await failure(monty, hog, {}, host_factory())).code == "memory_exceeded"


async def test_a_tool_may_log_in_a_loop_well_past_a_thousand_host_calls(monty: MontyRuntime, host_factory: Any) -> None:
    """pydantic-monty allows 1,000 host calls a checkout unless told otherwise: a tool that logged a
    line per item of a few thousand ended in `runtime_error` ("suspension limit 1000 exceeded")."""
    logger = "def run(params):\n    for i in range(3000):\n        log('i')\n    return 'done'\n"
    result = await monty.execute(logger, {}, LIMITS, host_factory())
    assert result.value == "done"


# --- the run's stop signal, made only for a run that sleeps -----------------------------------------


def test_a_run_that_never_sleeps_makes_no_stop_event() -> None:
    # An Event (a Condition and its lock) costs more to make than the rest of a trivial call's run object.
    run = MontyRun(None, timeout_ms=1000)
    assert run.begin(None, 1.0)
    run.finish()
    run.abandon()
    assert run._stop is None


def test_a_run_abandoned_before_it_sleeps_times_out_at_once() -> None:
    run = MontyRun(None, timeout_ms=30_000)
    assert run.begin(None, 30.0)
    run.abandon()
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        run._sleep((20,))
    assert time.monotonic() - started < 5


def test_abandoning_a_run_while_it_goes_to_sleep_wakes_it_with_a_timeout() -> None:
    run = MontyRun(None, timeout_ms=30_000)
    assert run.begin(None, 30.0)
    outcome: list[BaseException] = []
    asleep = threading.Thread(target=lambda: _slept(run, outcome), daemon=True)
    asleep.start()
    run.abandon()  # before or after the sleep made its event: either way it wakes
    asleep.join(timeout=5)
    assert not asleep.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], ToolTimeout)


def test_a_run_abandoned_before_it_began_does_not_begin() -> None:
    run = MontyRun(None, timeout_ms=1000)
    run.abandon()
    assert not run.begin(None, 1.0)


def _slept(run: MontyRun, outcome: list[BaseException]) -> None:
    try:
        run._sleep((20,))
    except BaseException as exc:  # the test reads what the sleep raised
        outcome.append(exc)
