"""Per-call overhead of a trivial tool in each sandbox runtime, next to a naive `python -I -c` spawn.

Run: python benchmarks/sandbox.py [--calls N] [--only RUNTIME ...]. Prints median/p90 per call, the
speed-up over the naive spawn, and calls/s with 4 concurrent callers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "sandbox"))

from rich.console import Console
from rich.table import Table

from awb.sandbox.base import Limits, Runtime
from awb.sandbox.cpython import CPythonRuntime
from awb.sandbox.host import HostBridge
from awb.sandbox.javascript import JavaScriptRuntime
from awb.sandbox.monty import MontyRuntime
from awb.sandbox.wasm import WasmRuntime

PY = "def run(params):\n    return params['a'] + 1\n"
JS = "function run(params) { return params.a + 1; }"
WAT = """
(module
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (data (i32.const 16) "2")
  (func (export "alloc") (param $len i32) (result i32)
    (local $p i32) (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $len))) (local.get $p))
  (func (export "run") (param i32 i32) (result i64) (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 1))))
"""
LIMITS = Limits(timeout_ms=5000)
CONCURRENCY = 4


def naive(calls: int) -> list[float]:
    code = "import json,sys\ndef run(params):\n    return params['a'] + 1\nprint(json.dumps(run({'a': 1})))"
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, check=True, env={})
        assert out.stdout.strip() == b"2"
        times.append((time.perf_counter() - started) * 1000)
    return times


def host() -> HostBridge:
    return HostBridge(read_dirs=[], stage=None, max_log_bytes=64 * 1024)


async def sequential(runtime: Runtime, code: str, calls: int, pace_s: float = 0.0) -> list[float]:
    times = []
    for _ in range(calls):
        if pace_s:
            await asyncio.sleep(pace_s)
        started = time.perf_counter()
        result = await runtime.execute(code, {"a": 1}, LIMITS, host())
        times.append((time.perf_counter() - started) * 1000)
        assert result.value == 2, result.value
    return times


async def concurrent(runtime: Runtime, code: str, calls: int) -> float:
    per_caller = max(1, calls // CONCURRENCY)

    async def caller() -> None:
        for _ in range(per_caller):
            await runtime.execute(code, {"a": 1}, LIMITS, host())

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    return per_caller * CONCURRENCY / (time.perf_counter() - started)


def naive_concurrent(calls: int) -> float:
    from concurrent.futures import ThreadPoolExecutor

    per_caller = max(1, calls // CONCURRENCY)
    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda _: naive(per_caller), range(CONCURRENCY)))
    return per_caller * CONCURRENCY / (time.perf_counter() - started)


async def main(calls: int, only: list[str]) -> None:
    naive_times = naive(max(20, calls // 10))
    rows: list[tuple[str, list[float], list[float], float]] = [
        ("naive python -I -c", naive_times, naive_times, naive_concurrent(max(20, calls // 10)))
    ]
    runtimes: list[tuple[str, Runtime, str]] = [
        ("monty", MontyRuntime(pool_size=CONCURRENCY), PY),
        ("cpython", CPythonRuntime(pool_size=CONCURRENCY, max_concurrent=16), PY),
        ("javascript", JavaScriptRuntime(pool_size=CONCURRENCY, max_concurrent=16), JS),
        ("wasm", WasmRuntime(max_concurrent=16), WAT),
    ]
    for name, runtime, code in runtimes:
        if only and name not in only:
            continue
        await runtime.start()
        try:
            await sequential(runtime, code, 10)  # warm-up
            times = await sequential(runtime, code, calls)
            paced = await sequential(runtime, code, calls // 2, pace_s=0.01)
            rate = await concurrent(runtime, code, calls)
        finally:
            await runtime.close()
        rows.append((name, times, paced, rate))
    naive_median = statistics.median(naive_times)
    table = Table(title=f"sandbox per-call overhead (trivial tool, {calls} calls; naive: {len(naive_times)})")
    columns = (
        "runtime",
        "median ms",
        "p90 ms",
        "× faster than naive",
        "median ms, 1 call/10 ms",
        "× faster (paced)",
        f"calls/s ({CONCURRENCY} callers)",
    )
    for column in columns:
        table.add_column(column, justify="right" if column != "runtime" else "left")
    results: dict[str, Any] = {}
    for name, times, paced, rate in rows:
        median = statistics.median(times)
        paced_median = statistics.median(paced)
        p90 = statistics.quantiles(times, n=10)[-1]
        results[name] = median
        results[name + "/paced"] = paced_median
        table.add_row(
            name,
            f"{median:.2f}",
            f"{p90:.2f}",
            f"{naive_median / median:.1f}",
            f"{paced_median:.2f}",
            f"{naive_median / paced_median:.1f}",
            f"{rate:.0f}",
        )
    Console().print(table)
    verdicts = [
        *(
            (f"cpython ≥ 10× faster than naive spawn ({how})", naive_median / results[key] >= 10)
            for how, key in (("back to back", "cpython"), ("paced", "cpython/paced"))
            if key in results
        ),
        *((f"{n} ≤ 3 ms median", results[n] <= 3.0) for n in ("monty", "javascript", "wasm") if n in results),
    ]
    for label, ok in verdicts:
        print(("PASS " if ok else "MISS ") + label)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--only", nargs="*", default=[], help="runtimes to measure (default: all)")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.only))
