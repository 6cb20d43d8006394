"""What a person sees of the tool vector cache and how it is cleared: read without writing, cleared while a
planner holds it open, and a damaged or unreadable file described, never raised."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from awb.search.vector_cache import VectorCache
from awb.search.vector_cache_upkeep import clear, look

VECTOR = b"\x00" * 1536  # a 384-dimension float32 vector's bytes, as the local model's


def filled(path: Path, **by_model: int) -> VectorCache:
    cache = VectorCache(path)
    for model, count in by_model.items():
        cache.put_many(model, [(i.to_bytes(32, "little"), VECTOR) for i in range(count)])
    return cache


def test_look_counts_the_entries_by_the_model_they_are_keyed_to(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    filled(path, old=3, new=5).close()
    contents = look(path)
    assert contents.exists and contents.problem is None
    assert contents.entries == 8 and contents.models == {"new": 5, "old": 3}  # most first
    assert contents.size_bytes == path.stat().st_size > 0


def test_look_makes_no_file_of_its_own(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet" / "vectors.sqlite3"
    assert not look(missing).exists and not missing.parent.exists()
    path = tmp_path / "vectors.sqlite3"
    filled(path, m=2).close()
    assert look(path).entries == 2
    # A read-only connection to a WAL database leaves its -wal and -shm files behind: none here.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.sqlite3"]


def test_look_reads_a_cache_a_planner_holds_open(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    cache = filled(path, m=4)
    try:
        assert look(path).entries == 4  # the entries still in the WAL are counted
    finally:
        cache.close()


def test_a_damaged_or_unreadable_cache_is_described_with_what_to_do(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(b"not a database, only bytes " * 200)
    contents = look(damaged)
    assert contents.damaged and contents.problem is not None
    assert "not a database" in contents.problem and "`awb cache clear` removes it" in contents.problem
    folder = tmp_path / "a-folder.sqlite3"  # unreadable whoever runs it, root too
    folder.mkdir()
    contents = look(folder)
    assert contents.problem is not None and not contents.damaged
    assert "cannot read" in contents.problem and "search.vector_cache" in contents.problem


def test_clear_empties_a_cache_a_planner_holds_open_and_gives_its_space_back(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    cache = filled(path, m=2000)
    try:
        before = look(path).size_bytes
        assert clear(path) == 2000
        assert look(path).entries == 0 and cache.count() == 0
        assert look(path).size_bytes < before / 10
        cache.put_many("m", [(b"k" * 32, VECTOR)])  # the planner goes on with the emptied file
        assert look(path).entries == 1
    finally:
        cache.close()


def test_clear_removes_a_damaged_file_and_leaves_no_file_where_there_was_none(tmp_path: Path) -> None:
    damaged = tmp_path / "vectors.sqlite3"
    damaged.write_bytes(b"garbage " * 100)
    assert clear(damaged) == 0 and not damaged.exists()
    assert clear(damaged) == 0 and not damaged.exists()


def test_looking_imports_neither_numpy_nor_a_model(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite3"
    filled(path, m=1).close()
    probe = (
        "import sys\nfrom pathlib import Path\nfrom awb.search.vector_cache_upkeep import look\n"
        f"assert look(Path({str(path)!r})).entries == 1\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'onnxruntime', 'tokenizers')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
