"""How fast `awb` commands start: whole processes, against `python -c pass` in the same run.

Run: `python benchmarks/cli_startup.py [--repeat 15]`. Each command runs as a fresh process of the
venv's `awb` in a temporary workspace made by `awb init` (one crafted tool in it, with its vector when
the `embed` extra is installed, so a default search is hybrid and loads the model), the rounds
interleaved so that a busy machine slows every row alike. The table gives the median wall time, the
median CPU time (user + system of the process and its children: what the command costs, whatever
else the machine is doing), and both as ratios to a bare interpreter's. Byte code is compiled first,
as an installed package has it.

`awb start --transport http --port 0` is timed twice per round: to its "ready" line (CPU: its process
tree's when the line comes, sandbox workers included), and to the answer to a first `tools/call`
(`awb_list`) from an SDK client that connects once the line is out.

`awb inventory search` is timed once more while the workspace's `awb start` serves (the CLI asks the
server, which has its model loaded).

`--before DIR` also runs every `awb` command on another copy of the code (DIR is its `src` folder,
e.g. `git archive main src | tar -x -C /tmp/before`, then `--before /tmp/before/src`), interleaved
with this one's in the same rounds, and adds its columns: on a shared machine a comparison is only
fair within one run. Each copy runs in a workspace its own `awb init` made; for the served search each
copy's server serves its workspace, both at once, and the two copies' searches alternate.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from rich.console import Console
from rich.table import Table

from http_load import serving, tree_cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
AWB = str(BIN / "awb")

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    # The floor under `awb start`: the MCP SDK's server and protocol types, imported and nothing else.
    ("python: import MCP SDK server", [sys.executable, "-c", "import mcp.server.lowlevel, mcp_types"]),
    ("awb --help", [AWB, "--help"]),
    ("awb --version", [AWB, "--version"]),
    ("awb inventory list", [AWB, "inventory", "list"]),
    ("awb inventory list --json", [AWB, "inventory", "list", "--json"]),
    ("awb inventory search (hybrid)", [AWB, "inventory", "search", "add two numbers"]),
    ("awb inventory search --text", [AWB, "inventory", "search", "add two numbers", "--text"]),
    ("awb doctor", [AWB, "doctor"]),
    ("awb doctor --quick", [AWB, "doctor", "--quick"]),
]
SERVED_SEARCH = "awb inventory search (hybrid, the workspace's server running)"
START_READY = "awb start: ready line"
START_ANSWERED = "awb start: first call answered"


def with_source(env: dict[str, str], source: Path | None) -> dict[str, str]:
    """`env` running the code under `source` (ahead of the installed package), or as it is."""
    return env if source is None else {**env, "PYTHONPATH": str(source)}


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the process and the children it waited for) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def timed_start(cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from spawning `awb start --transport http --port 0` to its ready line, the CPU seconds
    its process tree had used by then, and seconds to the answer to a first tool call."""
    started = time.perf_counter()
    with serving(cwd, env) as (process, url, ready):
        cpu = tree_cpu_seconds(process.pid)
        anyio.run(_first_call, url)
        answered = time.perf_counter() - started
    return ready, cpu, answered


def served_searches(
    workspaces: dict[str, tuple[Path, dict[str, str]]], repeat: int
) -> dict[str, list[tuple[float, float]]]:
    """`awb inventory search` timed `repeat` times per variant, each variant's `awb start` serving its own
    copy of the workspace the whole time, the variants' searches alternated (so a machine that slows
    down part-way slows both alike)."""
    argv = [AWB, "inventory", "search", "add two numbers"]
    samples: dict[str, list[tuple[float, float]]] = {variant: [] for variant in workspaces}
    with contextlib.ExitStack() as servers:
        for cwd, env in workspaces.values():
            servers.enter_context(serving(cwd, env))
            timed(argv, cwd, env)  # the server's first search waits for its model and indexes
        for round_ in range(repeat):
            for variant, (cwd, env) in list(workspaces.items())[:: 1 if round_ % 2 == 0 else -1]:
                samples[variant].append(timed(argv, cwd, env))
    return samples


async def _first_call(url: str) -> None:
    async with Client(url) as session:
        result = await session.call_tool("awb_list", {})
        if result.is_error:
            raise RuntimeError(f"awb_list failed: {result.structured_content}")


def workspace(root: Path, env: dict[str, str]) -> None:
    subprocess.run([AWB, "init", str(root)], env=env, check=True, stdout=subprocess.DEVNULL)
    craft = (
        "import anyio\n"
        "from awb.config import load_config\n"
        "from awb.workbench import Workbench\n"
        "async def main():\n"
        "    async with Workbench(load_config()) as wb:\n"
        "        await wb.craft({'name': 'add_numbers', 'description': 'Add two numbers', "
        "'code': 'def run(params):\\n    return params[\"a\"] + params[\"b\"]\\n', "
        "'input_schema': {'type': 'object'}})\n"
        "anyio.run(main)\n"
    )
    subprocess.run([sys.executable, "-c", craft], cwd=root, env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15, help="runs of each command (interleaved)")
    parser.add_argument("--before", type=Path, help="the `src` folder of code to compare with, in the same rounds")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "src" / "awb", quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    variants: dict[str, Path | None] = {"now": None}
    if args.before is not None:
        compileall.compile_dir(args.before / "awb", quiet=1)
        variants["before"] = args.before.resolve()
    names = [name for name, _ in COMMANDS] + [SERVED_SEARCH, START_READY, START_ANSWERED]
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {(n, v): [] for n in names for v in variants}
    with tempfile.TemporaryDirectory(prefix="awb-cli-bench-") as tmp:
        # A workspace per copy, made by that copy's `awb init`: a config file lists every setting its
        # code knows, and older code refuses settings it does not know.
        roots: dict[str, Path] = {}
        for variant, source in variants.items():
            roots[variant] = Path(tmp) / variant
            roots[variant].mkdir()
            workspace(roots[variant], with_source(env, source))
        for variant, source in variants.items():  # one warm-up round: the page cache, not the command, on first run
            for _name, argv in COMMANDS:
                timed(argv, roots[variant], with_source(env, source))
            timed_start(roots[variant], with_source(env, source))
        for round_ in range(args.repeat):
            # The two copies take turns going first: the second of a pair runs measurably faster here.
            order = list(variants.items())[:: 1 if round_ % 2 == 0 else -1]
            for name, argv in COMMANDS:
                for variant, source in order:
                    if name.startswith("python") and variant != "now":
                        continue
                    samples[name, variant].append(timed(argv, roots[variant], with_source(env, source)))
            for variant, source in order:
                ready, cpu, answered = timed_start(roots[variant], with_source(env, source))
                samples[START_READY, variant].append((ready, cpu))
                samples[START_ANSWERED, variant].append((answered, float("nan")))
        # Last, with a server of each workspace running, both at once: the CLI asks it (its model is loaded).
        served = {variant: (roots[variant], with_source(env, source)) for variant, source in variants.items()}
        for variant, runs in served_searches(served, args.repeat).items():
            samples[SERVED_SEARCH, variant] = runs
    base_wall = statistics.median(w for w, _ in samples["python -c pass", "now"])
    base_cpu = statistics.median(c for _, c in samples["python -c pass", "now"])
    title = f"awb start-up, {args.repeat} runs each (median)" + (f"; before: {args.before}" if args.before else "")
    table = Table(title=title, title_justify="left")
    columns = ["command", "wall s", "cpu s", "wall - python", "cpu / python"]
    if args.before is not None:
        columns += ["before: wall s", "before: cpu s"]
    for column in columns:
        table.add_column(column, justify="left" if column == "command" else "right")
    for name in names:
        row = [name]
        for variant in variants:
            runs = samples[name, variant]
            if not runs:
                row += ["", ""]
                continue
            wall = statistics.median(w for w, _ in runs)
            # The client's CPU is not the server's: wall time only for the first call.
            cpu = statistics.median(c for _, c in runs) if name != START_ANSWERED else None
            cells = [f"{wall:.3f}", "" if cpu is None else f"{cpu:.3f}"]
            if variant == "now":
                ratio = "" if cpu is None else f"{cpu / max(base_cpu, 1e-3):.1f}x"
                cells += [f"{wall - base_wall:+.3f}", ratio]
            row += cells
        table.add_row(*row)
    Console().print(table)
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
