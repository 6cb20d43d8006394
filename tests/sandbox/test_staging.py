"""Staged writes: listed, applied once for real, or discarded."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.errors import InvalidParams, SandboxViolation
from awb.inventory.sqlite import SQLiteStore
from awb.sandbox import staging
from sandbox_support import granted_tool

#: The configuration's grants: `tool_1` may write in the test's temporary directory (set by `store`).
GRANTS: dict[str, list[str]] = {}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteStore:
    """An inventory holding `tool_1`, granted the test's temporary directory."""
    store = SQLiteStore(tmp_path / "inv.db")
    store.add_tool(granted_tool("tool_1", tmp_path))
    monkeypatch.setitem(GRANTS, "tool_1", [str(tmp_path)])
    return store


def test_apply_writes_the_file_creating_parents_and_marks_it_applied(store: SQLiteStore, tmp_path: Path) -> None:
    target = tmp_path / "deep" / "dir" / "out.txt"
    staged_id = store.stage_write("tool_1", str(target), "content", datetime.now(UTC), call_id="call_1")
    assert [w.id for w in staging.list_staged(store)] == [staged_id]
    applied = staging.apply_staged(store, staged_id, grants=GRANTS)
    assert applied.status == "applied"
    assert target.read_text() == "content"
    assert staging.list_staged(store) == []
    assert [w.status for w in staging.list_staged(store, None)] == ["applied"]


def test_applying_twice_is_refused(store: SQLiteStore, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    staged_id = store.stage_write("tool_1", str(target), "one", datetime.now(UTC), call_id="call_1")
    staging.apply_staged(store, staged_id, grants=GRANTS)
    target.write_text("changed by a person")
    with pytest.raises(InvalidParams, match="applied, not pending"):
        staging.apply_staged(store, staged_id, grants=GRANTS)
    assert target.read_text() == "changed by a person"


def test_discard_writes_nothing_and_cannot_then_be_applied(store: SQLiteStore, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    staged_id = store.stage_write("tool_1", str(target), "x", datetime.now(UTC), call_id="call_1")
    assert staging.discard_staged(store, staged_id).status == "discarded"
    with pytest.raises(InvalidParams):
        staging.apply_staged(store, staged_id, grants=GRANTS)
    assert not target.exists()


def test_unknown_id_is_reported(store: SQLiteStore) -> None:
    with pytest.raises(InvalidParams, match="no staged write"):
        staging.apply_staged(store, 999, grants=GRANTS)


def test_failed_apply_leaves_the_write_pending(store: SQLiteStore, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    staged_id = store.stage_write("tool_1", str(blocker / "out.txt"), "x", datetime.now(UTC), call_id="call_1")
    with pytest.raises(InvalidParams, match="cannot write"):
        staging.apply_staged(store, staged_id, grants=GRANTS)
    assert staging.get_staged(store, staged_id).status == "pending"


@pytest.mark.parametrize("where", ["file/out.txt", "file/deeper/out.txt", "folder"])
def test_a_failed_apply_names_what_is_in_the_way(store: SQLiteStore, tmp_path: Path, where: str) -> None:
    # Before: "cannot write .../file/out.txt: File exists" (Python's mkdir of a path through a file), and
    # for a folder in place of the file, nothing named the temporary file in the way either.
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    target = tmp_path / where
    staged_id = store.stage_write("tool_1", str(target), "x", datetime.now(UTC), call_id="call_1")
    with pytest.raises(InvalidParams) as refused:
        staging.apply_staged(store, staged_id, grants=GRANTS)
    why = f"{tmp_path / 'file'}: a file, not a folder" if where.startswith("file/") else "Is a directory"
    assert refused.value.message == f"cannot write {target}: {why}"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".awb")) == []


def test_apply_without_the_protected_list_still_refuses_awb_directories_and_config(
    store: SQLiteStore, tmp_path: Path
) -> None:
    for target in (tmp_path / ".awb" / "inventory.db", tmp_path / "AWB.CONFIG.JSON"):
        staged_id = store.stage_write("tool_1", str(target), "x", datetime.now(UTC), call_id="call_1")
        with pytest.raises(SandboxViolation):
            staging.apply_staged(store, staged_id, grants=GRANTS, force=True)
        assert not target.exists()


def test_an_apply_interrupted_while_writing_leaves_the_write_pending(
    store: SQLiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C during `awb staged apply --all` lands in some write's file write: that write must stay pending,
    # not `applying` for good (a status nothing applies, discards or ever moves on from).
    staged_id = store.stage_write("tool_1", str(tmp_path / "out.txt"), "content", datetime.now(UTC), call_id="c")

    def interrupted(path: Path, content: str) -> None:
        raise KeyboardInterrupt

    write_atomically = staging._write_atomically
    monkeypatch.setattr(staging, "_write_atomically", interrupted)
    with pytest.raises(KeyboardInterrupt):
        staging.apply_staged(store, staged_id, grants=GRANTS)
    assert staging.get_staged(store, staged_id).status == "pending"
    monkeypatch.setattr(staging, "_write_atomically", write_atomically)
    assert staging.apply_staged(store, staged_id, grants=GRANTS).status == "applied"
