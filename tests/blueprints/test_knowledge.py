"""Knowledge bases: passages cut from text and Markdown, searched with the workbench's engine, kept in step
with the directory, and read within bounds (links out, FIFOs, huge files and other suffixes are skipped)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from awb.blueprints.knowledge import MAX_FILE_BYTES, KnowledgeBase, KnowledgeLibrary, knowledge_handler
from awb.blueprints.passages import passages_of
from awb.config import SearchConfig
from awb.errors import InvalidParams, Unavailable
from support import embeddings_installed

HANDBOOK = """# Handbook

Welcome to the team.

## Refunds

Refunds are paid within 14 days of the return.

```sh
# not a heading inside a fence
```

## Travel

Book trains, not planes, for trips under 500 km.
"""


def _base(directory: Path, mode: str = "text") -> KnowledgeBase:
    return KnowledgeBase("handbook", directory, SearchConfig(mode=mode))  # type: ignore[arg-type]


def _sources(reply: dict[str, object]) -> list[tuple[str, str]]:
    return [(p["source"], p["title"]) for p in reply["passages"]]  # type: ignore[attr-defined]


def test_markdown_passages_carry_their_heading_trail_and_fences_hold_no_headings() -> None:
    passages = passages_of(HANDBOOK, "policies/handbook.md", markdown=True)
    assert [p.title for p in passages] == ["Handbook", "Handbook > Refunds", "Handbook > Travel"]
    assert "# not a heading inside a fence" in passages[1].text
    assert {p.source for p in passages} == {"policies/handbook.md"}


def test_long_text_is_cut_at_word_boundaries_within_the_passage_size() -> None:
    words = " ".join(f"word{i}" for i in range(600))
    passages = passages_of(f"{words}\n\nshort tail\n\n{'x' * 2500}", "notes.txt", markdown=False, limit=1000)
    assert all(len(p.text) <= 1000 for p in passages) and {p.title for p in passages} == {"notes"}
    joined = " ".join(p.text for p in passages).split()
    assert joined[:600] == words.split() and "short" in joined and "".join(joined[602:]) == "x" * 2500


def test_search_returns_the_passage_that_answers_with_source_and_title(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "handbook.md").write_text(HANDBOOK)
    (tmp_path / "faq.txt").write_text("The office opens at nine.\n\nLunch is at noon.")
    base = _base(tmp_path)
    try:
        reply = base.search("when are refunds paid?")
        assert reply["mode"] == "text" and reply["knowledge_base"] == "handbook"
        assert _sources(reply)[0] == ("policies/handbook.md", "Handbook > Refunds")
        assert "within 14 days" in reply["passages"][0]["text"]
        assert _sources(base.search("office opens", limit=1)) == [("faq.txt", "faq")]
        assert base.search("zebra")["passages"] == [] and "note" in base.search("zebra")
    finally:
        base.close()


def test_passages_may_share_a_title_within_a_file_and_across_files(tmp_path: Path) -> None:
    section = "\n\n".join(f"Paragraph {i} about lunch options and {'more ' * 40}" for i in range(6))
    (tmp_path / "a.md").write_text(f"# Notes\n\n{section}")
    (tmp_path / "b.md").write_text("# Notes\n\nLunch is served at noon.")
    base = _base(tmp_path)
    try:
        assert base.refresh() >= 3  # at least two from a.md, one from b.md
        titles = {p["title"] for p in base.search("lunch", limit=10)["passages"]}
        assert titles == {"Notes"}
    finally:
        base.close()


def test_the_index_follows_edits_new_files_and_deletions(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("Alpha servers restart on Mondays.")
    (tmp_path / "b.md").write_text("Beta servers restart on Fridays.")
    base = _base(tmp_path)
    try:
        assert base.refresh() == 2
        (tmp_path / "a.md").write_text("Alpha servers now restart on Sundays, at dawn.")
        (tmp_path / "b.md").unlink()
        (tmp_path / "c.txt").write_text("Gamma servers never restart.")
        texts = [p["text"] for p in base.search("servers restart", limit=10)["passages"]]
        assert sorted(texts) == ["Alpha servers now restart on Sundays, at dawn.", "Gamma servers never restart."]
    finally:
        base.close()


def test_reading_stays_inside_the_directory_and_within_bounds(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret launch codes")
    root = tmp_path / "kb"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "notes.md").write_text("hidden secret")
    (root / "inside.md").write_text("public notes")
    (root / "link-out.md").symlink_to(outside)
    (root / "link-in.md").symlink_to(root / "inside.md")
    (root / "huge.md").write_bytes(b"secret " * (MAX_FILE_BYTES // 7 + 1))
    (root / "tool.py").write_text("secret = 1")
    os.mkfifo(root / "pipe.md")  # opening a FIFO to read would wait for a writer forever
    base = _base(root)
    try:
        assert base.search("secret")["passages"] == []  # and the FIFO never blocked it (pytest's timeout)
        assert {p["source"] for p in base.search("public notes")["passages"]} == {"inside.md", "link-in.md"}
        skipped = "\n".join(base.skipped)
        assert "link-out.md: a link that leaves the directory" in skipped
        assert "pipe.md: not a regular file" in skipped and "huge.md: over" in skipped
    finally:
        base.close()


def test_bad_queries_and_a_missing_directory_are_clear_errors(tmp_path: Path) -> None:
    base = _base(tmp_path / "absent")
    try:
        with pytest.raises(Unavailable, match="no directory"):
            base.search("anything")
        with pytest.raises(InvalidParams, match="non-empty"):
            base.search("   ")
        with pytest.raises(InvalidParams, match="over 1000 characters"):
            base.search("x" * 1001)
    finally:
        base.close()


@pytest.mark.anyio
async def test_the_tool_handler_answers_errors_as_failed_outcomes(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("Refunds take 14 days.")
    library = KnowledgeLibrary({"handbook": tmp_path})
    try:
        handler = knowledge_handler(library, "handbook")
        found = await handler({"query": "refunds", "max_results": 1})
        assert found.ok and found.payload["passages"][0]["text"] == "Refunds take 14 days."
        empty = await handler({"query": ""})
        assert not empty.ok and empty.error_code == "invalid_params"
        unknown = await knowledge_handler(library, "wiki")({"query": "refunds"})
        assert not unknown.ok and "configured: handbook" in unknown.payload
    finally:
        library.close()


@pytest.mark.skipif(not embeddings_installed(), reason="the embed extra is not installed")
def test_hybrid_search_finds_a_passage_by_meaning_when_embeddings_are_installed(tmp_path: Path) -> None:
    (tmp_path / "money.md").write_text(
        "# Reimbursements\n\nWe pay back customers two weeks after they send goods back."
    )
    (tmp_path / "travel.md").write_text("# Travel\n\nBook trains for short trips.")
    base = _base(tmp_path, mode="hybrid")
    try:
        reply = base.search("how long until I get my refund")
        assert reply["mode"] == "hybrid" and reply["passages"][0]["source"] == "money.md"
    finally:
        base.close()
