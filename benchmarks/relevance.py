"""What a hybrid search score says: whether the best tool fits, in inventories of 1, 2, 20 and 199 tools.

    python benchmarks/relevance.py [--data DIR] [--queries 300] [--before DIR]

For MetaTool queries (MIT; the README's Benchmark section says where the data comes from) it builds
small inventories twice: with one of the query's relevant tools among tools not relevant to it, and
with only tools not relevant to it ("nothing fits": the agent should craft). Every search is
`HybridSearch.search`, as `awb_search` runs it. Reported: how often the relevant tool comes first and
scores at or above the relevance floor (`awb.search.relevance.RELEVANCE_FLOOR`, 0.5 for code that has
none), and the best score when nothing fits, with how often it still reaches the floor. The 199-tool
rows use MetaTool's whole inventory; there "nothing fits" is the best tool not relevant to the query.
MetaTool's tools overlap (several travel, shopping or search plugins), so a tool counted as not
relevant often half fits: the "nothing fits" rows are an upper bound on false alarms.

`--before DIR` runs the same measurement first on another source tree (`DIR/src`, e.g. an export of
main), in a child process, so both tables come from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEED = 20240301
SIZES = (1, 2, 20)
TRIVIAL_CODE = "def run(params):\n    return None\n"


def tool_name(raw: str) -> str:
    """MetaTool names are free text ('PDF&URLTool'); tools are named `[A-Za-z0-9_-]{1,64}` (as retrieval.py)."""
    import re

    return re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_")[:64] or "tool"


class CachedEmbedder:
    """The local model, each text embedded once: a tool is in hundreds of the inventories built here."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._done: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        new = [t for t in dict.fromkeys(texts) if t not in self._done]
        if new:
            self._done.update(zip(new, self.inner.embed(new), strict=True))
        return np.stack([self._done[t] for t in texts]) if texts else self.inner.embed([])


class Inventories:
    """Fresh in-memory inventories of chosen MetaTool tools, searched as `awb_search` searches."""

    def __init__(self, tools: list[dict[str, str]], embedder: CachedEmbedder) -> None:
        from awb.inventory.models import Tool

        now = datetime(2026, 1, 1, tzinfo=UTC)
        self.embedder = embedder
        self.tools = [
            Tool(
                tool_id=f"tool_{i:04d}",
                name=tool_name(t["name"]),
                description=t["description"],
                language="python",
                runtime="monty",
                code=TRIVIAL_CODE,
                input_schema={"type": "object"},
                created_at=now,
                updated_at=now,
            )
            for i, t in enumerate(tools)
        ]

    def engine(self, members: Sequence[int]) -> Any:
        from awb.config import SearchConfig
        from awb.inventory.sqlite import SQLiteStore
        from awb.search.hybrid import HybridSearch

        store = SQLiteStore(":memory:")
        engine = HybridSearch(store, self.embedder, SearchConfig(mode="hybrid"))
        chosen = [self.tools[i] for i in members]
        for tool in chosen:
            store.add_tool(tool)
        engine.index_tools(chosen)
        return engine


def ranked(engine: Any, query: str, limit: int) -> list[tuple[int, float]]:
    mode, hits = engine.search(query, limit)
    assert mode == "hybrid", mode
    return [(int(tool.tool_id[5:]), score) for tool, score in hits]


def measure(data: Path, count: int) -> dict[str, Any]:
    """Rows of the table: per inventory size, the present and absent cases."""
    from awb.search.embeddings import LocalEmbedder

    try:
        from awb.search.relevance import RELEVANCE_FLOOR
    except ImportError:  # a tree from before absolute scores: min-max fused, no floor of its own
        RELEVANCE_FLOOR = 0.5

    tools = [json.loads(line) for line in (data / "tools.jsonl").open()]
    queries = [json.loads(line) for line in (data / "queries.jsonl").open()]
    index = {t["id"]: i for i, t in enumerate(tools)}
    rng = random.Random(SEED)
    sample = rng.sample(queries, count)
    model = LocalEmbedder()
    model.wait_loaded()
    embedder = CachedEmbedder(model)
    inventories = Inventories(tools, embedder)
    started = time.perf_counter()
    rows: dict[str, Any] = {}
    cases: dict[int, tuple[list[float], list[bool], list[float]]] = {}
    everything = inventories.engine(range(len(tools)))
    for size in (*SIZES, len(tools)):
        present_scores: list[float] = []
        present_first: list[bool] = []
        absent_best: list[float] = []
        for query in sample:
            text = str(query["query"])
            relevant = {index[r] for r in query["relevant"]}
            others = [i for i in range(len(tools)) if i not in relevant]
            if size == len(tools):
                hits = ranked(everything, text, 10)
                present_first.append(hits[0][0] in relevant)
                present_scores.append(hits[0][1])
                absent_best.append(next(s for i, s in hits if i not in relevant))
                continue
            wanted = rng.choice(sorted(relevant))
            hits = ranked(inventories.engine([wanted, *rng.sample(others, size - 1)]), text, 1)
            present_first.append(hits[0][0] == wanted)
            present_scores.append(hits[0][1])
            absent_best.append(ranked(inventories.engine(rng.sample(others, size)), text, 1)[0][1])
        cases[size] = (present_scores, present_first, absent_best)
    for size, (scores, first, best) in cases.items():
        fits = [f and s >= RELEVANCE_FLOOR for s, f in zip(scores, first, strict=True)]
        rows[str(size)] = {
            "first": 100 * statistics.fmean(first),
            "first_and_above": 100 * statistics.fmean(fits),
            "present_p50": statistics.median(scores),
            "absent_p50": statistics.median(best),
            "absent_p90": sorted(best)[int(0.9 * (len(best) - 1))],
            "absent_above": 100 * statistics.fmean(b >= RELEVANCE_FLOOR for b in best),
        }
    return {"floor": RELEVANCE_FLOOR, "rows": rows, "seconds": time.perf_counter() - started}


def table(result: dict[str, Any]) -> str:
    lines = [
        f"floor {result['floor']}; {result['seconds']:.0f} s",
        f"{'tools':>5} | {'fits: first':>11} {'& >= floor':>10} {'score p50':>9} | "
        f"{'nothing fits: best p50':>22} {'p90':>5} {'>= floor':>8}",
    ]
    for size, row in result["rows"].items():
        lines.append(
            f"{size:>5} | {row['first']:10.1f}% {row['first_and_above']:9.1f}% {row['present_p50']:9.3f} | "
            f"{row['absent_p50']:22.3f} {row['absent_p90']:5.3f} {row['absent_above']:7.1f}%"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_data = next(
        (p for p in (ROOT.parent / "shared" / "bench", ROOT.parent.parent / "shared" / "bench") if p.is_dir()), None
    )
    parser.add_argument("--data", type=Path, default=default_data, help="MetaTool's folder (as retrieval.py's)")
    parser.add_argument("--queries", type=int, default=300, help="queries sampled (fixed seed)")
    parser.add_argument("--before", type=Path, help="another source tree (its src/) to measure first, in a child")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.data is None:
        parser.error("no data: pass --data DIR (MetaTool's tools.jsonl and queries.jsonl)")
    data = next((d for d in (args.data, args.data / "retrieval" / "metatool") if (d / "tools.jsonl").is_file()), None)
    if data is None:
        parser.error(f"no tools.jsonl in {args.data} or {args.data / 'retrieval' / 'metatool'}")
    if args.before is not None:
        command = [sys.executable, __file__, "--data", str(data), "--queries", str(args.queries)]
        command += ["--src", str(args.before / "src"), "--json"]
        # The child imports only the other tree: its src first on the path, and no editable install's.
        env = {**os.environ, "PYTHONPATH": str(args.before / "src")}
        before = json.loads(subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout)
        print(f"before ({args.before}):\n{table(before)}\n")
    sys.path.insert(0, str(args.src))
    result = measure(data, args.queries)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{'after' if args.before else 'this tree'} ({ROOT}):\n{table(result)}")


if __name__ == "__main__":
    main()
