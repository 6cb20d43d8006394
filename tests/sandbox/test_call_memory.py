"""Peak memory per call: runtimes that can measure it report it, and the call record keeps it."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import wat

from awb.inventory.feed_sql import FEED_SQL
from awb.inventory.sqlite import MIGRATIONS, SCHEMA_VERSION, SQLiteStore
from awb.sandbox.base import Execution, HostFunctions, Limits, Runtime
from awb.workbench import Workbench
from sandbox_support import LIMITS
from support import add_tool

pytestmark = pytest.mark.anyio

PAGE = 65536

#: Grows its memory from 1 to 4 pages, then answers 7.
GROWER = wat.module(
    """(func (export "run") (param i32 i32) (result i64)
    (drop (memory.grow (i32.const 3)))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 1)))""",
    data="7",
)


async def test_a_wasm_call_reports_the_memory_its_module_grew_to(workbench: Workbench) -> None:
    execution = await workbench.runtimes["wasm"].execute(GROWER, {}, LIMITS, _NoHost())
    assert execution.value == 7
    assert execution.peak_memory_bytes == 4 * PAGE


async def test_the_call_record_keeps_the_peak_memory_of_the_call(workbench: Workbench) -> None:
    await workbench.craft(
        {
            "name": "grower",
            "description": "Grow linear memory and answer seven",
            "language": "wasm",
            "code": GROWER,
            "examples": [{"params": {}, "expected": 7}],
        }
    )
    await workbench.call("grower", {})
    [record] = workbench.inspect("grower").recent_calls
    assert record.peak_memory_bytes == 4 * PAGE


async def test_a_runtime_that_cannot_measure_leaves_the_peak_unknown(workbench: Workbench) -> None:
    await workbench.craft(add_tool("adder", runtime="monty"))
    workbench.runtimes["monty"] = _Unmeasured(workbench.runtimes["monty"])
    await workbench.call("adder", {"a": 1, "b": 2})
    [record] = workbench.inspect("adder").recent_calls
    assert record.peak_memory_bytes is None


def test_an_older_inventory_gains_the_column_and_keeps_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    store.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE calls DROP COLUMN peak_memory_bytes")
    db.execute("DROP TABLE workbench_events")
    db.execute("DROP INDEX tools_live_name_folded")  # what later migrations add, taken back as well
    db.execute("ALTER TABLE tools DROP COLUMN case_variant")
    db.execute(
        "INSERT INTO calls (tool_id, version, at, duration_ms, ok) VALUES ('tool_a', 1, '2026-01-01T00:00:00', 1.0, 1)"
    )
    db.execute(f"PRAGMA user_version = {MIGRATIONS.index(FEED_SQL)}")  # before the column came
    db.commit()
    db.close()
    store = SQLiteStore(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        [record] = store.calls("tool_a")
        assert record.peak_memory_bytes is None
    finally:
        store.close()


class _Unmeasured:
    """A runtime that runs tools like the one it wraps but cannot tell their memory."""

    def __init__(self, inner: Runtime) -> None:
        self._inner = inner
        self.name = inner.name
        self.language = inner.language

    async def execute(self, code: str, params: dict[str, Any], limits: Limits, host: HostFunctions) -> Execution:
        execution = await self._inner.execute(code, params, limits, host)
        return replace(execution, peak_memory_bytes=None)

    async def start(self) -> None:
        await self._inner.start()

    async def close(self) -> None:
        await self._inner.close()

    async def check(self, code: str, limits: Limits) -> None:
        await self._inner.check(code, limits)

    def protections(self) -> dict[str, bool]:
        return self._inner.protections()


class _NoHost:
    def log(self, message: str) -> None:
        raise AssertionError("not called")

    def read_file(self, path: str) -> str:
        raise AssertionError("not called")

    def write_file(self, path: str, data: str) -> dict[str, object]:
        raise AssertionError("not called")
