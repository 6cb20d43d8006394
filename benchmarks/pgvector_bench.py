"""`scale.py --pgvector URL`: hybrid search with vectors in each server's memory against pgvector's HNSW.

Both runs use the same server (one with the pgvector extension), the same padded tools and the same
queries, each in a fresh database: the only difference is `search.pgvector` (`off`, then `auto`).
"""

from __future__ import annotations

import statistics
import tempfile
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from awb.config import Config
from awb.inventory.models import Tool
from awb.inventory.postgres import PostgresStore
from awb.search.vector_index import VectorIndex
from ops import percentile

OPERATIONS = ("search hybrid", "search hybrid, query embedded", "search text", "first search (builds caches)")


@contextmanager
def pgvector_server(url: str) -> Iterator[str]:
    """The admin URL: `url` as given, or a pgserver started in a temporary folder for `pgserver`."""
    if url != "pgserver":
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    with tempfile.TemporaryDirectory() as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


@contextmanager
def fresh_database(admin: str) -> Iterator[str]:
    import psycopg

    name = "awb_pgv_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        base, _, query = admin.partition("?")
        yield f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def overlap_at_10(url: str, model_id: str, dim: int, queries: int = 50) -> float:
    """Mean share of the exact top 10 that the HNSW index returns, for random unit queries."""
    import numpy as np

    store = PostgresStore(url)
    try:
        index = store.nearest_index(model_id, dim)
        assert index is not None, store.vector_search_path
        exact = VectorIndex.from_rows(dim, store.load_vectors(model_id))
        rng = np.random.default_rng(3)
        shares = []
        for _ in range(queries):
            query = rng.standard_normal(dim).astype(np.float32)
            query /= np.linalg.norm(query)
            found = index.nearest(query, 10)
            truth = exact.nearest(query, 10)
            shares.append(len(set(found) & set(truth)) / 10)
        return float(np.mean(shares))
    finally:
        store.close()


async def compare_pgvector(
    url: str,
    tools: list[Tool],
    repeat: int,
    measure: Callable[[Config, list[Tool], int, Any], Awaitable[dict[str, list[float]]]],
) -> None:
    import random

    console = Console()
    results: dict[str, dict[str, list[float]]] = {}
    overlap = 0.0
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        admin = stack.enter_context(pgvector_server(url))
        for setting in ("off", "auto"):
            db = stack.enter_context(fresh_database(admin))
            config = Config(inventory_path=Path(tmp) / "unused.db", inventory_url=db, max_tools=len(tools) + 1000)
            config.search.mode = "hybrid"
            config.search.pgvector = setting  # type: ignore[assignment]
            results[setting] = await measure(config, tools, repeat, random.Random(2))
            if setting == "auto":
                from awb.search.embeddings import create_embedder

                embedder, _ = create_embedder("local")
                assert embedder is not None
                overlap = overlap_at_10(db, embedder.model_id, embedder.dim)
    table = Table(title=f"{len(tools):,} tools, {repeat} runs per operation, ms: vectors in memory vs pgvector HNSW")
    for column in ["operation", "memory p50", "memory p95", "pgvector p50", "pgvector p95", "ratio p50"]:
        table.add_column(column, justify="left" if column == "operation" else "right")
    for name in OPERATIONS:
        mine, theirs = results["off"][name], results["auto"][name]
        table.add_row(
            name,
            f"{statistics.median(mine):.2f}",
            f"{percentile(mine, 0.95):.2f}",
            f"{statistics.median(theirs):.2f}",
            f"{percentile(theirs, 0.95):.2f}",
            f"{statistics.median(theirs) / statistics.median(mine):.2f}×",
        )
    console.print(table)
    console.print(f"HNSW top-10 overlap with exact cosine, 50 random unit queries: {overlap:.3f}")
