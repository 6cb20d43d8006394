"""The workbench's own share of an `awb_call`: CPU per call by thread, in process, with no HTTP in between.

Run: `python benchmarks/call_path.py [--calls 8000] [--concurrency 8] [--rounds 3] [--before SRC]
[--store postgres]`.
Each round runs a fresh process that opens the workbench on a temporary inventory with one trivial Monty
tool, calls it through the MCP face (`McpFace.call("awb_call", ...)`: argument checks, resolving, the
sandbox run, the call record, the MCP result) `--calls` times from `--concurrency` tasks at once, and
reads each thread's CPU time from /proc: the event loop's thread, the other Python threads (the Monty
turn threads, to-thread workers), the sandbox pool's runtime thread (tokio) and the worker processes.
What `benchmarks/http_load.py` measures adds the HTTP server and the clients on top of this; this is
the part the workbench's own code decides, and it moves far less from run to run.

`--store postgres` keeps the inventory in a fresh PostgreSQL database (on POSTGRES_BENCH_URL's server,
default the local one) instead of a SQLite file; the table's "database" column is then the CPU of every
PostgreSQL server process on the machine, counted in the total.
`--before SRC` runs another copy of the code (its `src` folder, e.g. `git archive <commit> src | tar -x
-C /tmp/before`) in the same rounds, the two taking turns, and prints both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROUND = r"""
import json, os, sys, time
from pathlib import Path
import anyio
from awb.config import Config
from awb.server.mcp import build_server
from awb.workbench import Workbench

def stat(path):
    # (command name, parent pid, CPU seconds) from a /proc stat file
    raw = path.read_text()
    fields = raw.rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return raw.split("(", 1)[1].rsplit(")", 1)[0], int(fields[1]), cpu

def threads():
    found = {}
    for task in Path("/proc/self/task").iterdir():
        name, _, cpu = stat(task / "stat")
        found[(task.name, name)] = cpu
    return found

def processes():
    # CPU seconds of the sandbox workers (this process's children) and of the PostgreSQL server's
    # processes on this machine (none with SQLite), from one walk of /proc
    workers = database = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                name, parent, cpu = stat(entry / "stat")
            except OSError:
                continue
            if parent == os.getpid():
                workers += cpu
            elif name == "postgres":
                database += cpu
    return workers, database

async def main(inventory, calls, concurrency, url):
    config = Config(inventory_path=inventory, inventory_url=url or None)
    config.sandbox.max_concurrent = max(concurrency, config.sandbox.max_concurrent)
    async with Workbench(config) as workbench:
        await workbench.craft({"name": "identity", "description": "Return the number it is given.",
            "code": "def run(params):\n    return {'x': params.get('x', 0)}\n",
            "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}})
        face = build_server(workbench)
        arguments = {"name": "identity", "params": {"x": 1}}
        async def caller(n):
            for _ in range(n):
                result = await face.call("awb_call", arguments)
                assert not result.is_error, result
        await caller(300)  # warm: workers, caches, compiled schemas
        before, (workers_before, database_before), started = threads(), processes(), time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(caller, calls // concurrency)
        elapsed, after, (workers_after, database_after) = time.perf_counter() - started, threads(), processes()
    done = calls // concurrency * concurrency
    split = {"event loop": 0.0, "other Python threads": 0.0, "tokio": 0.0}
    for key, cpu in after.items():
        spent = cpu - before.get(key, 0.0)
        if key[0] == str(os.getpid()):
            split["event loop"] += spent
        elif key[1].startswith("tokio"):
            split["tokio"] += spent
        else:
            split["other Python threads"] += spent
    split["sandbox workers"] = workers_after - workers_before
    split["database"] = database_after - database_before if url else 0.0
    print(json.dumps({"wall": elapsed / done * 1e6, **{k: v / done * 1e6 for k, v in split.items()}}))

anyio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
"""

COLUMNS = ("wall", "event loop", "other Python threads", "tokio", "sandbox workers", "database")


@contextmanager
def inventory_url(store: str) -> Iterator[str]:
    """An empty URL for SQLite (a file in the round's folder); for PostgreSQL a fresh database, dropped after."""
    if store != "postgres":
        yield ""
        return
    from ops import postgres_database

    with postgres_database() as url:
        yield url


def one_round(source: Path | None, calls: int, concurrency: int, store: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    with tempfile.TemporaryDirectory(prefix="awb-call-path-") as tmp, inventory_url(store) as url:
        out = subprocess.run(
            [sys.executable, "-c", ROUND, str(Path(tmp) / "inventory.db"), str(calls), str(concurrency), url],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the `src` folder of code to compare with, in the same rounds")
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the inventory: a SQLite file, or a fresh PostgreSQL database on POSTGRES_BENCH_URL's server",
    )
    args = parser.parse_args()
    variants: dict[str, Path | None] = {"now": None}
    if args.before is not None:
        variants["before"] = args.before.resolve()
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        for name, source in list(variants.items())[:: 1 if round_ % 2 == 0 else -1]:
            samples[name].append(one_round(source, args.calls, args.concurrency, args.store))
    title = (
        f"awb_call in process ({args.store}): {args.calls} calls, {args.concurrency} at once, "
        f"median of {args.rounds} rounds"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("code")
    for column in COLUMNS:
        table.add_column(f"{column} us/call" if column == "wall" else f"{column} cpu us/call", justify="right")
    table.add_column("cpu us/call", justify="right")
    for name, rounds in samples.items():
        medians = {c: statistics.median(r[c] for r in rounds) for c in COLUMNS}
        total = statistics.median(sum(r[c] for c in COLUMNS if c != "wall") for r in rounds)
        table.add_row(name, *(f"{medians[c]:.0f}" for c in COLUMNS), f"{total:.0f}")
    Console().print(table)
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
