from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_offline_planner_example_runs_as_written() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plan_offline.py")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, _, rest = done.stdout.partition("\n")
    seen = json.loads(first.removeprefix("plan result seen by the model: "))
    assert seen["success"] is True and seen["tool_calls"] == 2 and seen["result"]["invoices"] > 0
    result = json.loads(rest)
    assert result["success"] is True and result["budget_usage"]["code_runs"] == 1


def test_the_codemode_benchmark_meets_its_bar() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "codemode.py")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("yes") == 3
