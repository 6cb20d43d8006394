"""How relevant a tool is to a query in hybrid search: one absolute relevance from its two signals, and
the 0-1 score an agent is shown for it.

Absolute means a tool's relevance comes from its own cosine and BM25 alone, never scaled by the other
tools' (per-query min-max scaling gave the nearest tool 0.8 or more whatever the query), so an unrelated
tool scores low in any inventory and a low best score says that nothing there fits. The constants were
measured for the local model (all-MiniLM-L6-v2) on MetaTool with `benchmarks/retrieval.py` (ranking) and
`benchmarks/relevance.py` (what the score says); the README's Ranking section has the numbers.
"""

from __future__ import annotations

import math

#: relevance = cosine + TEXT_WEIGHT * bm25 / (bm25 + BM25_HALF): BM25 saturates (half way at BM25_HALF),
#: so a long or repetitive description cannot outweigh what the embedding says. MetaTool NDCG@10 is flat
#: for BM25_HALF 8-50 with TEXT_WEIGHT 0.2-0.5, and above the min-max fusion it replaces.
TEXT_WEIGHT = 0.25
BM25_HALF = 12.0
#: score = 1 / (1 + exp(-(relevance - SCORE_MIDPOINT) / SCORE_SCALE)). The slope is a logistic fit of
#: MetaTool's relevant against non-relevant (query, tool) pairs; the midpoint (score 0.5) is a
#: relevance that one non-relevant pair in 30 reaches, and four relevant ones in five.
SCORE_MIDPOINT = 0.30
SCORE_SCALE = 0.065
#: Scores from here up are matches: a listing filtered by a query in hybrid mode keeps only these.
RELEVANCE_FLOOR = 0.5
#: The relevance whose score is RELEVANCE_FLOOR.
FLOOR_RELEVANCE = SCORE_MIDPOINT + SCORE_SCALE * math.log(RELEVANCE_FLOOR / (1 - RELEVANCE_FLOOR))


def fuse(text_scores: dict[str, float], cosines: dict[str, float]) -> dict[str, float]:
    """Each tool's relevance from its BM25 (`text_scores`, raw) and cosine; a tool missing from one
    signal gets nothing from it. Ranking by it is ranking by score."""
    fused = dict.fromkeys(text_scores.keys() - cosines.keys(), 0.0)
    fused.update(cosines)
    for tool_id, bm25 in text_scores.items():
        if bm25 > 0:
            fused[tool_id] += TEXT_WEIGHT * bm25 / (bm25 + BM25_HALF)
    return fused


def score(relevance: float) -> float:
    """The 0-1 score shown for a relevance: under 0.15 for a typical unrelated tool, 0.9 and up for a close match."""
    # exp of a cosine-sized number over SCORE_SCALE stays far from overflow (|relevance| <= 1.25).
    return 1.0 / (1.0 + math.exp(-(relevance - SCORE_MIDPOINT) / SCORE_SCALE))


__all__ = ["FLOOR_RELEVANCE", "RELEVANCE_FLOOR", "fuse", "score"]
