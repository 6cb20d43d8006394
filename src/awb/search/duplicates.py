"""Near-duplicate detection at craft time: is there already a tool that does this?

Candidates come from full-text search over name and description; each is scored by the Dice overlap
of content words (identifiers split, stop words dropped), 0 to 1, so the threshold means the same
whatever the size of the inventory (BM25 scores do not).
"""

from __future__ import annotations

from awb.inventory.models import ToolSummary
from awb.search.fts import query_terms, split_identifier


def words(name: str, description: str) -> set[str]:
    return set(query_terms(split_identifier(name) + " " + description))


def similarity(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 0.0
    return 2 * len(a & b) / (len(a) + len(b))


def rank_similar(
    name: str, description: str, candidates: list[ToolSummary], *, minimum: float = 0.3, limit: int = 5
) -> list[ToolSummary]:
    """`candidates` scored against the new tool, best first, those under `minimum` dropped."""
    mine = words(name, description)
    scored = []
    for candidate in candidates:
        score = similarity(mine, words(candidate.name, candidate.description))
        if split_identifier(candidate.name) == split_identifier(name):
            score = max(score, 0.9)
        if score >= minimum:
            scored.append(candidate.model_copy(update={"score": round(score, 4)}))
    scored.sort(key=lambda s: -(s.score or 0.0))
    return scored[:limit]
