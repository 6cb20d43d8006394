"""Runtime registry: what gets built, how `auto` chooses, what `awb doctor` is told."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.config import Config
from awb.inventory.models import Example
from awb.sandbox.base import Limits, Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.registry import PROBE_TIMEOUT_MS, build_runtimes, choose_python_runtime, describe_protections

pytestmark = pytest.mark.anyio


@pytest.fixture
async def runtimes(tmp_path: Path) -> AsyncIterator[dict[str, Runtime]]:
    built = build_runtimes(Config(inventory_path=tmp_path / "inv.db"))
    try:
        yield built
    finally:
        for runtime in built.values():
            await runtime.close()


async def test_every_runtime_is_built_here(runtimes: dict[str, Runtime]) -> None:
    assert set(runtimes) == {"monty", "cpython", "javascript", "wasm"}


async def test_auto_keeps_code_monty_runs_on_monty(runtimes: dict[str, Runtime]) -> None:
    code = "def run(params):\n    return params['a'] * 2\n"
    examples = [Example(params={"a": 2}, expected=4)]
    assert await choose_python_runtime(runtimes, code, examples, Limits()) == "monty"


async def test_auto_moves_generators_and_missing_modules_to_cpython(runtimes: dict[str, Runtime]) -> None:
    generator = "def gen():\n    yield 1\n\ndef run(params):\n    return list(gen())\n"
    assert await choose_python_runtime(runtimes, generator, [], Limits()) == "cpython"
    statistics = "import statistics\n\ndef run(params):\n    return statistics.mean(params['xs'])\n"
    examples = [Example(params={"xs": [1, 3]}, expected=2)]
    assert await choose_python_runtime(runtimes, statistics, examples, Limits()) == "cpython"


async def test_auto_keeps_plainly_wrong_code_on_monty_for_the_admission_error(runtimes: dict[str, Runtime]) -> None:
    code = "def run(params):\n    return 1 / 0\n"
    assert await choose_python_runtime(runtimes, code, [Example(params={}, expected=1)], Limits()) == "monty"


async def test_auto_probes_briefly_and_stops_at_an_example_that_runs_long(
    runtimes: dict[str, Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admission test runs every example in full afterwards: a probe at full length made a looping
    tool's craft take its time limit twice (10 s for one example)."""
    monty = runtimes["monty"]
    probed: list[int] = []
    execute = monty.execute

    async def spied(code: str, params: dict[str, Any], limits: Limits, host: HostBridge) -> Any:
        probed.append(limits.timeout_ms)
        return await execute(code, params, limits, host)

    monkeypatch.setattr(monty, "execute", spied)
    loop = "def run(params):\n    while True:\n        pass\n"
    examples = [Example(params={}, expected=1)] * 3
    assert await choose_python_runtime(runtimes, loop, examples, Limits(timeout_ms=5000)) == "monty"
    assert probed == [PROBE_TIMEOUT_MS]


async def test_doctor_report_lists_protections_and_availability(runtimes: dict[str, Runtime]) -> None:
    report = describe_protections(runtimes)
    assert report["cpython"]["available"] is True
    assert report["cpython"]["protections"]["seccomp"] is True
    assert report["wasm"]["protections"]["epoch_deadline"] is True
    assert report["monty"]["language"] == "python"


class Meeting(HostBridge):
    """A host whose `read_file` (answered off the event loop by every runtime) returns only once all
    the barrier's parties are inside it at the same moment."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__(read_dirs=[], stage=None, max_log_bytes=Limits().max_log_bytes)
        self._barrier = barrier

    def read_file(self, path: str) -> str:
        self._barrier.wait()
        return path


@pytest.mark.parametrize("runtime_name", ["monty", "javascript"])
async def test_each_runtime_runs_max_concurrent_calls_at_the_same_moment(tmp_path: Path, runtime_name: str) -> None:
    config = Config(inventory_path=tmp_path / "inv.db")
    config.sandbox.pool_size, config.sandbox.max_concurrent = 1, 6
    runtime = build_runtimes(config)[runtime_name]
    code = {
        "monty": "def run(params):\n    read_file('here')\n    return params['n']\n",
        "javascript": "function run(params) { read_file('here'); return params.n; }",
    }[runtime_name]
    # Six runs must all be in their workers at once for any of them to pass the barrier; a runtime
    # with fewer workers leaves the others waiting until the barrier gives up and breaks.
    barrier = threading.Barrier(6, timeout=20)
    results: list[int] = []

    async def one(n: int) -> None:
        results.append((await runtime.execute(code, {"n": n}, Limits(timeout_ms=30_000), Meeting(barrier))).value)

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for n in range(6):
                    group.start_soon(one, n)
    finally:
        with anyio.fail_after(20):
            await runtime.close()
    assert sorted(results) == list(range(6))
    assert not barrier.broken
