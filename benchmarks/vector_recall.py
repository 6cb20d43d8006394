"""What the vector index's sketch costs in recall, and what it saves in time, against exact search.

    python benchmarks/vector_recall.py [--tools 100000] [--queries 200] [--real 0] [--cache FILE] [--shares 0.04,0.02]

Two sets of vectors, each searched exactly (the whole float32 matrix) and through the sketch
(`awb.search.vector_index` above its exact limit), in the same run:

- random: unit vectors drawn as `scale.py` pads its inventory (the worst case for any sketch: nothing
  is near anything), queried with other random vectors and with perturbed copies of stored ones;
- real: the local MiniLM model's embeddings of MetaTool's queries and tool descriptions (and, with
  `--real N` above their ~21,000, of pairs of queries joined, up to N), queried with held-out queries.
  Needs the embed extra and the data (`BENCH_DATA_DIR` or `--data`); `--cache FILE` keeps the
  embeddings in an .npy file between runs.

Each set runs with the index's own candidate count (`default`: 1/25 of the tools, at least 2,000) and
with each of `--shares` of the tools and no floor, so a set smaller than 100,000 can be searched with
the share of candidates 100,000 tools get. Prints recall@1 and recall@10 (the share of the exact top
results the sketch returns) and p50/p95 ms of both searches.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from awb.search import vector_index  # noqa: E402
from awb.search.vector_index import VectorIndex  # noqa: E402
from ops import BENCH, percentile  # noqa: E402

DIM = 384
SEED = 11
DEFAULTS = (vector_index.SKETCH_CANDIDATE_SHARE, vector_index.SKETCH_MIN_CANDIDATES)


def unit(matrix: Any) -> Any:
    return (matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)).astype(np.float32)


def random_set(count: int, queries: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(7)  # scale.py's seed: the same vectors
    matrix = unit(rng.standard_normal((count, DIM)).astype(np.float32))
    other = np.random.default_rng(SEED)
    near = unit(matrix[other.integers(0, count, queries // 2)] + 0.05 * other.standard_normal((queries // 2, DIM)))
    return matrix, np.concatenate([unit(other.standard_normal((queries - len(near), DIM))), near])


def real_set(data: Path, count: int, queries: int, cache: Path | None) -> tuple[Any, Any]:
    texts = [json.loads(line)["query"] for line in (data / "queries.jsonl").open()]
    rng = random.Random(SEED)
    rng.shuffle(texts)
    held_out, corpus = texts[:queries], texts[queries:]
    corpus += [json.loads(line)["description"] for line in (data / "tools.jsonl").open()]
    while len(corpus) < count:
        corpus.append(f"{rng.choice(texts[queries:])} {rng.choice(texts[queries:])}")
    wanted = held_out + corpus
    if cache is not None and cache.is_file():
        vectors = np.load(cache)
        if len(vectors) >= len(wanted):
            return vectors[queries : len(wanted)], vectors[:queries]
    from awb.search.embeddings import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.wait_loaded()
    started = time.perf_counter()
    parts = []
    for start in range(0, len(wanted), 32):
        parts.append(embedder.embed(wanted[start : start + 32]))
        if start % 3200 == 0:
            print(f"  embedded {start:,} of {len(wanted):,} texts ({time.perf_counter() - started:.0f} s)", flush=True)
    vectors = np.concatenate(parts)
    if cache is not None:
        np.save(cache, vectors)
    return vectors[queries:], vectors[:queries]


def measure(matrix: Any, queries: Any, share: float | None, k: int = 10) -> dict[str, float]:
    if share is not None:
        vector_index.SKETCH_CANDIDATE_SHARE, vector_index.SKETCH_MIN_CANDIDATES = share, 0
    rows = [(f"t{i}", DIM, row.astype("<f4").tobytes()) for i, row in enumerate(matrix)]
    exact_index = VectorIndex.from_rows(DIM, rows, exact_limit=len(matrix))
    sketch_index = VectorIndex.from_rows(DIM, rows, exact_limit=0)
    sketch_index.nearest(queries[0], k)  # builds the sketch
    candidates = len(sketch_index._candidates(queries[0], 50))
    exact_ms: list[float] = []
    sketch_ms: list[float] = []
    recall1: list[float] = []
    recall10: list[float] = []
    for query in queries:
        started = time.perf_counter()
        truth = exact_index.nearest(query, 50)
        exact_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        found = sketch_index.nearest(query, 50)
        sketch_ms.append((time.perf_counter() - started) * 1000)
        best = sorted(truth, key=truth.__getitem__, reverse=True)
        recall1.append(float(best[0] in found))
        recall10.append(len(set(best[:k]) & set(found)) / k)
    vector_index.SKETCH_CANDIDATE_SHARE, vector_index.SKETCH_MIN_CANDIDATES = DEFAULTS
    return {
        "candidates": candidates,
        "recall@1": statistics.fmean(recall1),
        "recall@10": statistics.fmean(recall10),
        "exact p50": statistics.median(exact_ms),
        "exact p95": percentile(exact_ms, 0.95),
        "sketch p50": statistics.median(sketch_ms),
        "sketch p95": percentile(sketch_ms, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tools", type=int, default=100_000, help="random vectors")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real", type=int, default=0, help="real embeddings (0: MetaTool's ~21,000 texts; -1: skip)")
    parser.add_argument("--data", type=Path, default=BENCH / "retrieval" / "metatool")
    parser.add_argument("--cache", type=Path, default=None, help=".npy file keeping the real embeddings")
    parser.add_argument("--shares", default="0.04,0.02", help="candidate shares to run besides the default")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # as the server runs it (awb.search.embeddings)
    sets = {f"random, {args.tools:,}": random_set(args.tools, args.queries)}
    if args.real >= 0:
        matrix, queries = real_set(args.data, args.real, args.queries, args.cache)
        sets[f"MiniLM, {len(matrix):,}"] = (matrix, queries)
    shares: list[float | None] = [None, *(float(share) for share in args.shares.split(",") if share)]
    results = {
        (name, "default" if share is None else f"{share:g}"): measure(matrix, queries, share)
        for name, (matrix, queries) in sets.items()
        for share in shares
    }
    columns = list(next(iter(results.values())))
    print(f"{'vectors':<16}{'share':>8}" + "".join(f"{c:>11}" for c in columns))
    for (name, share), row in results.items():
        print(f"{name:<16}{share:>8}" + "".join(f"{row[c]:>11.3f}" for c in columns))
    print("recall: share of the exact top-1 / top-10 the sketch returns among its 50.")


if __name__ == "__main__":
    main()
