"""Moving an inventory between stores: JSON Lines of tools, each with its whole version history.

`awb inventory export` writes a header line, then one line per tool (live, archived and soft-deleted)
holding the full record (counters, tier, status, equipped flag, metadata, examples) and every version
with its own counters. `import` writes them into any store unchanged, so SQLite -> PostgreSQL -> SQLite
gives back the same records. Call history, staged writes and vectors stay behind: vectors are
recomputed by `awb reindex`, calls are the old store's log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import ValidationError

from awb.errors import InvalidParams, NameConflict
from awb.inventory.models import Tool, ToolVersion
from awb.inventory.store import Store

FORMAT = "awb-inventory"
FORMAT_VERSION = 1
#: More than any inventory holds (max_tools caps live tools far below it).
ALL = 1_000_000_000


@runtime_checkable
class ImportingStore(Protocol):
    def import_tool(self, tool: Tool, versions: list[ToolVersion]) -> None:
        """Insert a tool and its versions exactly as given, in one transaction."""
        ...


@dataclass
class ImportReport:
    imported: int = 0
    skipped: int = 0


def export_lines(store: Store) -> Iterator[str]:
    """The header, then every tool (live first, then deleted) with its versions, one JSON object a line."""
    live = store.list_tools(limit=ALL)
    deleted = store.purge_candidates(archived_before=None, deleted=True)
    yield json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "tools": len(live) + len(deleted)})
    for tool in [*live, *deleted]:
        versions = [v.model_dump(mode="json") for v in store.versions(tool.tool_id)]
        yield json.dumps({"tool": tool.model_dump(mode="json"), "versions": versions}, ensure_ascii=False)


def _parse(lines: Iterable[str]) -> Iterator[tuple[int, Tool, list[ToolVersion]]]:
    header_seen = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidParams(f"line {number} is not JSON: {exc.msg}", line=number) from None
        if not header_seen:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise InvalidParams("not an awb inventory export (no header line)", line=number)
            if data.get("version") != FORMAT_VERSION:
                raise InvalidParams(f"export format {data.get('version')} is not supported", line=number)
            header_seen = True
            continue
        try:
            tool = Tool.model_validate(data["tool"])
            versions = [ToolVersion.model_validate(v) for v in data.get("versions", [])]
        except (KeyError, TypeError, ValidationError) as exc:
            raise InvalidParams(f"line {number} is not a valid tool record: {exc}", line=number) from None
        yield number, tool, versions
    if not header_seen:
        raise InvalidParams("the export is empty")


def import_lines(store: Store, lines: Iterable[str]) -> ImportReport:
    """Write every tool of an export into `store`. A tool whose id is already there is skipped (so an
    import can be re-run); a live tool whose name another live tool holds is refused before any write."""
    if not isinstance(store, ImportingStore):
        raise InvalidParams(f"{type(store).__name__} cannot import")
    records = list(_parse(lines))
    report = ImportReport()
    fresh = []
    for number, tool, versions in records:
        if store.get(tool.tool_id) is not None:
            report.skipped += 1
            continue
        if tool.status != "deleted":
            holder = store.get_by_name(tool.name)
            if holder is not None:
                raise NameConflict(
                    f"line {number}: a live tool named {tool.name!r} already exists ({holder.tool_id})",
                    name=tool.name,
                    line=number,
                )
        fresh.append((tool, versions))
    for tool, versions in fresh:
        store.import_tool(tool, versions)
        report.imported += 1
    announce = getattr(store, "announce", None)
    if callable(announce) and report.imported:
        announce("resync", [], equipped=True)  # other servers reload rather than follow one by one
    return report


__all__ = ["FORMAT", "ImportReport", "ImportingStore", "export_lines", "import_lines"]
