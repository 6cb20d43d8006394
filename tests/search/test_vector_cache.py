"""The tool vector cache: a second index of the same tools embeds nothing, and the file survives damage,
concurrent writers and its size bound."""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from awb.config import SearchConfig  # noqa: E402
from awb.inventory.models import Tool  # noqa: E402
from awb.inventory.sqlite import SQLiteStore  # noqa: E402
from awb.search.hybrid import HybridSearch  # noqa: E402
from awb.search.vector_cache import VectorCache, default_cache_path, embedder_identity, text_key  # noqa: E402

DIM = 8


class CountingEmbedder:
    """Deterministic vectors from each text's hash; counts the texts it is asked for."""

    def __init__(self, model_id: str = "fake-hash-1") -> None:
        self.model_id = model_id
        self.dim = DIM
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(text_key([text])[:4], "little")
            out[row] = np.random.default_rng(seed).standard_normal(DIM)
            out[row] /= np.linalg.norm(out[row])
        return out


def tool(tool_id: str, name: str, description: str) -> Tool:
    now = datetime.now(UTC)
    return Tool(
        tool_id=tool_id,
        name=name,
        description=description,
        language="python",
        runtime="monty",
        code="",
        input_schema={"type": "object"},
        created_at=now,
        updated_at=now,
    )


def tools(n: int, *, word: str = "fetch") -> list[Tool]:
    return [tool(f"t{i}", f"tool_{i}", f"{word} thing number {i}") for i in range(n)]


def indexed(cache: VectorCache | None, embedder: CountingEmbedder, batch: list[Tool]) -> dict[str, bytes]:
    """Index `batch` in a fresh in-memory inventory; returns the vectors the store holds, by tool."""
    store = SQLiteStore(":memory:")
    try:
        for tool in batch:
            store.add_tool(tool)
        search = HybridSearch(store, embedder, SearchConfig(mode="hybrid"))
        search.vector_cache = cache
        assert search.index_tools(batch) == len(batch)
        return {tool_id: blob for tool_id, _, blob in store.load_vectors(embedder.model_id)}
    finally:
        store.close()


def test_a_second_index_of_the_same_tools_embeds_nothing_and_gets_the_same_vectors(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.sqlite3")
    first, second = CountingEmbedder(), CountingEmbedder()
    cold = indexed(cache, first, tools(20))
    assert len(first.texts) == 60
    warm = indexed(VectorCache(tmp_path / "vectors.sqlite3"), second, tools(20))
    assert second.texts == []
    # Bit for bit what a cache-less index stores.
    assert warm == cold == indexed(None, CountingEmbedder(), tools(20))


def test_only_the_tools_the_cache_lacks_are_embedded(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.sqlite3")
    indexed(cache, CountingEmbedder(), tools(5))
    embedder = CountingEmbedder()
    changed = [*tools(5)[:4], tool("t4", "tool_4", "something else")]
    got = indexed(cache, embedder, changed)
    assert len(embedder.texts) == 3 and "something else" in embedder.texts[0]
    assert got == indexed(None, CountingEmbedder(), changed)
    assert (cache.hits, cache.misses) == (4, 6)  # tools, over both indexes


def test_the_key_changes_with_the_model_or_any_text() -> None:
    assert text_key(["a", "b"]) == text_key(["a", "b"])
    assert text_key(["a", "b"]) != text_key(["ab", ""])
    assert text_key(["a", "b"]) != text_key(["a", "c"])
    assert embedder_identity(CountingEmbedder("m1")) != embedder_identity(CountingEmbedder("m2"))


def test_another_model_or_a_changed_description_misses_the_cache(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "vectors.sqlite3")
    indexed(cache, CountingEmbedder("m1"), tools(3))
    other_model = CountingEmbedder("m2")
    indexed(cache, other_model, tools(3))
    assert len(other_model.texts) == 9
    other_text = CountingEmbedder("m1")
    indexed(cache, other_text, tools(3, word="send"))
    assert len(other_text.texts) == 9


def test_the_local_models_identity_names_its_files_runtime_and_folding() -> None:
    from awb.search.embeddings import EmbedderUnavailable, LocalEmbedder, local_model_files

    try:
        local_model_files()
    except EmbedderUnavailable:
        pytest.skip("the embed extra is not installed")
    folded, unfolded = LocalEmbedder(), LocalEmbedder(few_queries=True)
    assert folded.identity.startswith(folded.model_id + "/")
    assert "onnxruntime" in folded.identity
    # Constant folding changes vectors by float rounding: the two never share entries.
    assert folded.identity != unfolded.identity


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_cache_file_is_rebuilt_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = tmp_path / "vectors.sqlite3"
    cache = VectorCache(path)
    indexed(cache, CountingEmbedder(), tools(30))
    cache.close()
    data = path.read_bytes()
    path.write_bytes(b"not a database at all" * 100 if damage == "garbage" else data[:100] + b"\x00" * len(data))
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING, logger="awb.search"):
        got = indexed(VectorCache(path), embedder, tools(30))
    assert got == indexed(None, CountingEmbedder(), tools(30))
    assert len(embedder.texts) == 90
    assert any("rebuilt empty" in record.getMessage() for record in caplog.records)
    again = CountingEmbedder()
    indexed(VectorCache(path), again, tools(30))
    assert again.texts == []


def test_a_cache_that_cannot_be_written_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING, logger="awb.search"):
        got = indexed(VectorCache(blocker / "sub" / "vectors.sqlite3"), embedder, tools(4))
    assert got == indexed(None, CountingEmbedder(), tools(4))
    assert any("is not used" in record.getMessage() for record in caplog.records)


def test_the_size_bound_prunes_the_least_recently_used(tmp_path: Path) -> None:
    now = [1_000_000.0]
    cache = VectorCache(tmp_path / "vectors.sqlite3", max_entries=10, clock=lambda: now[0])
    indexed(cache, CountingEmbedder(), tools(6, word="read"))
    now[0] += 10_000
    indexed(cache, CountingEmbedder(), tools(4, word="idle"))
    now[0] += 10_000
    # Read again: these six are now used more recently than the four "idle" ones.
    indexed(cache, CountingEmbedder(), tools(6, word="read"))
    now[0] += 10_000
    indexed(cache, CountingEmbedder(), tools(3, word="new"))
    assert cache.count() == 10
    read, idle = CountingEmbedder(), CountingEmbedder()
    indexed(cache, read, tools(6, word="read"))
    assert read.texts == []
    indexed(cache, idle, tools(4, word="idle"))
    assert len(idle.texts) == 9  # three of the four went
    for batch in range(5):
        indexed(cache, CountingEmbedder(), tools(7, word=f"w{batch}"))
        assert cache.count() == 10


def test_threads_writing_at_once_leave_a_sound_file(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    errors: list[BaseException] = []

    def work(word: str) -> None:
        try:
            indexed(VectorCache(path), CountingEmbedder(), tools(40, word=word))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert_sound(path, 160)


def _write_in_a_process(path: str, word: str) -> None:
    for round_ in range(3):
        indexed(VectorCache(Path(path)), CountingEmbedder(), tools(50, word=f"{word}-{round_}"))


def test_processes_writing_at_once_leave_a_sound_file(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_in_a_process, args=(str(path), f"p{i}")) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=90)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert_sound(path, 300)
    embedder = CountingEmbedder()
    indexed(VectorCache(path), embedder, tools(50, word="p1-2"))
    assert embedder.texts == []


def assert_sound(path: Path, entries: int) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == entries
        assert conn.execute("SELECT count(*) FROM vectors WHERE length(vector) != ?", (4 * DIM,)).fetchone()[0] == 0


def test_the_default_place_follows_xdg_cache_home() -> None:
    assert default_cache_path({"XDG_CACHE_HOME": "/c"}) == Path("/c/awb/tool-vectors.sqlite3")
    assert default_cache_path({"XDG_CACHE_HOME": "relative"}) == Path.home() / ".cache/awb/tool-vectors.sqlite3"
    assert default_cache_path({}) == Path.home() / ".cache/awb/tool-vectors.sqlite3"


def test_a_cache_busy_when_first_opened_is_tried_again_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that found the file locked while another made it went without a cache until it exited."""
    import awb.search.vector_cache as vector_cache

    monkeypatch.setattr(vector_cache, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "vectors.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    cache = VectorCache(path)
    embedder = CountingEmbedder()
    assert indexed(cache, embedder, tools(3)) == indexed(None, CountingEmbedder(), tools(3))
    holder.execute("ROLLBACK")
    holder.close()
    indexed(cache, CountingEmbedder(), tools(3))
    assert cache.count() == 3
