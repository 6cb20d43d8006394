"""The numpy BM25 postings score every row as the plain formula does, through adds, removals and rebuilds."""

from __future__ import annotations

import math
import random

import pytest

from awb.inventory import bm25
from awb.inventory.bm25 import K1, B, Bm25Postings

WEIGHTS = {"name": 4.0, "description": 1.0, "problem": 1.0, "tags": 2.0}
TERMS = [f"t{i}" for i in range(60)]


class Reference:
    """BM25 as fts5_aux.c writes it, one row and one term at a time (what the index replaced)."""

    def __init__(self, weights: dict[str, float] = WEIGHTS) -> None:
        self.rows: dict[int, list[tuple[str, str]]] = {}
        self.weights = weights

    def scores(self, terms: list[str]) -> dict[int, float]:
        rows = len(self.rows)
        lengths = {rowid: len(tokens) for rowid, tokens in self.rows.items()}
        total = sum(lengths.values())
        average = total / rows if total else 1.0
        scores: dict[int, float] = {}
        for term in terms:
            freqs: dict[int, float] = {}
            for rowid, tokens in self.rows.items():
                f = sum(self.weights[column] for t, column in tokens if t == term)
                if any(t == term for t, _ in tokens):
                    freqs[rowid] = f
            idf = math.log((rows - len(freqs) + 0.5) / (len(freqs) + 0.5))
            factor = (idf if idf > 0 else 1e-6) * (K1 + 1)
            for rowid, f in freqs.items():
                share = factor * f / (f + K1 * (1 - B) + K1 * B / average * lengths[rowid])
                scores[rowid] = scores.get(rowid, 0.0) + share
        return scores


def random_row(rng: random.Random) -> list[tuple[str, str]]:
    # A skewed vocabulary: a few terms in most rows (low or floored IDF), most in few.
    return [(TERMS[min(int(rng.expovariate(0.08)), 59)], rng.choice(list(WEIGHTS))) for _ in range(rng.randint(0, 14))]


def load(index: Bm25Postings, reference: Reference, rows: dict[int, list[tuple[str, str]]]) -> None:
    for rowid, tokens in rows.items():
        reference.rows[rowid] = tokens
        index.add_row(rowid)
    index.add([(term, rowid, column) for rowid, tokens in rows.items() for term, column in tokens], WEIGHTS)


def assert_same(index: Bm25Postings, reference: Reference, terms: list[str]) -> None:
    expected = reference.scores(terms)
    ranked = index.top(terms, len(reference.rows) + 1)
    assert dict(ranked) == pytest.approx(expected, rel=1e-12, abs=1e-15), terms
    # Best first, equal scores by rowid.
    assert ranked == sorted(ranked, key=lambda hit: (-hit[1], hit[0]))
    k = 5
    top = index.top(terms, k)
    assert [round(s, 9) for _, s in top] == sorted((round(s, 9) for s in expected.values()), reverse=True)[:k]
    assert all(expected[rowid] == pytest.approx(score) for rowid, score in top)


def queries(rng: random.Random) -> list[list[str]]:
    found = [[TERMS[0]], [TERMS[0], TERMS[1], TERMS[30]], [TERMS[59]], ["absent"], [TERMS[2], TERMS[2]], []]
    return found + [rng.sample(TERMS, rng.randint(1, 4)) for _ in range(25)]


@pytest.mark.parametrize("sparse_ratio", [8, 10**9, 0], ids=["auto", "always-sparse", "always-dense"])
def test_scores_equal_the_formula_through_adds_removals_and_rebuilds(
    monkeypatch: pytest.MonkeyPatch, sparse_ratio: int
) -> None:
    # Small thresholds, so single writes, bulk loads and block rebuilds all take turns.
    monkeypatch.setattr(bm25, "COMPACT_MIN", 40)
    monkeypatch.setattr(bm25, "BULK_ENTRIES", 200)
    monkeypatch.setattr(bm25, "SPARSE_RATIO", sparse_ratio)
    rng = random.Random(5)
    index, reference = Bm25Postings(), Reference()
    load(index, reference, {rowid: random_row(rng) for rowid in range(1, 400)})
    for query in queries(rng):
        assert_same(index, reference, query)
    next_rowid = 1000
    for step in range(300):
        action = rng.random()
        if action < 0.35 and reference.rows:
            rowid = rng.choice(list(reference.rows))
            index.remove(rowid)
            del reference.rows[rowid]
        elif action < 0.7 and reference.rows:
            rowid = rng.choice(list(reference.rows))  # an update: the row's tokens replaced
            index.remove(rowid)
            load(index, reference, {rowid: random_row(rng)})
        elif action < 0.95:
            load(index, reference, {next_rowid: random_row(rng)})
            next_rowid += 1
        else:
            batch = {next_rowid + i: random_row(rng) for i in range(rng.randint(20, 60))}
            load(index, reference, batch)
            next_rowid += len(batch)
        if step % 7 == 0:
            for query in queries(rng)[:8]:
                assert_same(index, reference, query)
    assert index.rows == len(reference.rows)
    assert index.total_tokens == sum(len(tokens) for tokens in reference.rows.values())
    for query in queries(rng):
        assert_same(index, reference, query)


def test_adding_a_row_again_replaces_its_terms() -> None:
    index, reference = Bm25Postings(), Reference()
    load(index, reference, {1: [("a", "name"), ("b", "description")], 2: [("a", "tags")], 3: []})
    load(index, reference, {1: [("c", "description")]})
    assert index.rows == 3
    for terms in (["a"], ["b"], ["c"], ["a", "c"]):
        assert_same(index, reference, terms)
    assert index.top(["b"], 5) == []


def test_a_row_without_tokens_counts_in_the_idf_and_is_never_found() -> None:
    index, reference = Bm25Postings(), Reference()
    load(index, reference, {1: [("a", "name")], 2: [], 3: []})
    assert_same(index, reference, ["a"])
    index.remove(2)
    del reference.rows[2]
    assert_same(index, reference, ["a"])
    assert [rowid for rowid, _ in index.top(["a", "b"], 10)] == [1]


def test_an_empty_index_and_a_zero_k_rank_nothing() -> None:
    index = Bm25Postings()
    assert index.top(["a"], 10) == []
    index.add([("a", 7, "name")], WEIGHTS)
    assert index.top(["a"], 0) == []
    index.remove(7)
    index.remove(7)  # unknown now: a no-op
    assert index.rows == 0 and index.top(["a"], 10) == []
    index.add([("a", 8, "name")], WEIGHTS)  # the freed slot is reused
    assert [rowid for rowid, _ in index.top(["a"], 10)] == [8]


def test_terms_no_row_has_any_more_are_dropped_when_the_block_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25, "COMPACT_MIN", 0)
    index = Bm25Postings()
    index.add([(f"gone{i}", i, "name") for i in range(1, 50)] + [("kept", 100, "name")], WEIGHTS)
    for i in range(1, 50):
        index.remove(i)
    assert [rowid for rowid, _ in index.top(["kept", "gone3"], 10)] == [100]
    assert set(index._term_id) == {"kept"}
