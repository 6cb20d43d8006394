"""The PostgreSQL store's in-memory BM25 scores every row as the plain formula does over its documents."""

from __future__ import annotations

import random

import pytest
from test_bm25 import Reference
from test_text_index import VOCABULARY, _tool

from awb.inventory.postgres import PostgresStore
from awb.inventory.postgres_text import LABEL_WEIGHTS
from awb.search.fts import search_words


def reference_of(store: PostgresStore) -> Reference:
    """Every row's lexemes with one label per position, read straight from the `document` column."""
    reference = Reference(dict(LABEL_WEIGHTS))
    with store._pool.connection() as conn:
        for seq, lexeme, labels in conn.execute(
            "SELECT t.seq, u.lexeme, u.weights FROM tools t LEFT JOIN LATERAL unnest(t.document) u ON true"
        ):
            tokens = reference.rows.setdefault(seq, [])
            if lexeme is not None:
                tokens.extend((lexeme, label) for label in labels or ())
    return reference


def assert_same(store: PostgresStore, queries: list[str]) -> None:
    reference = reference_of(store)
    for query in queries:
        words = search_words(query)
        ranked = store._text.top(words, 10_000)
        assert ranked is not None
        terms = [token[0] for token in store._text.tokens(words) or []]
        assert dict(ranked) == pytest.approx(reference.scores(terms), rel=1e-12, abs=1e-15), query


def test_scores_equal_the_formula_over_the_documents_through_updates_and_deletes(clean_pg_url: str) -> None:
    store = PostgresStore(clean_pg_url)
    try:
        rng = random.Random(9)
        for i in range(250):
            store.add_tool(_tool(i, rng))
        queries = ["resize an image", "weather forecast temperature", "the of and", "cafe naive résumé"]
        queries += [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 5))) for _ in range(40)]
        assert_same(store, queries)
        store.update("tool_0000000000000005", description="weather weather image", name="weatherImage")
        store.update("tool_0000000000000006", status="deleted")
        store.delete_forever(["tool_0000000000000007", "tool_0000000000000008"])
        for i in range(250, 270):
            store.add_tool(_tool(i, rng))
        assert_same(store, queries)
    finally:
        store.close()
