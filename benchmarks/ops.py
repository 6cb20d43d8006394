"""Workbench operation latency with 1,000 and 10,000 tools, in-process and over stdio.

Run: `python benchmarks/ops.py [--sizes 1000,10000] [--repeat 200] [--store postgres]`. Prints one table
per inventory size. `--store postgres` instead times the in-process operations on SQLite and on a fresh
PostgreSQL database (POSTGRES_BENCH_URL, default the local server) side by side, with the ratio.
Over stdio, each operation is set against a bare SDK echo server in the same run: the two servers
run side by side and their calls alternate, so the ratio column (awb p50 / echo p50 of the echo calls
made between that operation's calls) compares them on the same machine at the same moment. Ratios
survive a noisy, shared machine; absolute numbers don't. The stdio operations run twice: on the
server's default transport (piped stdin/stdout on the event loop) and on the MCP SDK's own stdio
transport, the one the echo server uses, which shows what the workbench's handlers add by themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
from mcp import Client, StdioServerParameters
from rich.console import Console
from rich.table import Table

from awb.config import Config
from awb.inventory.models import Tool
from awb.search.fts import STOP_WORDS
from awb.workbench import Workbench

HERE = Path(__file__).resolve().parent
TRIVIAL = "def run(params):\n    return params.get('x', 0)\n"
WORDS = (
    "image resize crop convert parse csv json yaml text count words translate date time zone weather "
    "temperature currency exchange rate stock price email send validate url encode decode base64 hash "
    "sha256 compress zip pdf extract table sort filter merge split join math sum average median prime "
    "factor matrix vector distance geo route map search index rank score sentiment summary keyword"
).split()


#: The benchmark data folder (BENCH_DATA_DIR, default ../shared/bench beside the repository).
BENCH = Path(os.environ.get("BENCH_DATA_DIR", HERE.parent.parent / "shared" / "bench"))
METATOOL = BENCH / "retrieval" / "metatool" / "tools.jsonl"


def vocabulary() -> dict[str, int]:
    """Words of real tool descriptions (MetaTool's 199 tools when present) with their frequencies.

    Padding text draws words with these frequencies, so a padded inventory has the word statistics of
    real tool descriptions; a tiny uniform vocabulary would make every query match a quarter of the
    inventory, which no real one does.
    """
    counts: dict[str, int] = {}
    if METATOOL.exists():
        for line in METATOOL.read_text(encoding="utf-8").splitlines():
            for word in re.findall(r"[a-z]{3,}", json.loads(line)["description"].lower()):
                if word not in STOP_WORDS:
                    counts[word] = counts.get(word, 0) + 1
    for word in WORDS:
        counts.setdefault(word, 1)
    return counts


class Words:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        counts = vocabulary()
        self.words = list(counts)
        self.weights = [float(counts[w]) for w in self.words]

    def sample(self, k: int) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=k)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pad(workbench: Workbench, count: int, rng: random.Random) -> None:
    """Fill the inventory through the store's own insert path (craft minus the sandbox admission)."""
    now = datetime.now(UTC)
    words_of = Words(rng)
    for i in range(count):
        words = words_of.sample(10)
        workbench.store.add_tool(
            Tool(
                tool_id=f"tool_pad{i:012d}",
                name=f"{words[0]}_{words[1]}_{i}",
                description=" ".join(words),
                language="python",
                runtime="monty",
                code=TRIVIAL,
                input_schema={"type": "object"},
                created_at=now,
                updated_at=now,
                usage_count=rng.randint(0, 80),
                memory_level=rng.choice(["short_term", "medium_term", "long_term", "archived"]),
            )
        )


async def timed(repeat: int, operation: Callable[[int], Awaitable[Any]]) -> list[float]:
    samples = []
    for i in range(repeat):
        started = time.perf_counter()
        await operation(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def in_process(workbench: Workbench, repeat: int, rng: random.Random) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    words = Words(rng)
    crafted: list[str] = []
    named: list[str] = []

    async def craft(i: int) -> None:
        tool = await workbench.craft(
            {
                "name": f"bench_craft_{i}_{rng.random():.6f}".replace(".", ""),
                "description": "bench tool",
                "code": TRIVIAL,
            }
        )
        crafted.append(tool.tool_id)
        named.append(tool.name)

    async def list_(i: int) -> None:
        workbench.list_tools(limit=20)

    queries = [" ".join(words.sample(3)) for _ in range(repeat)]

    async def search(i: int) -> None:
        workbench.search(queries[i], limit=10)

    async def inspect(i: int) -> None:
        workbench.inspect(crafted[i % len(crafted)])

    async def call(i: int) -> None:
        await workbench.call(crafted[0], {"x": i})

    async def call_by_name(i: int) -> None:  # as agents call: by name, which deleted tools may have too
        await workbench.call(named[0], {"x": i})

    async def delete(i: int) -> None:
        workbench.delete(crafted[i])

    for name, operation in [
        ("craft", craft),
        ("list", list_),
        ("search", search),
        ("inspect", inspect),
        ("call (trivial)", call),
        ("call by name", call_by_name),
        ("delete", delete),
    ]:
        results[name] = await timed(repeat, operation)
    return results


async def interleaved(
    repeat: int, echo: Callable[[int], Awaitable[Any]], operation: Callable[[int], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    """Time `operation` and the echo call alternately, so both see the same machine at the same moment."""
    ours: list[float] = []
    baseline: list[float] = []
    for i in range(repeat):
        for call, samples in ((echo, baseline), (operation, ours)):
            started = time.perf_counter()
            await call(i)
            samples.append((time.perf_counter() - started) * 1000)
    return ours, baseline


async def over_stdio(
    inventory: Path, repeat: int, rng: random.Random, max_tools: int, transport: str = "auto"
) -> dict[str, tuple[list[float], list[float]]]:
    """Each operation over stdio with its own interleaved echo samples: {name: (awb, echo)}."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env["AWB_STDIO_TRANSPORT"] = transport
    env["AWB_INVENTORY_PATH"] = str(inventory)
    env["AWB_PID_FILE"] = str(inventory.parent / "awb.pid")
    env["AWB_MAX_TOOLS"] = str(max_tools)
    # The server logs every call at INFO, as it does for an MCP host that keeps its stderr in a file.
    env["AWB_LOG_FILE"] = str(inventory.parent / "awb.log")
    awb = StdioServerParameters(command=sys.executable, args=["-m", "awb", "start", "--transport", "stdio"], env=env)
    echo = StdioServerParameters(command=sys.executable, args=[str(HERE / "echo_server.py")], env=env)
    words = Words(rng)
    queries = [" ".join(words.sample(3)) for _ in range(repeat)]
    results: dict[str, tuple[list[float], list[float]]] = {}
    async with Client(echo) as bare, Client(awb) as client:
        await bare.list_tools()
        await client.list_tools()
        found = await client.call_tool("awb_inspect", {"name": "stdio_bench"})
        assert found.structured_content is not None, found
        if not found.is_error:  # crafted by the run on the other transport
            tool_id = found.structured_content["tool"]["tool_id"]
        else:
            crafted = await client.call_tool(
                "awb_craft", {"name": "stdio_bench", "description": "bench tool", "code": TRIVIAL}
            )
            assert crafted.structured_content is not None and not crafted.is_error, crafted
            tool_id = crafted.structured_content["tool_id"]

        async def echo_call(i: int) -> Any:
            return await bare.call_tool("echo", {"x": i})

        operations: dict[str, Callable[[int], Awaitable[Any]]] = {
            "list": lambda i: client.call_tool("awb_list", {}),
            "search": lambda i: client.call_tool("awb_search", {"query": queries[i]}),
            "inspect": lambda i: client.call_tool("awb_inspect", {"tool_id": tool_id}),
            "call (trivial)": lambda i: client.call_tool("awb_call", {"tool_id": tool_id, "params": {"x": i}}),
        }
        for name, operation in operations.items():
            await interleaved(max(repeat // 10, 5), echo_call, operation)  # warm both sides first
            results[name] = await interleaved(repeat, echo_call, operation)
    return results


BARS_IN_PROCESS = {"list": 1.0, "search": 1.0, "inspect": 1.0, "delete": 1.0, "craft": 5.0}
BARS_STDIO = {"list": 1.5, "search": 1.5, "inspect": 1.5, "call (trivial)": 2.0}


async def run(sizes: list[int], repeat: int) -> None:
    console = Console()
    for size in sizes:
        rng = random.Random(size)
        with tempfile.TemporaryDirectory() as tmp:
            inventory = Path(tmp) / "inventory.db"
            config = Config(inventory_path=inventory, max_tools=size + 10 * repeat + 100)
            started = time.perf_counter()
            async with Workbench(config) as workbench:
                pad(workbench, size, rng)
                padded = time.perf_counter() - started
                local = await in_process(workbench, repeat, rng)
            remote = await over_stdio(inventory, repeat, rng, config.max_tools)
            # The same with the SDK's own stdio transport: what the workbench's handlers add, alone.
            remote_sdk = await over_stdio(inventory, repeat, rng, config.max_tools, transport="sdk")
        table = Table(title=f"{size:,} tools in the inventory (padded in {padded:.1f} s), {repeat} runs each")
        for column in ["operation", "where", "p50 ms", "p95 ms", "vs echo (p50)", "bar", "ok"]:
            table.add_column(column, justify="right" if column not in ("operation", "where") else "left")
        for name, samples in local.items():
            p50 = statistics.median(samples)
            bar = BARS_IN_PROCESS.get(name)
            ok = "" if bar is None else ("yes" if p50 <= bar else "NO")
            table.add_row(
                name,
                "in-process",
                f"{p50:.3f}",
                f"{percentile(samples, 0.95):.3f}",
                "",
                "" if bar is None else f"≤ {bar} ms",
                ok,
            )
        echo_all = [sample for _, echo_samples in remote.values() for sample in echo_samples]
        table.add_row(
            "echo (bare SDK server)",
            "stdio",
            f"{statistics.median(echo_all):.3f}",
            f"{percentile(echo_all, 0.95):.3f}",
            "1.00×",
            "",
            "",
        )
        rows = [(name, "stdio", pair, BARS_STDIO.get(name)) for name, pair in remote.items()]
        rows += [(name, "stdio, SDK transport", pair, None) for name, pair in remote_sdk.items()]
        for name, where, (samples, echo_samples), bar in rows:
            p50 = statistics.median(samples)
            # Against the echo calls made between this operation's own calls.
            ratio = p50 / statistics.median(echo_samples)
            ok = "" if bar is None else ("yes" if ratio <= bar else "NO")
            table.add_row(
                name,
                where,
                f"{p50:.3f}",
                f"{percentile(samples, 0.95):.3f}",
                f"{ratio:.2f}×",
                "" if bar is None else f"≤ {bar}× echo",
                ok,
            )
        console.print(table)


#: At 10,000 tools no PostgreSQL operation may take more than this times its SQLite p50.
BAR_POSTGRES_RATIO = 3.0
POSTGRES_URL = os.environ.get("POSTGRES_BENCH_URL", "postgresql://postgres@127.0.0.1:5432/test")


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database on the PostgreSQL server, dropped afterwards."""
    import psycopg

    name = f"awb_bench_{os.getpid()}_{random.randrange(1 << 30)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(POSTGRES_URL)._replace(path="/" + name))
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def compare_stores(sizes: list[int], repeat: int) -> None:
    """The in-process operations on SQLite and PostgreSQL, same inventory, same operations, one table."""
    console = Console()
    for size in sizes:
        results: dict[str, dict[str, list[float]]] = {}
        padded: dict[str, float] = {}
        for store in ("sqlite", "postgres"):
            rng = random.Random(size)
            with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
                config = Config(inventory_path=Path(tmp) / "inventory.db", max_tools=size + 10 * repeat + 100)
                if store == "postgres":
                    config = config.model_copy(update={"inventory_url": stack.enter_context(postgres_database())})
                started = time.perf_counter()
                async with Workbench(config) as workbench:
                    pad(workbench, size, rng)
                    padded[store] = time.perf_counter() - started
                    results[store] = await in_process(workbench, repeat, rng)
        table = Table(
            title=f"{size:,} tools, {repeat} runs each, in-process (padded: SQLite {padded['sqlite']:.0f} s, "
            f"PostgreSQL {padded['postgres']:.0f} s)"
        )
        for column in ["operation", "SQLite p50", "SQLite p95", "PostgreSQL p50", "PostgreSQL p95", "ratio p50"]:
            table.add_column(column, justify="left" if column == "operation" else "right")
        table.add_column("bar")
        for name, samples in results["sqlite"].items():
            theirs = results["postgres"][name]
            ratio = statistics.median(theirs) / statistics.median(samples)
            ok = "yes" if ratio <= BAR_POSTGRES_RATIO else "NO"
            table.add_row(
                name,
                f"{statistics.median(samples):.3f}",
                f"{percentile(samples, 0.95):.3f}",
                f"{statistics.median(theirs):.3f}",
                f"{percentile(theirs, 0.95):.3f}",
                f"{ratio:.2f}×",
                f"≤ {BAR_POSTGRES_RATIO:.0f}×: {ok}" if size >= 10_000 else "",
            )
        console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="inventory sizes, comma separated")
    parser.add_argument("--repeat", type=int, default=200, help="runs per operation")
    parser.add_argument(
        "--store", choices=["sqlite", "postgres"], default="sqlite", help="postgres: SQLite and PostgreSQL side by side"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    anyio.run(compare_stores if args.store == "postgres" else run, sizes, args.repeat)


if __name__ == "__main__":
    main()
