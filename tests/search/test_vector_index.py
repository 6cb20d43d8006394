"""The vector index: exact below its limit, sketch-and-rescore above it (recall held to a floor), and
put / remove / replace keep ids, rows and sketch in step without copying the matrix."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from awb.search import vector_index
from awb.search.vector_index import VectorIndex

DIM = 384


def unit(matrix: Any) -> Any:
    return (matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)).astype(np.float32)


def clustered(count: int, rng: np.random.Generator) -> Any:
    """Vectors around a few hundred topics sharing one common direction, as sentence embeddings are
    (cosines mostly 0.1-0.4, a tool's near neighbours 0.6-0.9)."""
    common = rng.standard_normal(DIM)
    topics = unit(rng.standard_normal((300, DIM)) + 1.2 * common / np.linalg.norm(common) * np.sqrt(DIM) / 4)
    picked = topics[rng.integers(0, len(topics), count)]
    return unit(picked + 0.06 * rng.standard_normal((count, DIM)))


def index_of(matrix: Any, exact_limit: int = vector_index.EXACT_LIMIT) -> VectorIndex:
    rows = [(f"t{i}", DIM, row.astype("<f4").tobytes()) for i, row in enumerate(matrix)]
    return VectorIndex.from_rows(DIM, rows, exact_limit=exact_limit)


def recall_at_10(index: VectorIndex, matrix: Any, queries: Any) -> float:
    found = 0
    for query in queries:
        exact = matrix @ query
        truth = {f"t{i}" for i in np.argpartition(-exact, 10)[:10]}
        found += len(truth & set(index.nearest(query, 10)))
    return found / (10 * len(queries))


def assert_consistent(index: VectorIndex, vectors: dict[str, Any]) -> None:
    assert sorted(index.ids) == sorted(vectors)
    assert len(index.rows) == len(index.ids) == len(index.matrix)
    for row, tool_id in enumerate(index.ids):
        assert index.rows[tool_id] == row
        assert np.array_equal(index.matrix[row], vectors[tool_id])
    if index._signs is not None:
        assert np.array_equal(index._signs[:, : len(index.ids)], index._sketch(index.matrix).T)


def test_below_the_limit_search_is_exact() -> None:
    rng = np.random.default_rng(1)
    matrix = unit(rng.standard_normal((500, DIM)))
    index = index_of(matrix)
    query = unit(rng.standard_normal(DIM))
    cosines = index.nearest(query, 10, also=["t0", "t1", "missing"])
    exact = matrix @ query
    best = np.argsort(-exact)[:10]
    assert {f"t{i}" for i in best} | {"t0", "t1"} == set(cosines)
    assert all(cosines[f"t{i}"] == pytest.approx(exact[i], abs=1e-6) for i in range(500) if f"t{i}" in cosines)
    assert index._signs is None  # no sketch is made for an exact index


@pytest.mark.parametrize("kind", ["clustered", "random"])
def test_above_the_limit_the_sketch_keeps_recall_at_10_above_its_floor(kind: str) -> None:
    rng = np.random.default_rng(2)
    count = 30_000
    matrix = clustered(count, rng) if kind == "clustered" else unit(rng.standard_normal((count, DIM)))
    index = index_of(matrix)
    # Queries near stored vectors (a paraphrase of a tool) and, for random data, unrelated ones.
    near = unit(matrix[rng.integers(0, count, 40)] + 0.05 * rng.standard_normal((40, DIM)))
    queries = near if kind == "clustered" else np.concatenate([near, unit(rng.standard_normal((20, DIM)))])
    recall = recall_at_10(index, matrix, queries)
    assert index._signs is not None
    # Floors well under what these seeds give (clustered ~0.99, random ~0.9): they catch a broken
    # sketch or candidate cut, not noise.
    assert recall >= (0.95 if kind == "clustered" else 0.75), recall


def test_above_the_limit_scores_are_exact_and_the_tools_asked_for_are_scored() -> None:
    rng = np.random.default_rng(3)
    matrix = clustered(25_000, rng)
    index = index_of(matrix)
    for i in range(20):
        query = unit(matrix[i * 7] + 0.05 * rng.standard_normal(DIM))
        also = [f"t{j}" for j in rng.integers(0, 25_000, 30)]
        cosines = index.nearest(query, 50, also)
        exact = matrix @ query
        assert set(also) <= set(cosines)
        for tool_id, cosine in cosines.items():
            assert cosine == pytest.approx(exact[int(tool_id[1:])], abs=1e-5)
        assert f"t{int(np.argmax(exact))}" in cosines  # the nearest tool is always a candidate here


def test_put_remove_and_replace_keep_ids_rows_and_sketch_in_step() -> None:
    rng = random.Random(4)
    vectors: dict[str, Any] = {}
    index = VectorIndex(DIM, exact_limit=50)  # the sketch is made once a search passes 50 tools
    generator = np.random.default_rng(4)
    for step in range(1_500):
        action = rng.random()
        if action < 0.25 and vectors:
            tool_id = rng.choice(sorted(vectors))
            index.remove(tool_id)
            del vectors[tool_id]
        elif action < 0.4 and vectors:
            tool_id = rng.choice(sorted(vectors))
            vectors[tool_id] = unit(generator.standard_normal(DIM))
            index.put(tool_id, vectors[tool_id])
        else:
            tool_id = f"new{step}"
            vectors[tool_id] = unit(generator.standard_normal(DIM))
            index.put(tool_id, vectors[tool_id])
        if step % 97 == 0:
            assert_consistent(index, vectors)
            query = unit(generator.standard_normal(DIM))
            assert set(index.nearest(query, 5)) <= set(vectors)
    index.remove("never-there")
    assert_consistent(index, vectors)
    assert index._signs is not None
    assert len(index._buffer) >= len(vectors) and len(index._buffer) <= 2 * max(len(vectors), 16) + 16


def test_put_never_copies_the_whole_matrix_until_the_buffer_is_full() -> None:
    rng = np.random.default_rng(5)
    index = index_of(unit(rng.standard_normal((1_000, DIM))))
    buffer = index._buffer
    room = len(buffer) - len(index)
    for i in range(room):
        index.put(f"extra{i}", unit(rng.standard_normal(DIM)))
    index.remove("t3")
    assert index._buffer is buffer
    index.put("one-more", unit(rng.standard_normal(DIM)))
    index.put("and-another", unit(rng.standard_normal(DIM)))
    assert len(index._buffer) == 2 * len(buffer)


def test_an_empty_index_finds_nothing() -> None:
    index = VectorIndex(DIM, exact_limit=0)
    assert index.nearest(unit(np.ones(DIM)), 10) == {}
    index.put("a", unit(np.ones(DIM)))
    assert index.nearest(unit(np.ones(DIM)), 10) == {"a": pytest.approx(1.0)}
