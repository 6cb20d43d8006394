"""The storage protocol the workbench depends on. SQLite is the embedded default."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from awb.inventory.models import CallRecord, MemoryLevel, Tool, ToolCounters, ToolSummary, ToolVersion
from awb.inventory.versioning import NewVersion


class Store(Protocol):
    def close(self) -> None: ...

    def add_tool(self, tool: Tool, *, max_active: int | None = None, keep_case_variants: bool = False) -> None:
        """Insert a tool; with `max_active`, raise `limit_exceeded` unless fewer live tools are stored,
        checked atomically with the insert. Raise `name_conflict` naming the live tool that holds its name
        ignoring case (the database refuses it too), unless `keep_case_variants` (an index of other
        servers' tools, whose names are case-sensitive)."""
        ...

    def check_room(self, max_active: int) -> None:
        """Raise `limit_exceeded` when `max_active` live tools are already stored (an early check)."""
        ...

    def get(self, tool_id: str) -> Tool | None: ...

    def get_many(self, tool_ids: Sequence[str]) -> dict[str, Tool]:
        """The tools of these ids that exist (any status), read at once: one query, not one per id."""
        ...

    def get_by_name(self, name: str, *, include_deleted: bool = False) -> Tool | None:
        """The live tool with this name (or, if asked, the latest deleted one)."""
        ...

    def name_holder(self, name: str) -> Tool | None:
        """The live tool whose name equals `name` ignoring case (that very name first): the one a new tool
        of that name would clash with. Lookup by name (`get_by_name`) stays exact."""
        ...

    def case_variants(self) -> list[list[str]]:
        """Names of live tools that equal one another ignoring case, kept from before names were unique
        ignoring case, one list per name in the order crafted (`awb doctor` warns of them)."""
        ...

    def update(self, tool_id: str, **fields: Any) -> None: ...

    def update_if(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """Set `fields` only while the tool's columns hold the `expected` values, atomically (a
        compare-and-set); False when they no longer do (another connection or process changed them)."""
        ...

    def update_to_version(self, tool_id: str, expected: Mapping[str, Any], **fields: Any) -> bool:
        """`update_if` that also holds only while version `fields["version"]` of the tool is stored,
        atomically with a pruning `add_version` (a rollback never makes a removed version current), and
        while the tool is not deleted (a deleted tool does not move)."""
        ...

    def delete_forever(self, tool_ids: list[str]) -> int: ...

    def purge(self, doomed: Sequence[Tool]) -> list[str]:
        """Remove these tools for good, with everything recorded about them, each only while its status
        and `updated_at` are still as read (another server may have purged it, or a call brought an
        archived one back, since): the ids of those removed, by this call and no other."""
        ...

    def deleted_past(self, keep: int) -> list[Tool]:
        """Soft-deleted tools past the `keep` most recently deleted, the longest-deleted first."""
        ...

    def purge_candidates(self, *, archived_before: datetime | None, deleted: bool) -> list[Tool]:
        """Archived tools last changed before `archived_before`, and (if asked) every soft-deleted tool."""
        ...

    def add_version(self, tool_id: str, version: ToolVersion, *, keep: int | None = None) -> list[int]:
        """Store a new version; with `keep`, remove the tool's oldest versions past `keep` in the same
        transaction, never its current version nor this one. The version numbers removed."""
        ...

    def add_current_version(
        self, tool_id: str, based_on: int, version: ToolVersion, *, keep: int | None = None
    ) -> NewVersion:
        """Store `version` as the tool's next version and make it current, in one transaction, only while
        `based_on` is still its current version and it is not deleted (nor purged). The store numbers it
        (`version.version` is ignored): one past every version the tool holds. With `keep`, prune as
        `add_version` does."""
        ...

    def versions(self, tool_id: str) -> list[ToolVersion]: ...

    def count_active(self) -> int: ...

    def list_tools(
        self,
        *,
        memory_level: MemoryLevel | None = None,
        tag: str | None = None,
        include_archived: bool = True,
        equipped: bool | None = None,
        limit: int = 50,
    ) -> list[Tool]: ...

    def list_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[ToolSummary]: ...

    def page_summaries(
        self, *, memory_level: MemoryLevel | None = None, tag: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[ToolSummary], int]:
        """One page of `list_summaries` and the number of all matches."""
        ...

    def search_summaries(self, words: Sequence[str], limit: int, *, candidates: int = 50) -> list[ToolSummary]:
        """Live tools matching any of `words`, as summaries with BM25 scores, archived ones last."""
        ...

    def search_text(self, words: Sequence[str], limit: int) -> list[tuple[Tool, float]]:
        """Tools matching any of `words` with their BM25 scores (higher is better)."""
        ...

    def record_call(
        self, call: CallRecord, *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> ToolCounters:
        """Append a call record and increment the tool's counters in the store (never read-modify-write
        outside it), in one transaction; on success set the tier `level_after` gives the new usage."""
        ...

    def record_calls(
        self, calls: Sequence[CallRecord], *, level_after: Callable[[MemoryLevel, int], MemoryLevel] | None = None
    ) -> list[ToolCounters | Exception]:
        """`record_call` for several calls at once (a store may share one transaction between them); each
        call's counters, or the error that kept that one call from being recorded. Never raises for one
        call's failure."""
        ...

    def calls(self, tool_id: str, limit: int = 20) -> list[CallRecord]: ...

    def prune_calls(self, keep: int, tool_ids: Sequence[str] | None = None) -> int:
        """Delete the call records of these tools (None: every tool) past each one's `keep` most recent;
        how many went. Counters live on the tool and its versions and do not move."""
        ...

    def stage_write(
        self,
        tool_id: str,
        path: str,
        content: str,
        at: datetime,
        *,
        call_id: str,
        max_tool_bytes: int | None = None,
        max_total_bytes: int | None = None,
        max_tool_writes: int | None = None,
        max_total_writes: int | None = None,
    ) -> int:
        """Keep a write that call `call_id` of a tool asked for until a person applies or discards it;
        `output_exceeded` when the pending bytes or writes of the tool or of all tools would pass a cap."""
        ...

    def iter_maintainable(self, idle_before: Mapping[str, str] | None = None) -> Iterator[Tool]:
        """Active tools in short- or medium-term memory; with `idle_before` ({tier: ISO time}), only
        those of a listed tier whose last use (or creation) is before its time."""
        ...

    def data_version(self) -> int:
        """A number that changes when another connection commits (to notice CLI changes)."""
        ...

    def schema_version(self) -> int: ...


def record_one_at_a_time(
    record_call: Callable[..., ToolCounters],
    calls: Sequence[CallRecord],
    level_after: Callable[[MemoryLevel, int], MemoryLevel] | None,
) -> list[ToolCounters | Exception]:
    """`Store.record_calls` by `record_call`, call after call: each call's counters, or its own error."""
    recorded: list[ToolCounters | Exception] = []
    for call in calls:
        try:
            recorded.append(record_call(call, level_after=level_after))
        except Exception as exc:
            recorded.append(exc)
    return recorded
