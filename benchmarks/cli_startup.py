"""How fast `awb` commands start: whole processes, against `python -c pass` in the same run.

Run: `python benchmarks/cli_startup.py [--repeat 15]`. Each command runs as a fresh process of the
venv's `awb` in a temporary workspace made by `awb init` (one crafted tool in it), the rounds
interleaved so that a busy machine slows every row alike. The table gives the median wall time, the
median CPU time (user + system of the process and its children: what the command costs, whatever
else the machine is doing), and both as ratios to a bare interpreter's. Byte code is compiled first,
as an installed package has it.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
AWB = str(BIN / "awb")

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("awb --help", [AWB, "--help"]),
    ("awb --version", [AWB, "--version"]),
    ("awb inventory list", [AWB, "inventory", "list"]),
    ("awb inventory list --json", [AWB, "inventory", "list", "--json"]),
    ("awb inventory search", [AWB, "inventory", "search", "add two numbers"]),
    ("awb doctor", [AWB, "doctor"]),
]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the process and the children it waited for) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


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
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "src" / "awb", quiet=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="awb-cli-bench-") as tmp:
        root = Path(tmp)
        workspace(root, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in COMMANDS}
        for _name, argv in COMMANDS:  # one warm-up round: the page cache, not the command, on first run
            timed(argv, root, env)
        for _ in range(args.repeat):
            for name, argv in COMMANDS:
                samples[name].append(timed(argv, root, env))
    base_wall = statistics.median(w for w, _ in samples["python -c pass"])
    base_cpu = statistics.median(c for _, c in samples["python -c pass"])
    table = Table(title=f"awb start-up, {args.repeat} runs each (median)", title_justify="left")
    for column in ("command", "wall s", "cpu s", "wall - python", "cpu / python"):
        table.add_column(column, justify="left" if column == "command" else "right")
    for name, _ in COMMANDS:
        wall = statistics.median(w for w, _ in samples[name])
        cpu = statistics.median(c for _, c in samples[name])
        table.add_row(
            name, f"{wall:.3f}", f"{cpu:.3f}", f"{wall - base_wall:+.3f}", f"{cpu / max(base_cpu, 1e-3):.1f}x"
        )
    Console().print(table)
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
