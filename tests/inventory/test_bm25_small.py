"""The dict postings of a small inventory rank exactly as the numpy postings do: same rows, same floats."""

from __future__ import annotations

import random

import pytest
from test_bm25 import WEIGHTS, Reference, queries, random_row

from awb.inventory import bm25
from awb.inventory.bm25 import Bm25Postings
from awb.inventory.bm25_small import Bm25Index, SmallBm25Postings

Postings = Bm25Postings | SmallBm25Postings | Bm25Index


def load(indexes: list[Postings], reference: Reference, rows: dict[int, list[tuple[str, str]]]) -> None:
    for rowid, tokens in rows.items():
        reference.rows[rowid] = tokens
    for index in indexes:
        for rowid in rows:
            index.add_row(rowid)
        index.add([(term, rowid, column) for rowid, tokens in rows.items() for term, column in tokens], WEIGHTS)


def assert_identical(indexes: list[Postings], reference: Reference, terms: list[str], formula: bool = False) -> None:
    everything = len(reference.rows) + 1
    for k in (everything, 5, 1):
        rankings = [index.top(terms, k) for index in indexes]
        # Exact equality, floats included: not approximately the same scores, the same ones.
        assert all(ranking == rankings[0] for ranking in rankings), (terms, k)
    if formula:  # and they are BM25 (test_bm25 holds the numpy postings to the formula throughout)
        expected = reference.scores(terms)
        assert dict(indexes[0].top(terms, everything)) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("sparse_ratio", [8, 10**9, 0], ids=["auto", "always-sparse", "always-dense"])
def test_dict_and_numpy_postings_give_the_same_rows_and_scores_through_adds_and_removals(
    monkeypatch: pytest.MonkeyPatch, sparse_ratio: int
) -> None:
    # Small numpy thresholds, so its single writes, bulk loads and block rebuilds all take turns; the
    # adaptive index moves into numpy arrays part-way (at 300 rows).
    monkeypatch.setattr(bm25, "COMPACT_MIN", 40)
    monkeypatch.setattr(bm25, "BULK_ENTRIES", 200)
    monkeypatch.setattr(bm25, "SPARSE_RATIO", sparse_ratio)
    rng = random.Random(17)
    numpy_postings, small, adaptive = Bm25Postings(), SmallBm25Postings(), Bm25Index(small_rows=300)
    indexes: list[Postings] = [numpy_postings, small, adaptive]
    reference = Reference()
    load(indexes, reference, {rowid: random_row(rng) for rowid in range(1, 200)})
    assert not adaptive.uses_numpy
    for query in queries(rng):
        assert_identical(indexes, reference, query, formula=True)
    next_rowid = 1000
    for step in range(400):
        action = rng.random()
        if action < 0.25 and reference.rows:
            rowid = rng.choice(list(reference.rows))
            for index in indexes:
                index.remove(rowid)
            del reference.rows[rowid]
        elif action < 0.55 and reference.rows:
            # An update: the row's tokens replaced (a row given no tokens keeps its old ones: remove it).
            rowid, tokens = rng.choice(list(reference.rows)), random_row(rng)
            if not tokens:
                for index in indexes:
                    index.remove(rowid)
            load(indexes, reference, {rowid: tokens})
        elif action < 0.95:
            load(indexes, reference, {next_rowid: random_row(rng)})
            next_rowid += 1
        else:
            batch = {next_rowid + i: random_row(rng) for i in range(rng.randint(20, 60))}
            load(indexes, reference, batch)
            next_rowid += len(batch)
        if step % 5 == 0:
            for query in queries(rng)[:8]:
                assert_identical(indexes, reference, query)
    assert adaptive.uses_numpy and len(reference.rows) > 300
    assert {index.rows for index in indexes} == {len(reference.rows)}
    assert {index.total_tokens for index in indexes} == {sum(len(t) for t in reference.rows.values())}
    for query in queries(rng):
        assert_identical(indexes, reference, query, formula=True)


def test_ties_at_the_cut_keep_the_lowest_rowids_in_both() -> None:
    # Twenty rows with the same single token score alike: the best 3 are the 3 lowest rowids.
    rows = {rowid: [("same", "name")] for rowid in range(40, 20, -1)}
    indexes: list[Postings] = [Bm25Postings(), SmallBm25Postings()]
    load(indexes, Reference(), rows)
    for index in indexes:
        assert [rowid for rowid, _ in index.top(["same"], 3)] == [21, 22, 23]


def test_the_index_starts_in_dicts_and_clearing_returns_to_them() -> None:
    index = Bm25Index(small_rows=3)
    index.add([("a", 1, "name"), ("b", 2, "tags")], WEIGHTS)
    index.add_row(3)
    assert not index.uses_numpy
    index.add_row(4)  # past the limit: the postings move into numpy arrays, scores unchanged
    assert index.uses_numpy and index.rows == 4 and 1 in index and 4 in index
    assert [rowid for rowid, _ in index.top(["a", "b"], 5)] == [1, 2]
    index.clear()
    assert not index.uses_numpy and index.rows == 0 and index.top(["a"], 5) == []
