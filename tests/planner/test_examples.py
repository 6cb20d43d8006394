from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: A script's bound: inside pytest's 120 s per test, so a run too slow fails saying so, not as a pytest timeout.
SCRIPT_SECONDS = 90
#: Tools the codemode benchmark's cache table indexes: its bar (the warm index embeds none) holds at any
#: count, and its default 500 take ~20 s of CPU to embed cold (80 s of wall at load 5 on 2 cores); 30, ~2 s.
INDEXED_TOOLS = 30


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=SCRIPT_SECONDS)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{exc} (load average {os.getloadavg()[0]:.1f})")


def test_the_offline_planner_example_runs_as_written() -> None:
    done = run_script(str(ROOT / "examples" / "plan_offline.py"))
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition("\n")
    seen = json.loads(first.removeprefix("plan result seen by the model: "))
    assert seen["success"] is True and seen["tool_calls"] == 2 and seen["result"]["invoices"] > 0
    result = json.loads(rest)
    assert result["success"] is True and result["budget_usage"]["code_runs"] == 1


def test_the_codemode_benchmark_meets_its_bar() -> None:
    done = run_script(str(ROOT / "benchmarks" / "codemode.py"), "--index-tools", str(INDEXED_TOOLS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("yes") == 3  # each task found the same answer both ways
    assert "0 tools embedded ok" in done.stdout or "tool index with the vector cache: skipped" in done.stdout
