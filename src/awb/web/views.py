"""What the panel's pages show, shaped from the workbench: rows of the Active Tools list, one tool's
inspection (highlighted code, versions, diffs), staged writes with their diffs.

Everything here is synchronous and reads the inventory; the routes run it in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

from awb.inventory.models import MEMORY_LEVELS, CallRecord, Tool, ToolVersion
from awb.safe_text import visible
from awb.sandbox import staging
from awb.web import bounded_diff
from awb.web.code_view import CodeBlock, highlighted, highlighted_diff, highlighted_json
from awb.workbench import Workbench

#: Most rows the list shows; the filters narrow past it.
LIST_LIMIT = 500
#: Bytes of a staged write's current file read for its diff; a larger file is summarised, not diffed.
MAX_DIFF_FILE_BYTES = 512 * 1024

Status = Literal["ready", "failing", "archived", "deleted"]
SORTS = {
    "tier": "memory tier",
    "name": "name",
    "usage": "most used",
    "last_call": "last call",
}
RUNTIME_LABELS = {"monty": "Python · Monty", "cpython": "Python · CPython", "javascript": "JS", "wasm": "WASM"}
TIER_LABELS = {
    "long_term": "long-term",
    "medium_term": "medium-term",
    "short_term": "short-term",
    "archived": "archived",
}


@dataclass(frozen=True)
class ToolRow:
    tool: Tool
    status: Status
    last_call: CallRecord | None

    @property
    def runtime_label(self) -> str:
        return RUNTIME_LABELS.get(self.tool.runtime, self.tool.runtime)

    @property
    def tier_label(self) -> str:
        return TIER_LABELS.get(self.tool.memory_level, self.tool.memory_level)


def tool_status(tool: Tool, last_call: CallRecord | None) -> Status:
    if tool.status == "deleted":  # still inspectable until purged, but never to be taken for a ready tool
        return "deleted"
    if tool.status == "archived" or tool.memory_level == "archived":
        return "archived"
    if last_call is not None and not last_call.ok:
        return "failing"
    return "ready"


@dataclass
class ListQuery:
    q: str = ""
    tier: str = ""
    runtime: str = ""
    tag: str = ""
    sort: str = "tier"

    @classmethod
    def parse(cls, params: Any) -> ListQuery:
        query = cls(
            q=str(params.get("q", "")).strip()[:200],
            tier=str(params.get("tier", "")),
            runtime=str(params.get("runtime", "")),
            tag=str(params.get("tag", "")).strip()[:100],
            sort=str(params.get("sort", "tier")),
        )
        # Unknown values mean "no filter", never an error page: the form only offers known ones.
        if query.tier not in MEMORY_LEVELS:
            query.tier = ""
        if query.runtime not in RUNTIME_LABELS:
            query.runtime = ""
        if query.sort not in SORTS:
            query.sort = "tier"
        return query


@dataclass
class ToolList:
    rows: list[ToolRow]
    query: ListQuery
    tags: list[str]
    search_mode: str | None = None
    total: int = 0


def _last_call(workbench: Workbench, tool_id: str) -> CallRecord | None:
    calls = workbench.store.calls(tool_id, limit=1)
    return calls[0] if calls else None


def tool_list(workbench: Workbench, query: ListQuery) -> ToolList:
    """The Active Tools list: every live tool (archived included) filtered, searched and sorted."""
    tier = query.tier or None
    search_mode = None
    if query.q:
        # A listing filtered by a query shows its matches, as `awb_list` does.
        found = workbench.search(query.q, limit=LIST_LIMIT, matches_only=True)
        search_mode = found.mode
        tools = [t for t in (workbench.store.get(s.tool_id) for s in found.results) if t is not None]
        tools = [t for t in tools if t.status != "deleted"]
        if tier is not None:
            tools = [t for t in tools if t.memory_level == tier]
        if query.tag:
            tools = [t for t in tools if query.tag in t.metadata.tags]
    else:
        tools = workbench.store.list_tools(memory_level=tier, tag=query.tag or None, limit=LIST_LIMIT)  # type: ignore[arg-type]
    all_tags = sorted({tag for t in workbench.store.list_tools(limit=LIST_LIMIT) for tag in t.metadata.tags})
    if query.runtime:
        tools = [t for t in tools if t.runtime == query.runtime]
    rows = [ToolRow(t, tool_status(t, last), last) for t in tools for last in [_last_call(workbench, t.tool_id)]]
    if query.sort == "name":
        rows.sort(key=lambda r: r.tool.name.lower())
    elif query.sort == "usage":
        rows.sort(key=lambda r: (-r.tool.usage_count, r.tool.name.lower()))
    elif query.sort == "last_call":
        never = datetime.min.replace(tzinfo=UTC)
        rows.sort(key=lambda r: r.last_call.at if r.last_call else never, reverse=True)
    # "tier" keeps the store's (or the search's) order: hot tiers first, or best match first.
    return ToolList(rows=rows, query=query, tags=all_tags, search_mode=search_mode, total=len(rows))


@dataclass
class Inspection:
    tool: Tool
    status: Status
    shown: ToolVersion
    versions: list[ToolVersion]
    code: CodeBlock
    diff: CodeBlock | None
    previous: int | None
    input_schema: CodeBlock
    output_schema: CodeBlock | None
    examples: CodeBlock
    calls: list[CallRecord]
    errors: int = 0
    tags: list[str] = field(default_factory=list)


class NoSuchVersion(LookupError):
    """The inspect page was asked for a version the tool does not have."""


def inspection(workbench: Workbench, ref: str, version: int | None) -> Inspection:
    """One tool as the inspect page shows it; `version` picks an older version to read (default: current)."""
    found = workbench.inspect(ref)
    tool = found.tool
    versions = sorted(found.versions, key=lambda v: v.version, reverse=True)
    by_number = {v.version: v for v in versions}
    if version is not None and version not in by_number and version != tool.version:
        # Showing the current version instead would let a person take it for the one they asked for.
        known = ", ".join(f"v{v.version}" for v in versions) or f"v{tool.version}"
        raise NoSuchVersion(f"{tool.name} has no version {version} (its versions: {known})")
    shown = by_number.get(version if version is not None else tool.version) or by_number.get(tool.version)
    if shown is None:  # an inventory from before versions were kept
        shown = ToolVersion(
            version=tool.version,
            code=tool.code,
            description=tool.description,
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
            examples=tool.examples,
            runtime=tool.runtime,
            created_at=tool.created_at,
        )
    older = [v for v in versions if v.version < shown.version]
    previous = older[0] if older else None
    diff = (
        highlighted_diff(previous.code, shown.code, f"{tool.name} v{previous.version}", f"{tool.name} v{shown.version}")
        if previous is not None
        else None
    )
    calls = found.recent_calls
    return Inspection(
        tool=tool,
        status=tool_status(tool, calls[0] if calls else None),
        shown=shown,
        versions=versions,
        code=highlighted(shown.code, tool.language),
        diff=diff,
        previous=previous.version if previous else None,
        input_schema=highlighted_json(shown.input_schema),
        output_schema=highlighted_json(shown.output_schema) if shown.output_schema is not None else None,
        examples=highlighted_json([e.model_dump(exclude_defaults=True) for e in shown.examples]),
        calls=calls,
        errors=sum(1 for c in calls if not c.ok),
        tags=tool.metadata.tags,
    )


@dataclass
class StagedView:
    #: The write whole (its own page) or as the list previews it (`staging.StagedPreview`).
    write: staging.StagedWrite | staging.StagedPreview
    tool_name: str
    exists: bool
    diff: CodeBlock | None
    note: str = ""
    #: The content as staged, when no diff shows it (the file on disk could not be diffed, or in a preview).
    content: CodeBlock | None = None
    #: Set on the list's preview when it shows only the beginning of the write: how much of it.
    cut: str = ""


#: Staged writes one page of the panel shows.
STAGED_PAGE = staging.PAGE
#: Bytes of each write the list previews. A tool may stage writes of megabytes (one of 4 MB took ~0.7 s of
#: CPU and 7.5 MB of markup to diff and highlight, a page of 25 of them ~13 s and 150 MB); each write has a
#: page of its own that shows all of it.
PREVIEW_BYTES = 16 * 1024
#: Matching steps (`bounded_diff`) a preview's diff may take: a page's share of one diff's.
PREVIEW_DIFF_STEPS = bounded_diff.DIFF_STEPS // STAGED_PAGE


@dataclass
class StagedPage:
    views: list[StagedView]
    #: The id to page from: `?after=` for the next page, `?before=` for the previous one (None: none).
    after: int | None
    before: int | None


def staged_views(
    workbench: Workbench, status: str | None, *, after: int | None = None, before: int | None = None
) -> StagedPage:
    """One page of staged writes (`STAGED_PAGE`, oldest first, from `after` or up to `before`), each
    previewed: at most its first `PREVIEW_BYTES` are read, diffed and shown (`_staged_preview`)."""
    store: Any = workbench.store
    previews = partial(staging.list_previews, store, status, limit=STAGED_PAGE + 1, preview_bytes=PREVIEW_BYTES)
    # One more than a page says whether there is another page beyond it.
    if before is not None:
        writes = previews(before=before)
        earlier, writes = len(writes) > STAGED_PAGE, writes[-STAGED_PAGE:]
        later = True
    else:
        writes = previews(after=after)
        later, writes = len(writes) > STAGED_PAGE, writes[:STAGED_PAGE]
        earlier = after is not None
    views = [_staged_preview(write, _tool_name(workbench, write.tool_id)) for write in writes]
    return StagedPage(
        views,
        after=writes[-1].id if later and writes else None,
        before=writes[0].id if earlier and writes else None,
    )


def staged_view(workbench: Workbench, staged_id: int) -> StagedView:
    """One staged write whole, as its own page shows it (and `awb staged show` prints it): its diff against
    the file on disk, or its content when there is no diff to show it by."""
    write = staging.get_staged(workbench.store, staged_id)  # type: ignore[arg-type]
    view = _staged_view(write, _tool_name(workbench, write.tool_id), write.content)
    if view.exists and view.diff is None and view.note != SAME_AS_CURRENT:
        view = replace(view, content=highlighted(write.content, ""))
    return view


def _tool_name(workbench: Workbench, tool_id: str) -> str:
    tool = workbench.store.get(tool_id)
    return tool.name if tool else tool_id


def _staged_diff(
    current: str, after: str, before_name: str, after_name: str, steps: int = bounded_diff.DIFF_STEPS
) -> CodeBlock | None:
    # A person applies what this shows: both sides as written, each hidden character (control, bidi
    # override, invisible space, ...) a mark counted in the diff's warning, as tool code is shown (and as
    # `awb staged show` prints it), so the diff cannot look like other text than the bytes it writes. The
    # names head the diff's own lines: escaped, so a newline in a path cannot forge a line of it.
    return highlighted_diff(current, after, before_name, visible(after_name), steps=steps)


SAME_AS_CURRENT = "same as the current file"


def _staged_view(
    write: staging.StagedWrite | staging.StagedPreview,
    tool_name: str,
    content: str,
    steps: int = bounded_diff.DIFF_STEPS,
) -> StagedView:
    path = Path(write.path)
    try:
        size = path.stat().st_size
    except OSError:
        return StagedView(write, tool_name, False, _staged_diff("", content, "/dev/null", write.path, steps))
    if size > MAX_DIFF_FILE_BYTES:
        return StagedView(write, tool_name, True, None, f"the current file is {size} bytes, too large to diff here")
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return StagedView(write, tool_name, True, None, f"the current file cannot be read as text ({exc})")
    diff = _staged_diff(current, content, visible(write.path), f"{write.path} (staged)", steps)
    return StagedView(write, tool_name, True, diff, "" if diff is not None else SAME_AS_CURRENT)


def _staged_preview(write: staging.StagedPreview, tool_name: str) -> StagedView:
    """The list's view of a write: as its own page's when it and the file on disk are both short; else its
    first `PREVIEW_BYTES` (cut at a line's end), as added lines for a new file, as staged for an existing
    one (a diff of a beginning against the whole file would show lines the write keeps as removed)."""
    try:
        current: int | None = Path(write.path).stat().st_size
    except OSError:
        current = None
    if write.whole and (current is None or current <= PREVIEW_BYTES):
        return _staged_view(write, tool_name, write.head, PREVIEW_DIFF_STEPS)
    head = write.head
    if not write.whole and "\n" in head:
        head = head[: head.rindex("\n") + 1]
    shown = len(head.encode("utf-8"))
    cut = "" if write.whole else f"showing the first {shown:,} of {write.size:,} bytes"
    if current is None:
        return StagedView(
            write, tool_name, False, _staged_diff("", head, "/dev/null", write.path, PREVIEW_DIFF_STEPS), cut=cut
        )
    compared = f"not compared here with the current file ({current:,} bytes): the write's own page shows the diff"
    return StagedView(write, tool_name, True, None, compared, content=highlighted(head, ""), cut=cut)
