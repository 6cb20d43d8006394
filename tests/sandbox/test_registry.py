"""Runtime registry: what gets built, how `auto` chooses, what `awb doctor` is told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from awb.config import Config
from awb.inventory.models import Example
from awb.sandbox.base import Limits, Runtime
from awb.sandbox.registry import build_runtimes, choose_python_runtime, describe_protections

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


async def test_doctor_report_lists_protections_and_availability(runtimes: dict[str, Runtime]) -> None:
    report = describe_protections(runtimes)
    assert report["cpython"]["available"] is True
    assert report["cpython"]["protections"]["seccomp"] is True
    assert report["wasm"]["protections"]["epoch_deadline"] is True
    assert report["monty"]["language"] == "python"
