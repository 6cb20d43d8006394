"""`export_lines` / `import_lines` on both stores: records arrive as a craft would keep them, and records
from before a rule (a tag given twice, a name a craft now refuses) still come across and stay usable."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from awb.config import Config, SearchConfig
from awb.errors import InvalidParams, NameConflict
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.sqlite import SQLiteStore
from awb.inventory.store import Store
from awb.inventory.transfer import export_lines, import_lines
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

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
    assert report.imported == sum('"tool": ' in line[:10] for line in lines)


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


def test_an_imported_tag_that_does_not_show_is_refused_at_its_line_and_nothing_is_written(
    store: Store, tmp_path: Path
) -> None:
    """An older awb stored such tags (no `tag` filter found one holding NUL); a craft now refuses them, and so
    does an import."""
    source = older_inventory(tmp_path / "older.db", older_tool("fine", ["db"]), older_tool("odd", ["db", "a\x00b"]))
    lines = list(export_lines(source))
    source.close()
    odd_line = next(n for n, line in enumerate(lines, start=1) if "tool_odd" in line[:40])
    with pytest.raises(InvalidParams, match=rf"^line {odd_line}: the tag 'a\\x00b' holds U\+0000 at character 2"):
        import_lines(store, lambda: lines)
    assert store.get("tool_fine") is None and store.get("tool_odd") is None


async def test_an_older_tool_named_like_a_meta_tool_imports_and_can_be_unequipped_renamed_and_deleted(
    store_config: Config, tmp_path: Path
) -> None:
    """Crafts refuse `Awb_Search` (a meta-tool's name in another case); an inventory from before holds one,
    equipped. It moves unchanged, and everything that lets a person retire it works."""
    source = older_inventory(tmp_path / "older.db", older_tool("Awb_Search", ["find"], equipped=True))
    lines = list(export_lines(source))
    source.close()
    async with Workbench(store_config.model_copy(update={"search": SearchConfig(mode="text")})) as workbench:
        assert import_lines(workbench.store, lambda: lines).imported == 1
        older = workbench.resolve("Awb_Search")
        assert older.equipped and [t.name for t in workbench.list_tools()] == ["Awb_Search"]
        assert (await workbench.call("Awb_Search", {})).result == 1
        assert not workbench.unequip("Awb_Search").equipped
        with pytest.raises(NameConflict):
            workbench.equip("Awb_Search")
        # There is no rename: the same code crafted under a name of its own, then the old one deleted.
        renamed = await workbench.craft(
            {"name": "find_things", "code": older.code, "description": older.description, "tags": older.metadata.tags}
        )
        workbench.delete(older.tool_id)
        assert [t.name for t in workbench.list_tools()] == [renamed.name]


def test_a_record_holding_a_lone_surrogate_is_refused_at_its_line_and_nothing_is_written(
    store: Store, tmp_path: Path
) -> None:
    source = older_inventory(tmp_path / "older.db", older_tool("fine", []))
    lines = list(export_lines(source))
    source.close()
    # `json.loads` reads a `\ud800` escape as a lone surrogate, which no store can write (SQLite raised
    # UnicodeEncodeError: internal_error, with the tool's transaction half done).
    lines.append(lines[1].replace("tool_fine", "tool_odd").replace("does a thing", "does \\ud800 a thing"))
    with pytest.raises(InvalidParams, match=rf"line {len(lines)}: .*description holds text that is not valid Unicode"):
        import_lines(store, lambda: lines)
    assert store.get("tool_fine") is None and store.get("tool_odd") is None


@pytest.mark.parametrize(
    ("odd", "said"),
    [
        # `json.loads` takes NaN: a schema holding one was stored so, and listed with null in its place
        ('"input_schema": {"type": "object", "maximum": NaN}', r"line {n}: .*input_schema/maximum holds a number JSON"),
        (
            '"input_schema": ' + "[" * 100_000 + "]" * 100_000,
            r"line {n} is JSON nested too deeply",
        ),  # was internal_error
    ],
)
def test_a_record_json_cannot_hold_is_refused_at_its_line_and_nothing_is_written(
    store: Store, tmp_path: Path, odd: str, said: str
) -> None:
    source = older_inventory(tmp_path / "older.db", older_tool("fine", []))
    lines = list(export_lines(source))
    source.close()
    assert '"input_schema": {"type": "object"}' in lines[1]
    odd_line = lines[1].replace("tool_fine", "tool_odd").replace('"name": "fine"', '"name": "odd"')
    lines.append(odd_line.replace('"input_schema": {"type": "object"}', odd))
    with pytest.raises(InvalidParams, match=said.format(n=len(lines))):
        import_lines(store, lambda: lines)
    assert store.get("tool_fine") is None and store.get("tool_odd") is None
