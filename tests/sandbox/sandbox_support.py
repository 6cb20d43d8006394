"""Helpers for the sandbox tests (a plain module, so test files can import it by a unique name)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from awb.errors import ExecutionError
from awb.inventory.models import Capabilities, Tool
from awb.sandbox.base import Execution, Limits, Runtime
from awb.sandbox.host import HostBridge

SECRET = "TOP-SECRET-0xC0FFEE"
LIMITS = Limits(timeout_ms=3000, memory_mb=100, max_output_bytes=256 * 1024, max_log_bytes=16 * 1024)
SHORT = Limits(timeout_ms=600, memory_mb=100, max_output_bytes=256 * 1024, max_log_bytes=16 * 1024)


class Staged:
    """A staging callback that records instead of touching an inventory."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    def __call__(self, path: str, data: str) -> int:
        self.writes.append((path, data))
        return len(self.writes)


async def failure(
    runtime: Runtime, code: str, params: dict[str, Any], host: HostBridge, limits: Limits = LIMITS
) -> ExecutionError:
    """Run a tool that must fail; its structured error (which must not carry the secret)."""
    try:
        result: Execution = await runtime.execute(code, params, limits, host)
    except ExecutionError as exc:
        assert SECRET not in repr(exc.to_dict())
        assert "root:x:0" not in repr(exc.to_dict())
        return exc
    raise AssertionError(f"the tool was expected to fail but returned {result.value!r}")


def granted_tool(tool_id: str, *read_dirs: Path) -> Tool:
    """A stored-tool record granted `read_dirs` (staged writes may target them)."""
    now = datetime.now(UTC)
    return Tool(
        tool_id=tool_id,
        name=tool_id,
        description="writes files",
        language="python",
        runtime="monty",
        code="def run(params):\n    return 1\n",
        input_schema={"type": "object"},
        capabilities=Capabilities(read_dirs=[str(d) for d in read_dirs]),
        created_at=now,
        updated_at=now,
    )
