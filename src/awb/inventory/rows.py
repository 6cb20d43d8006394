"""Rows <-> records, shared by the SQLite and PostgreSQL stores: both keep the same columns, JSON fields as
text (so a record round-trips byte for byte) and timestamps as ISO strings. The engines differ in two
places only: tags are a JSON text in SQLite and a text[] in PostgreSQL, booleans are 0/1 in SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any, TypeVar

from awb.errors import LimitExceeded, OutputExceeded
from awb.inventory.models import CallRecord, Example, Tool, ToolSummary, ToolVersion
from awb.search.fts import split_identifier

T = TypeVar("T")

JSON_FIELDS = frozenset({"input_schema", "output_schema", "examples", "capabilities"})
TOOL_COLUMNS = (
    "tool_id name description language runtime code input_schema output_schema examples tags problem "
    "created_by_agent capabilities version parent_version created_at updated_at last_used_at usage_count "
    "success_count failure_count memory_level status equipped"
).split()
TOOL_FIELDS = ", ".join(f"t.{c}" for c in TOOL_COLUMNS)
SELECT_TOOLS = f"SELECT {TOOL_FIELDS} FROM tools t"
SUMMARY_COLUMNS = "tool_id, name, description, memory_level, usage_count, tags, status, equipped"
VERSION_COLUMNS = (
    "version, code, description, input_schema, output_schema, examples, runtime, created_at, usage_count, failure_count"
)
CALL_COLUMNS = "tool_id, version, at, duration_ms, ok, error_code, call_id, peak_memory_bytes"
STAGED_COLUMNS = ("id", "tool_id", "call_id", "path", "content", "created_at", "status")
#: The columns a tool's tier change is conditioned on (`update_if`): what a call, an equip or another
#: server's maintenance moves.
TIER_SNAPSHOT = ("memory_level", "status", "last_used_at", "usage_count", "equipped")


def iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat(timespec="microseconds")


def _tags(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


def encode(field: str, value: Any, *, sqlite: bool) -> Any:
    """A field's value as the stores keep it (`sqlite`: booleans as 0/1)."""
    if field in JSON_FIELDS:
        if value is None:
            return None
        if isinstance(value, list):
            value = [v.model_dump(mode="json") if isinstance(v, Example) else v for v in value]
        elif hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        return json.dumps(value)
    if isinstance(value, datetime):
        return iso(value)
    if sqlite and isinstance(value, bool):
        return int(value)
    return value


def tool_values(tool: Tool, *, sqlite: bool) -> dict[str, Any]:
    """Every column of a tool's row (the text-search columns included); `sqlite`: tags as JSON text."""
    values: dict[str, Any] = {}
    for column in TOOL_COLUMNS:
        if column in ("tags", "problem", "created_by_agent"):
            continue
        values[column] = encode(column, getattr(tool, column), sqlite=sqlite)
    values["tags"] = json.dumps(tool.metadata.tags) if sqlite else list(tool.metadata.tags)
    values["tags_text"] = " ".join(tool.metadata.tags)
    values["problem"] = tool.metadata.problem
    values["created_by_agent"] = tool.metadata.created_by_agent
    values["search_name"] = split_identifier(tool.name)
    return values


def field_values(fields: dict[str, Any], *, sqlite: bool) -> dict[str, Any]:
    """`update`'s keyword fields as columns: metadata spread over its columns, the name's search form."""
    if "metadata" in fields:
        meta = fields.pop("metadata")
        fields.update(
            tags=json.dumps(meta.tags) if sqlite else list(meta.tags),
            tags_text=" ".join(meta.tags),
            problem=meta.problem,
            created_by_agent=meta.created_by_agent,
        )
    if "name" in fields:
        fields["search_name"] = split_identifier(fields["name"])
    return {k: encode(k, v, sqlite=sqlite) for k, v in fields.items()}


def row_to_tool(row: Sequence[Any]) -> Tool:
    data = dict(zip(TOOL_COLUMNS, row, strict=True))
    for key in JSON_FIELDS:
        if data[key] is not None:
            data[key] = json.loads(data[key])
    data["metadata"] = {
        "tags": _tags(data.pop("tags")),
        "problem": data.pop("problem"),
        "created_by_agent": data.pop("created_by_agent"),
    }
    data["equipped"] = bool(data["equipped"])
    return Tool.model_validate(data)


def relative_to_best(scores: Sequence[float]) -> list[float]:
    """Text matches' BM25 over the best one's: scores in [0, 1] as hybrid's are (unchanged when none is
    positive). Raw BM25 is no score to show: on a small inventory a word every tool has gets the floor
    idf (1e-6), so the only tool of a one-tool inventory scored 0.0 for a perfect match."""
    top = max(scores, default=0.0)
    return list(scores) if top <= 0 else [score / top for score in scores]


def row_to_summary(row: Sequence[Any], score: float | None) -> ToolSummary:
    # The hot path of list and search. pydantic-core validates these few fields in about half the time
    # that `model_construct`'s Python loop takes to skip validating them.
    return ToolSummary.model_validate(
        {
            "tool_id": row[0],
            "name": row[1],
            "description": row[2],
            "memory_level": row[3],
            "usage_count": row[4],
            "tags": _tags(row[5]),
            "status": row[6],
            "equipped": bool(row[7]),
            "score": None if score is None else round(score, 4),
        }
    )


def row_to_version(row: Sequence[Any]) -> ToolVersion:
    return ToolVersion(
        version=row[0],
        code=row[1],
        description=row[2],
        input_schema=json.loads(row[3]),
        output_schema=None if row[4] is None else json.loads(row[4]),
        examples=json.loads(row[5]),
        runtime=row[6],
        created_at=row[7],
        usage_count=row[8],
        failure_count=row[9],
    )


def version_values(tool_id: str, version: ToolVersion) -> tuple[Any, ...]:
    """(tool_id, VERSION_COLUMNS...) of a version's row."""
    return (
        tool_id,
        version.version,
        version.code,
        version.description,
        json.dumps(version.input_schema),
        None if version.output_schema is None else json.dumps(version.output_schema),
        json.dumps([e.model_dump(mode="json") for e in version.examples]),
        version.runtime,
        iso(version.created_at),
        version.usage_count,
        version.failure_count,
    )


def first_version(tool: Tool) -> ToolVersion:
    return ToolVersion(
        version=tool.version,
        code=tool.code,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        examples=tool.examples,
        runtime=tool.runtime,
        created_at=tool.created_at,
    )


def call_values(call: CallRecord, *, sqlite: bool) -> tuple[Any, ...]:
    """The CALL_COLUMNS of a call's row."""
    return (
        call.tool_id,
        call.version,
        iso(call.at),
        call.duration_ms,
        int(call.ok) if sqlite else call.ok,
        call.error_code,
        call.call_id or None,
        call.peak_memory_bytes,
    )


def row_to_call(row: Sequence[Any]) -> CallRecord:
    return CallRecord(
        tool_id=row[0],
        version=row[1],
        at=row[2],
        duration_ms=row[3],
        ok=bool(row[4]),
        error_code=row[5],
        call_id=row[6] or "",
        peak_memory_bytes=row[7],
    )


SELECT_STAGED = f"SELECT {', '.join(STAGED_COLUMNS)} FROM staged_writes"


def staged_row(row: Sequence[Any]) -> dict[str, Any]:
    # A preview's row has one more column: the whole content's size in bytes (`staged_page_query`).
    columns = STAGED_COLUMNS if len(row) == len(STAGED_COLUMNS) else (*STAGED_COLUMNS, "size")
    return dict(zip(columns, tuple(row), strict=True))


def staged_page_query(
    mark: str,
    status: str | None,
    tool_id: str | None,
    after_id: int | None,
    before_id: int | None,
    limit: int | None,
    *,
    preview: int | None = None,
    utf8: str = "",
    size: str = "",
) -> tuple[str, list[str | int]]:
    """The query (and its values) of `Store.staged_writes`, with `mark` the store's placeholder. The page
    before `before_id` is the nearest rows to it: read backwards, so the caller turns the rows round.

    With `preview`, each content is its first `preview` bytes of UTF-8 (`utf8`: the store's expression of
    the content as bytes; in bytes, as SQLite's text functions stop at a NUL character) and `size` (the
    store's expression of its whole size in bytes) is read too: a page of the largest writes is ~100 MB."""
    where: list[str] = []
    args: list[str | int] = []
    select = SELECT_STAGED
    if preview is not None:
        columns = [f"substr({utf8}, 1, {int(preview)})" if c == "content" else c for c in STAGED_COLUMNS]
        select = f"SELECT {', '.join(columns)}, {size} FROM staged_writes"
    for clause, value in (("status =", status), ("tool_id =", tool_id), ("id >", after_id), ("id <", before_id)):
        if value is not None:
            where.append(f"{clause} {mark}")
            args.append(value)
    order = " ORDER BY id DESC" if before_id is not None and limit is not None else " ORDER BY id"
    query = select + (f" WHERE {' AND '.join(where)}" if where else "") + order
    if limit is not None:
        query += f" LIMIT {mark}"
        args.append(limit)
    return query, args


@dataclass(frozen=True)
class StagingCaps:
    """What may be pending at once (None: no cap): bytes and writes per tool, and for every tool together.
    Empty writes pass every byte cap, so their number is capped too."""

    tool_bytes: int | None = None
    total_bytes: int | None = None
    tool_writes: int | None = None
    total_writes: int | None = None

    def checks(
        self, tool_id: str, mark: str, size: str
    ) -> Iterator[tuple[str, list[str], tuple[int | None, int | None], str]]:
        """Per scope: the pending-writes query (count, bytes) with its values, the (bytes, writes) caps,
        and the scope's config-name suffix. `size` is the store's expression for a write's size in
        bytes, the one its `staged_pending` index holds."""
        query = f"SELECT count(*), coalesce(sum({size}), 0) FROM staged_writes WHERE status = 'pending'"
        if self.tool_bytes is not None or self.tool_writes is not None:
            yield f"{query} AND tool_id = {mark}", [tool_id], (self.tool_bytes, self.tool_writes), "per_tool"
        if self.total_bytes is not None or self.total_writes is not None:
            yield query, [], (self.total_bytes, self.total_writes), "total"

    def refuse_past(self, size: int, pending: tuple[int, int], caps: tuple[int | None, int | None], scope: str) -> None:
        """`output_exceeded` when one more write of `size` bytes would pass a cap of `scope`, with
        (`count`, `bytes`) already pending."""
        count, pending_bytes = int(pending[0]), int(pending[1])
        byte_cap, write_cap = caps
        if byte_cap is not None and pending_bytes + size > byte_cap:
            name = f"sandbox.max_staged_bytes_{scope}"
            raise OutputExceeded(
                f"staging {size} more bytes would pass {name} ({byte_cap} bytes pending at most); "
                "apply or discard staged writes first",
                limit=name,
                pending=pending_bytes,
            )
        if write_cap is not None and count + 1 > write_cap:
            name = f"sandbox.max_staged_writes_{scope}"
            raise OutputExceeded(
                f"staging one more write would pass {name} ({write_cap} writes pending at most); "
                "apply or discard staged writes first",
                limit=name,
                pending_writes=count,
            )


def snapshot_condition(expected: Mapping[str, Any], *, sqlite: bool) -> tuple[str, list[Any]]:
    """`col = ? AND ...` (`%s` in PostgreSQL) for each expected column value (`IS NULL` for None), and
    the arguments."""
    mark = "?" if sqlite else "%s"
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in expected.items():
        if column not in TOOL_COLUMNS:
            raise ValueError(f"not a tool column: {column}")
        encoded = encode(column, value, sqlite=sqlite)
        if encoded is None:
            clauses.append(f"{column} IS NULL")
        else:
            clauses.append(f"{column} = {mark}")
            args.append(encoded)
    return " AND ".join(clauses) or "TRUE", args


def maintainable_where(idle_before: Mapping[str, str] | None, mark: str) -> tuple[str, list[str]]:
    """The WHERE clause (and its values) of `Store.iter_maintainable`: only the tools that may be due,
    so maintenance reads a handful of rows, not the whole short- and medium-term inventory."""
    if idle_before is None:
        return "t.status = 'active' AND t.memory_level IN ('short_term', 'medium_term')", []
    tiers = [level for level in ("short_term", "medium_term") if level in idle_before]
    if not tiers:
        return "FALSE", []
    clause = " OR ".join(
        f"(t.memory_level = '{level}' AND COALESCE(t.last_used_at, t.created_at) < {mark})" for level in tiers
    )
    return f"t.status = 'active' AND ({clause})", [idle_before[level] for level in tiers]


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of `size` (the last one shorter): imports write a batch per statement."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def versions_past(numbers: Iterable[int], keep: int, protected: Iterable[int]) -> list[int]:
    """The oldest of a tool's version `numbers` past the `keep` it may hold (`max_versions_per_tool`),
    never one of `protected` (its current version, the one just added): those stay even past `keep`."""
    numbers = sorted(set(numbers))
    excess = len(numbers) - keep
    if excess <= 0:
        return []
    spared = set(protected)
    return [n for n in numbers if n not in spared][:excess]


def inventory_full(max_active: int) -> LimitExceeded:
    return LimitExceeded(f"the inventory holds its maximum of {max_active} tools; delete some first", limit="max_tools")


__all__ = [
    "CALL_COLUMNS",
    "JSON_FIELDS",
    "SELECT_STAGED",
    "SELECT_TOOLS",
    "STAGED_COLUMNS",
    "SUMMARY_COLUMNS",
    "TIER_SNAPSHOT",
    "TOOL_COLUMNS",
    "TOOL_FIELDS",
    "VERSION_COLUMNS",
    "call_values",
    "chunks",
    "encode",
    "field_values",
    "first_version",
    "inventory_full",
    "iso",
    "row_to_call",
    "row_to_summary",
    "row_to_tool",
    "row_to_version",
    "snapshot_condition",
    "staged_page_query",
    "staged_row",
    "tool_values",
    "version_values",
    "versions_past",
]
