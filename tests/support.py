"""Helpers shared by the test suite (a plain module: several test folders have their own conftest)."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

ADD_CODE = "def run(params):\n    return params['a'] + params['b']\n"
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def add_tool(name: str = "add_numbers", **extra: Any) -> dict[str, Any]:
    """A craft request for a small, correct tool."""
    return {
        "name": name,
        "description": "Add two numbers and return the sum",
        "code": ADD_CODE,
        "input_schema": ADD_SCHEMA,
        "examples": [{"params": {"a": 1, "b": 2}, "expected": 3}],
        "tags": ["math"],
        **extra,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def awb_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for an `awb` subprocess bound to this test's inventory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.update(
        AWB_INVENTORY_PATH=str(tmp_path / "inventory.db"),
        AWB_PID_FILE=str(tmp_path / "awb.pid"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def wait_for_ready(process: subprocess.Popen[bytes], timeout: float = 30.0) -> threading.Thread:
    """Block (bounded) until the server prints its ready line on stderr; drain stderr afterwards."""
    assert process.stderr is not None
    stream = process.stderr
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in iter(stream.readline, b""):
            lines.put(line)
        lines.put(b"")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[bytes] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"server not ready within {timeout} s: {b''.join(seen)!r}") from None
        if not line:
            raise RuntimeError(f"server exited before it was ready: {b''.join(seen)!r}")
        seen.append(line)
        if b"awb: ready on" in line:
            return reader
