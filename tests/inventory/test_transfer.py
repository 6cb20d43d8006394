"""`export_lines` / `import_lines` on both stores: records arrive as a craft would keep them, and records
from before a rule (a tag given twice, a name a craft now refuses) still come across and stay usable."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.store import Store
from awb.inventory.sqlite import SQLiteStore
from awb.inventory.transfer import export_lines, import_lines

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def older_tool(name: str, tags: list[str], **fields: object) -> Tool:
    """A record as an older awb stored it, written straight to a store (no craft checks)."""
    return Tool.model_validate(
        {
            "tool_id": f"tool_{name.lower()}",
            "name": name,
            "description": "does a thing",
            "language": "python",
            "runtime": "monty",
            "code": "def run(params):\n    return 1\n",
            "input_schema": {"type": "object"},
            "metadata": ToolMetadata(tags=tags),
            "created_at": NOW,
            "updated_at": NOW,
            **fields,
        }
    )


def moved(source: Store, target: Store) -> None:
    lines = list(export_lines(source))
    report = import_lines(target, lambda: lines)
    assert report.imported == len(lines) - 1


def older_inventory(path: Path, *tools: Tool) -> Store:
    store = SQLiteStore(path)
    for tool in tools:
        store.add_tool(tool)
    return store


def test_imported_tags_are_trimmed_and_each_kept_once(store: Store, tmp_path: Path) -> None:
    source = older_inventory(tmp_path / "older.db", older_tool("tagged", [" db", "db", "", "DB", "db "]))
    assert source.list_summaries()[0].tags == [" db", "db", "", "DB", "db "]  # what the older awb listed
    moved(source, store)
    source.close()
    imported = store.get("tool_tagged")
    assert imported is not None and imported.metadata.tags == ["db", "DB"]
    assert [s.tags for s in store.list_summaries(tag="db")] == [["db", "DB"]]
