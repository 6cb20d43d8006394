"""Streamable HTTP throughput: the workbench's `awb_call` against the MCP SDK's own server's echo tool.

Run: `python benchmarks/http_load.py [--clients 8] [--seconds 5] [--rounds 5] [--echo-json-response]
[--before SRC]`.
The benchmark starts both servers on loopback: `awb start --transport http --port 0` in a temporary
workspace (one trivial tool crafted in it, run in the sandbox on every call; requests answered as
configured, one JSON body each by default), and the SDK's `MCPServer` with one `echo` tool, served by the
SDK's own `run_streamable_http_async` with its defaults (SSE responses; `--echo-json-response` gives it
JSON responses too, for a like-for-like comparison), log level WARNING for both, so neither writes an
access-log line per request. The same client code drives both: `--clients` concurrent SDK clients,
each with its own name (2026-07-28 clients have no session: the workbench tells them apart by it),
calling in a loop for `--seconds`. Rounds alternate between the servers so a busy machine slows both alike; the table gives calls/s per round, the workbench's ratio to the echo
server, each server's CPU per call (its process tree, sandbox workers included), which a busy machine
disturbs far less than throughput, and the clients' CPU per call (one process drives them all: on a
small machine they share its cores with the server). It also times `awb start` from spawn to its
"ready" line.

`--before SRC` serves another copy of the workbench's code too (its `src` folder, e.g. `git archive
<commit> src | tar -x -C /tmp/before`), measured in the same rounds, so a change is judged against
the code it changes under the same load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp_types import Implementation
from rich.console import Console
from rich.table import Table

BIN = Path(sys.executable).parent
TRIVIAL = {
    "name": "bench_identity",
    "description": "Return the number it is given.",
    "code": "def run(params):\n    return {'x': params.get('x', 0)}\n",
    "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
}
ECHO_SERVER = """
import sys
import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo", log_level="WARNING")


@server.tool()
def echo(x: int = 0) -> dict[str, int]:
    \"\"\"Return the number it is given.\"\"\"
    return {"x": x}


print("ready", flush=True)
json_response = sys.argv[2] == "json"
anyio.run(lambda: server.run_streamable_http_async(host="127.0.0.1", port=int(sys.argv[1]), json_response=json_response))
"""


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) used so far by process `root` and every live descendant (the
    workbench's sandbox workers run the tool, so they count), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, ..., utime (12th), stime (13th), cutime, cstime.
        stats[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / ticks)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo.extend(child for child, (parent, _) in stats.items() if parent == pid)
    return total


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(cwd: Path, env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], str, float]]:
    """`awb start --transport http --port 0` for the length of the block: the process, its URL from the
    ready line, and seconds from spawning it to that line."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(BIN / "awb"), "start", "--transport", "http", "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        for raw in iter(process.stderr.readline, b""):
            found = re.search(rb"awb: ready on (\S+)", raw)
            if found:
                break
        else:
            raise RuntimeError("awb start exited before it was ready")
        ready = time.perf_counter() - started
        # Keep reading: a server whose stderr pipe fills up blocks on its next log line.
        threading.Thread(target=process.stderr.read, daemon=True).start()
        yield process, found.group(1).decode(), ready
    finally:
        process.terminate()
        process.wait(timeout=30)


def start_echo(env: dict[str, str], json_response: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    answers = "json" if json_response else "sse"
    process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(port), answers], env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.readline()
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the "ready" print comes before uvicorn binds
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, url
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("echo server did not start")


async def load(
    url: str, tool: str, arguments: dict[str, Any], clients: int, seconds: float, server_pid: int
) -> tuple[float, float, float]:
    """Calls per second that `clients` concurrent sessions get through in `seconds`, the server's CPU
    milliseconds per call (its process tree) and the clients' (this process)."""
    done = 0
    failures = 0

    async def client(n: int) -> None:
        nonlocal done, failures
        # Each its own name: 2026-07-28 clients have no session, and the workbench tells them apart by
        # address and name (one client may hold only its share of the execution slots).
        async with Client(url, client_info=Implementation(name=f"load-client-{n}", version="1")) as session:
            await session.call_tool(tool, arguments)  # warm: the session is set up before the clock
            await ready.wait()
            while time.perf_counter() < stop:
                result = await session.call_tool(tool, arguments)
                if result.is_error:
                    failures += 1
                done += 1

    ready = anyio.Event()
    stop = float("inf")
    async with anyio.create_task_group() as tasks:
        for n in range(clients):
            tasks.start_soon(client, n)
        await anyio.sleep(1.0)  # let every client connect and make its first call
        cpu_before = tree_cpu_seconds(server_pid)
        client_before = time.process_time()
        begun = time.perf_counter()
        stop = begun + seconds
        done = 0
        ready.set()
    elapsed = time.perf_counter() - begun
    client_cpu = time.process_time() - client_before
    cpu = tree_cpu_seconds(server_pid) - cpu_before
    if failures:
        raise RuntimeError(f"{failures} calls failed against {url}")
    calls = max(done, 1)
    return done / elapsed, cpu * 1000 / calls, client_cpu * 1000 / calls


async def craft(url: str) -> None:
    async with Client(url) as session:
        result = await session.call_tool("awb_craft", TRIVIAL)
        if result.is_error:
            raise RuntimeError(f"craft failed: {result.structured_content}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--echo-json-response",
        action="store_true",
        help="the echo server answers with JSON bodies too (SDK default: SSE)",
    )
    parser.add_argument(
        "--before", type=Path, help="the `src` folder of code to compare with: a second workbench, in the same rounds"
    )
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    servers = [("awb", env)]
    if args.before is not None:
        servers.append(("before", {**env, "PYTHONPATH": str(args.before.resolve())}))
    call = {"name": TRIVIAL["name"], "params": {"x": 1}}
    rows: list[tuple[str, int, float, float, float, float, float, float]] = []
    with contextlib.ExitStack() as stack:
        workbenches = []
        for label, server_env in servers:
            workspace = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="awb-http-bench-")))
            subprocess.run(
                [str(BIN / "awb"), "init", str(workspace)], env=server_env, check=True, stdout=subprocess.DEVNULL
            )
            process, url, ready_seconds = stack.enter_context(serving(workspace, server_env))
            anyio.run(craft, url)
            workbenches.append((label, process, url, ready_seconds))
        echo, echo_url = start_echo(env, args.echo_json_response)
        stack.callback(echo.wait, 15)
        stack.callback(echo.terminate)
        for round_no in range(1, args.rounds + 1):
            measured = [
                (label, *anyio.run(load, url, "awb_call", call, args.clients, args.seconds, process.pid))
                for label, process, url, _ in workbenches
            ]
            echo_rate, echo_cpu, echo_client = anyio.run(
                load, echo_url, "echo", {"x": 1}, args.clients, args.seconds, echo.pid
            )
            for label, rate, cpu, client in measured:
                rows.append((label, round_no, rate, echo_rate, cpu, echo_cpu, client, echo_client))
    echo_answers = "JSON" if args.echo_json_response else "SSE"
    title = f"streamable HTTP, {args.clients} clients, {args.seconds:g} s per round (echo answers with {echo_answers})"
    table = Table(title=title, title_justify="left")
    columns = (
        "code",
        "round",
        "awb_call calls/s",
        "SDK echo calls/s",
        "ratio",
        "awb cpu ms/call",
        "echo cpu ms/call",
        "client cpu ms/call (awb, echo)",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for label, round_no, rate, echo_rate, cpu, echo_cpu, client, echo_client in rows:
        table.add_row(
            label,
            str(round_no),
            f"{rate:.0f}",
            f"{echo_rate:.0f}",
            f"{rate / echo_rate:.2f}x",
            f"{cpu:.2f}",
            f"{echo_cpu:.2f}",
            f"{client:.2f}, {echo_client:.2f}",
        )
    for label, *_ in servers:
        mine = [row for row in rows if row[0] == label]
        ratio = statistics.median(row[2] / row[3] for row in mine)
        cpu = statistics.median(row[4] for row in mine)
        table.add_row(label, "median", "", "", f"{ratio:.2f}x", f"{cpu:.2f}", "", "")
    Console(width=132).print(table)
    for label, _, _, ready_seconds in workbenches:
        print(f"awb start to ready ({label}): {ready_seconds:.2f} s (spawn to the ready line)")
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
