"""The inventory at scale: 100,000 tools on SQLite and on PostgreSQL, and calls/s with 1 and 2 servers.

Run: `python benchmarks/scale.py [--tools 100000] [--repeat 200] [--seconds 5]`. Pads both stores with
the same synthetic tools (words drawn with MetaTool's frequencies, random unit vectors tagged with the
local embedding model, so hybrid search has a full matrix to scan), then times craft, list, search
(text and hybrid; every query embedded, no query cache) and inspect in-process, side by side. Last,
`awb start --transport http` processes on one PostgreSQL database serve a trivial tool to 8 concurrent
SDK clients on the same machine for a few seconds: calls/s with one server, then with two.

`--pgvector URL` instead compares, on one PostgreSQL server that has the pgvector extension (`pgserver`
starts PostgreSQL 16 with pgvector from the pgserver wheel in a temporary folder), hybrid search with
vectors in memory (`search.pgvector: off`) against pgvector's HNSW index (`auto`), each in a fresh
database, and the HNSW top 10's overlap with the exact one for random unit queries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp_types import Implementation
from rich.console import Console
from rich.table import Table

from awb.config import Config
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.rows import tool_values
from awb.inventory.vectors import encode_vector
from awb.workbench import Workbench
from ops import TRIVIAL, Words, percentile, postgres_database
from pgvector_bench import compare_pgvector

BAR_SEARCH_P95_MS = 20.0
CLIENTS = 8


#: Every padded tool carries one of these tags (1 in 50 tools each) and the common one.
TAGS = [f"topic{n}" for n in range(50)]
COMMON_TAG = "general"


def synthetic_tools(count: int, rng: random.Random) -> list[Tool]:
    now = datetime.now(UTC)
    words_of = Words(rng)
    tools = []
    for i in range(count):
        words = words_of.sample(10)
        tools.append(
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
                metadata=ToolMetadata(tags=[TAGS[i % len(TAGS)], COMMON_TAG]),
            )
        )
    return tools


def random_vectors(count: int, dim: int, seed: int) -> list[bytes]:
    import numpy as np

    matrix = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return [encode_vector(row.tolist()) for row in matrix]


def bulk_pad(workbench: Workbench, tools: list[Tool], model_id: str | None, dim: int) -> None:
    """Insert every tool (and a vector each) in one transaction: the insert path, minus per-row commits."""
    store: Any = workbench.store
    postgres = bool(workbench.config.inventory_url)
    values = [tool_values(tool, sqlite=not postgres) for tool in tools]
    columns = list(values[0])
    vectors = random_vectors(len(tools), dim, 7) if model_id else []
    if postgres:
        marks = ", ".join("%s" for _ in columns)
        with store._pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO tools ({', '.join(columns)}) VALUES ({marks})", [list(v.values()) for v in values]
            )
            if vectors:
                cursor.executemany(
                    "INSERT INTO tool_vectors (tool_id, model_id, dim, vector) VALUES (%s, %s, %s, %s)",
                    [(t.tool_id, model_id, dim, v) for t, v in zip(tools, vectors, strict=True)],
                )
            conn.execute("ANALYZE tools")
        store.announce("resync", [])
        store._text.mark_all()
        store._cache.clear()
        if store._vectors.active:  # the pgvector path mirrors what was written behind its back
            started = time.perf_counter()
            store._vectors.backfill(store._pool)
            print(f"pgvector: {len(tools):,} vectors mirrored and indexed in {time.perf_counter() - started:.1f} s")
    else:
        marks = ", ".join("?" for _ in columns)
        db = store._db
        with store._lock:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                f"INSERT INTO tools ({', '.join(columns)}) VALUES ({marks})", [list(v.values()) for v in values]
            )
            db.executemany(
                "INSERT INTO tool_vectors (tool_id, model_id, dim, vector) VALUES (?, ?, ?, ?)",
                [(t.tool_id, model_id, dim, v) for t, v in zip(tools, vectors, strict=True)],
            )
            db.execute("COMMIT")


async def measure(config: Config, tools: list[Tool], repeat: int, rng: random.Random) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    async with Workbench(config) as workbench:
        engine = workbench.search_engine
        embedder: Any = engine.embedder
        if embedder is None:
            sys.exit(f"hybrid search is needed (the embed extra): {engine.reason}")
        embedder.wait_loaded()
        engine.query_cache_size = 0
        bulk_pad(workbench, tools, embedder.model_id, embedder.dim)
        words = Words(rng)
        queries = [" ".join(words.sample(3)) for _ in range(repeat)]
        # Warm up: the first search builds the text index copy and loads the vector matrix.
        started = time.perf_counter()
        workbench.search(queries[0])
        results["first search (builds caches)"] = [(time.perf_counter() - started) * 1000]
        crafted: list[str] = []

        async def timed(name: str, count: int, operation: Any) -> None:
            samples = []
            for i in range(count):
                begin = time.perf_counter()
                outcome = operation(i)
                if hasattr(outcome, "__await__"):
                    await outcome
                samples.append((time.perf_counter() - begin) * 1000)
            results[name] = samples

        async def craft(i: int) -> None:
            tool = await workbench.craft(
                {"name": f"scale_{i}_{rng.randrange(1 << 30)}", "description": "scale bench tool", "code": TRIVIAL}
            )
            crafted.append(tool.tool_id)

        await timed("craft", max(repeat // 4, 10), craft)
        await timed("list", repeat, lambda i: workbench.list_tools(limit=20))
        await timed("list by tag (1 in 50)", repeat, lambda i: workbench.list_page(tag=TAGS[i % len(TAGS)], limit=20))
        await timed("list by tag (every tool)", max(repeat // 10, 5), lambda i: workbench.list_page(tag=COMMON_TAG))
        names = [t.name for t in rng.sample(tools, repeat)]
        # What a call by name looks up (deleted tools too, to say so), without running the tool.
        await timed("resolve by name (a call's lookup)", repeat, lambda i: workbench.resolve(names[i]))
        await timed("search text", repeat, lambda i: engine.search(queries[i], 10, mode="text"))
        await timed("search hybrid", repeat, lambda i: workbench.search(queries[i], limit=10))
        # The same queries again with their vectors already embedded (agents repeat queries; the
        # query cache holds 256): what the store and the vector scan cost without the model.
        engine.query_cache_size = len(queries)
        for query in queries:
            engine.search(query, 10)
        await timed("search hybrid, query embedded", repeat, lambda i: workbench.search(queries[i], limit=10))
        pad_ids = [t.tool_id for t in rng.sample(tools, repeat)]
        await timed("inspect", repeat, lambda i: workbench.inspect(pad_ids[i]))
    return results


def start_server(folder: Path, port: int, url: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWB_")}
    env.update(AWB_INVENTORY_URL=url, AWB_PID_FILE=str(folder / f"{port}.pid"), AWB_MAX_TOOLS="200000")
    process = subprocess.Popen(
        [sys.executable, "-m", "awb", "start", "--transport", "http", "--port", str(port)],
        env=env,
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    for line in iter(process.stderr.readline, b""):
        if b"awb: ready on" in line:
            return process
    raise RuntimeError("server did not start")


async def calls_per_second(urls: list[str], seconds: float) -> float:
    async with Client(urls[0]) as setup:
        found = await setup.call_tool("awb_inspect", {"name": "load_probe"})
        if found.is_error:
            await setup.call_tool("awb_craft", {"name": "load_probe", "description": "load probe", "code": TRIVIAL})
    # Each server's first call reads the tool and warms its runtime, and a server builds its search
    # indexes once it serves (seconds at 100k tools, on the same two cores): a search waits for them.
    # None of that is in the window.
    for url in urls:
        async with Client(url) as warm:
            await warm.call_tool("awb_search", {"query": "load probe"})
            for _ in range(3):
                await warm.call_tool("awb_call", {"name": "load_probe", "params": {"x": 1}})
    done = 0
    deadline = time.perf_counter() + seconds

    async def client(url: str, n: int) -> None:
        nonlocal done
        # Each its own name: the workbench tells sessionless clients apart by address and name.
        async with Client(url, client_info=Implementation(name=f"load-client-{n}", version="1")) as session:
            while time.perf_counter() < deadline:
                result = await session.call_tool("awb_call", {"name": "load_probe", "params": {"x": 1}})
                assert not result.is_error, result
                done += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for n in range(CLIENTS):
            tasks.start_soon(client, urls[n % len(urls)], n)
    return done / (time.perf_counter() - started)


async def throughput(url: str, seconds: float) -> dict[int, float]:
    from support import free_port  # tests/support.py: a free loopback port

    rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        processes: list[subprocess.Popen[bytes]] = []
        urls: list[str] = []
        for servers in (1, 2):
            while len(processes) < servers:
                port = free_port()
                process = start_server(Path(tmp), port, url)
                stack.callback(process.wait, 10)
                stack.callback(process.terminate)
                processes.append(process)
                urls.append(f"http://127.0.0.1:{port}/mcp")
            rates[servers] = await calls_per_second(urls, seconds)
    return rates


async def run(count: int, repeat: int, seconds: float) -> None:
    console = Console()
    tools = synthetic_tools(count, random.Random(1))
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        url = stack.enter_context(postgres_database())
        for store in ("sqlite", "postgres"):
            config = Config(inventory_path=Path(tmp) / "inventory.db", max_tools=count + 1000)
            config.search.mode = "hybrid"
            if store == "postgres":
                config = config.model_copy(update={"inventory_url": url})
            results[store] = await measure(config, tools, repeat, random.Random(2))
        rates = await throughput(url, seconds)
    table = Table(title=f"{count:,} tools, {repeat} runs per operation (in-process), ms")
    for column in ["operation", "SQLite p50", "SQLite p95", "PostgreSQL p50", "PostgreSQL p95", "ratio p50"]:
        table.add_column(column, justify="left" if column == "operation" else "right")
    for name, samples in results["sqlite"].items():
        theirs = results["postgres"][name]
        table.add_row(
            name,
            f"{statistics.median(samples):.2f}",
            f"{percentile(samples, 0.95):.2f}",
            f"{statistics.median(theirs):.2f}",
            f"{percentile(theirs, 0.95):.2f}",
            f"{statistics.median(theirs) / statistics.median(samples):.2f}×",
        )
    console.print(table)
    for name in ("search text", "search hybrid", "search hybrid, query embedded"):
        p95 = percentile(results["postgres"][name], 0.95)
        verdict = "yes" if p95 <= BAR_SEARCH_P95_MS else "NO"
        console.print(f"PostgreSQL {name} p95 {p95:.2f} ms (bar ≤ {BAR_SEARCH_P95_MS:.0f} ms): {verdict}")
    console.print(
        f"calls/s, {CLIENTS} SDK clients over HTTP on this machine, one PostgreSQL database: "
        + ", ".join(f"{servers} server{'s' if servers > 1 else ''}: {rate:.0f}" for servers, rate in rates.items())
    )
    print(json.dumps({"rates": rates}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each calls/s run")
    parser.add_argument(
        "--pgvector", metavar="URL", help="compare in-memory and pgvector search on this server ('pgserver': start one)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    if args.pgvector:
        anyio.run(compare_pgvector, args.pgvector, synthetic_tools(args.tools, random.Random(1)), args.repeat, measure)
    else:
        anyio.run(run, args.tools, args.repeat, args.seconds)


if __name__ == "__main__":
    main()
