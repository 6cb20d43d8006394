"""The domain service every face talks to: craft, call, list, search, inspect, delete, maintain.

It knows nothing of MCP, HTTP or terminals. Faces turn their protocol into these calls and map
`awb.errors.AwbError` back into their protocol.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Literal

import jsonschema
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from awb import evolve, forget
from awb.clock import Clock, SystemClock
from awb.config import Config
from awb.craft_shape import craft_fields
from awb.equip import Armory
from awb.errors import (
    AdmissionFailed,
    AwbError,
    DuplicateTool,
    ExecutionError,
    InvalidOutput,
    InvalidParams,
    LimitExceeded,
    NameConflict,
    ToolDeleted,
    ToolNotFound,
    Unavailable,
)
from awb.events import Event, EventBus
from awb.inventory.memory import MemoryPolicy, TierChange
from awb.inventory.models import (
    NAME_PATTERN,
    CallRecord,
    Capabilities,
    Example,
    Language,
    MemoryLevel,
    RuntimeName,
    Tool,
    ToolMetadata,
    ToolSummary,
    ToolVersion,
)
from awb.inventory.open import open_store
from awb.inventory.store import Store
from awb.sandbox.base import Execution, ExecutionSlots, Limits, Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.registry import build_runtimes, choose_python_runtime
from awb.schema_rules import normalise_schemas
from awb.search.duplicates import rank_similar
from awb.search.embeddings import create_embedder
from awb.search.fts import search_words
from awb.search.hybrid import HybridSearch

log = logging.getLogger("awb.workbench")

DEFAULT_INPUT_SCHEMA: dict[str, Any] = {"type": "object"}


class CraftRequest(BaseModel):
    """What an agent sends to craft a tool: the spec's shape (`metadata: {tags, problem,
    created_by_agent}`) or ours (those fields flat). Without a description, the first line of the
    code's docstring or leading comment is taken."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _one_shape(cls, data: Any) -> Any:
        return normalise_schemas(craft_fields(data))

    name: str
    description: str = Field(min_length=1)
    code: str = Field(min_length=1)
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_INPUT_SCHEMA))
    output_schema: dict[str, Any] | None = None
    examples: list[Example] = Field(default_factory=list)
    language: Language = "python"
    runtime: RuntimeName | None = None
    tags: list[str] = Field(default_factory=list)
    problem: str = ""
    created_by_agent: str = ""


class CallResult(BaseModel):
    #: The id on the call's record (awb_inspect's recent_calls) and on any write it staged.
    call_id: str
    tool_id: str
    name: str
    version: int
    result: Any
    logs: list[str] = Field(default_factory=list)
    duration_ms: float
    memory_level: MemoryLevel
    usage_count: int


class SearchResult(BaseModel):
    query: str
    mode: str
    results: list[ToolSummary]


class ToolPage(BaseModel):
    """One page of a listing: `total` counts every match, `next_offset` is None on the last page."""

    tools: list[ToolSummary]
    total: int
    offset: int
    next_offset: int | None


class Inspection(BaseModel):
    tool: Tool
    versions: list[ToolVersion]
    recent_calls: list[CallRecord]


def _check_schema(schema: dict[str, Any], field: str) -> None:
    try:
        Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidParams(f"{field} is not a valid JSON Schema: {exc.message}", field=field) from None
    if schema.get("type", "object") != "object":
        raise InvalidParams(f"{field} must describe an object (type: object)", field=field)


def schema_errors(validator: Draft202012Validator, instance: Any) -> list[dict[str, str]]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [{"path": "/" + "/".join(str(p) for p in e.absolute_path), "message": e.message} for e in errors[:20]]


class Workbench:
    """One inventory, its search, its memory policy and its sandbox runtimes."""

    def __init__(
        self,
        config: Config | None = None,
        *,
        store: Store | None = None,
        clock: Clock | None = None,
        runtimes: dict[str, Runtime] | None = None,
    ) -> None:
        self.config = config or Config()
        self.store: Store = store or open_store(self.config)
        self.clock = clock or SystemClock()
        self.policy = MemoryPolicy(self.config.memory)
        self.events = EventBus()
        self.armory = Armory(self.store, self.config, self.events)
        self.search_engine = _search_engine(self.store, self.config)
        # Vectors follow every craft, new version, rollback and delete, whichever path made them.
        self.events.subscribe(self._keep_search_in_step)
        self.runtimes: dict[str, Runtime] = runtimes or build_runtimes(self.config)
        self._validators: dict[tuple[str, int, str], Draft202012Validator] = {}
        self._slots = ExecutionSlots(self.config.sandbox.max_concurrent, "tool")
        self._calls_since_maintenance = 0

    # --- life cycle ---------------------------------------------------------------------------

    async def start(self, *, warm_all: bool = False) -> None:
        """Warm the default Python runtime; `warm_all` (the server) also pre-forks the others.

        Runtimes not warmed start on first use, so libraries and the CLI never pay for a zygote or a
        JavaScript worker they do not need."""
        self.search_engine.warm_up()
        # A shared store (PostgreSQL) tells us what other servers change; follow it from now on.
        subscribe = getattr(self.store, "subscribe_changes", None)
        if callable(subscribe):
            subscribe(self._follow_other_servers)
        for name, runtime in self.runtimes.items():
            if warm_all or name == "monty":
                await runtime.start()

    def _keep_search_in_step(self, event: Event) -> None:
        if self.search_engine.mode != "hybrid" or event.tool_id is None:
            return
        if event.kind == "deleted":
            self.search_engine.remove_tool(event.tool_id)
        elif event.kind in ("crafted", "updated"):
            tool = self.store.get(event.tool_id)
            if tool is not None:
                self.search_engine.index_tool(tool)

    def _follow_other_servers(self, change: Any) -> None:
        """Another server committed `change` (an `awb.inventory.postgres_notify.Change`); runs on the
        store's listener thread. Vectors follow; clients re-list when the equipped set may have moved."""
        self.search_engine.follow(change.kind, change.tool_ids)
        if change.equipped:
            self.events.publish(Event("external", None, {"kind": change.kind, "tool_ids": list(change.tool_ids)}))

    async def close(self) -> None:
        for runtime in self.runtimes.values():
            await runtime.close()
        self.store.close()

    async def __aenter__(self) -> Workbench:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def limits(self) -> Limits:
        return Limits(
            timeout_ms=self.config.tool_execution_timeout_ms,
            memory_mb=self.config.tool_memory_mb,
            max_output_bytes=self.config.max_output_bytes,
            max_log_bytes=self.config.sandbox.max_log_bytes,
        )

    # --- lookup -------------------------------------------------------------------------------

    def resolve(self, ref: str, *, allow_deleted: bool = False) -> Tool:
        """The tool named by `ref`: a tool_id or a name."""
        if not isinstance(ref, str) or not ref:
            raise InvalidParams("a tool_id or name is required")
        tool = self.store.get(ref) or self.store.get_by_name(ref, include_deleted=True)
        if tool is None:
            raise ToolNotFound(f"no tool with id or name {ref!r}", ref=ref)
        if tool.status == "deleted" and not allow_deleted:
            raise ToolDeleted(f"tool {tool.name!r} ({tool.tool_id}) was deleted", tool_id=tool.tool_id)
        return tool

    # --- craft --------------------------------------------------------------------------------

    def _runtime_for(self, language: Language, requested: RuntimeName | None) -> Runtime:
        name: str = requested or {"python": "monty", "javascript": "javascript", "wasm": "wasm"}[language]
        if language == "python" and requested is None and self.config.sandbox.python_runtime == "cpython":
            name = "cpython"
        runtime = self.runtimes.get(name)
        if runtime is None:
            raise Unavailable(
                f"runtime {name!r} is not available here (installed runtimes: {', '.join(sorted(self.runtimes))})",
                runtime=name,
            )
        if runtime.language != language:
            raise InvalidParams(f"runtime {name!r} runs {runtime.language}, not {language}", runtime=name)
        return runtime

    def _validate_craft(self, request: CraftRequest) -> None:
        if not NAME_PATTERN.match(request.name):
            raise InvalidParams(
                "tool names are 1-64 characters of letters, digits, '_' and '-'", field="name", name=request.name
            )
        size = len(request.code.encode("utf-8"))
        if size > self.config.max_code_bytes:
            raise LimitExceeded(
                f"code is {size} bytes, over the {self.config.max_code_bytes}-byte limit",
                limit="max_code_bytes",
                size=size,
            )
        _check_schema(request.input_schema, "input_schema")
        if request.output_schema is not None:
            try:
                Draft202012Validator.check_schema(request.output_schema)
            except jsonschema.SchemaError as exc:
                raise InvalidParams(f"output_schema is not a valid JSON Schema: {exc.message}") from None
        validator = Draft202012Validator(request.input_schema)
        for index, example in enumerate(request.examples):
            problems = schema_errors(validator, example.params)
            if problems:
                raise InvalidParams(f"example {index} does not match input_schema", example=index, errors=problems)

    async def craft(self, request: CraftRequest | dict[str, Any]) -> Tool:
        """Check, admit and store a new tool. Its examples must pass in the sandbox first."""
        if not isinstance(request, CraftRequest):
            try:
                request = CraftRequest.model_validate(request)
            except ValidationError as exc:
                raise InvalidParams("invalid craft request", errors=_pydantic_errors(exc)) from None
        self._validate_craft(request)
        if self.store.get_by_name(request.name) is not None:
            raise NameConflict(f"a tool named {request.name!r} already exists", name=request.name)
        if self.store.count_active() >= self.config.max_tools:
            raise LimitExceeded(
                f"the inventory holds its maximum of {self.config.max_tools} tools; delete some first",
                limit="max_tools",
            )
        requested = request.runtime
        if request.language == "python" and requested is None and self.config.sandbox.python_runtime == "auto":
            requested = await choose_python_runtime(self.runtimes, request.code, request.examples, self.limits)  # type: ignore[assignment]
        runtime = self._runtime_for(request.language, requested)
        if self.config.dedupe == "reject":
            close = [
                s
                for s in self.similar(request.name, request.description)
                if (s.score or 0) >= self.config.dedupe_threshold
            ]
            if close:
                raise DuplicateTool(
                    f"{close[0].name!r} ({close[0].tool_id}) already does this (similarity {close[0].score}); "
                    "reuse it, or update it with awb_update",
                    tool_id=close[0].tool_id,
                    name=close[0].name,
                    score=close[0].score,
                    threshold=self.config.dedupe_threshold,
                )
        await self._admit(runtime, request.code, request.examples, request.output_schema)
        now = self.clock.now()
        tool = Tool(
            tool_id="tool_" + uuid.uuid4().hex[:16],
            name=request.name,
            description=request.description,
            language=request.language,
            runtime=runtime.name,
            code=request.code,
            input_schema=request.input_schema,
            output_schema=request.output_schema,
            examples=request.examples,
            metadata=ToolMetadata(
                tags=request.tags, problem=request.problem, created_by_agent=request.created_by_agent
            ),
            capabilities=Capabilities(read_dirs=self.config.sandbox.grants.get(request.name, [])),
            created_at=now,
            updated_at=now,
        )
        try:
            self.store.add_tool(tool)
        except Exception as exc:  # a concurrent craft of the same name won the race
            if self.store.get_by_name(request.name) is not None:
                raise NameConflict(f"a tool named {request.name!r} already exists", name=request.name) from exc
            raise
        log.info("crafted %s (%s) on %s", tool.name, tool.tool_id, tool.runtime)
        self.events.publish(Event("crafted", tool.tool_id))
        return tool

    async def _admit(
        self, runtime: Runtime, code: str, examples: list[Example], output_schema: dict[str, Any] | None
    ) -> None:
        """The admission test: the code loads and defines its entry point, and every example passes."""
        limits = self.limits
        try:
            await runtime.check(code, limits)
        except ExecutionError as exc:
            raise AdmissionFailed(f"the tool does not load: {exc.message}", check="load", error=exc.to_dict()) from None
        report = []
        out_validator = Draft202012Validator(output_schema) if output_schema else None
        for index, example in enumerate(examples):
            host = HostBridge(read_dirs=[], stage=None, max_log_bytes=limits.max_log_bytes)
            entry: dict[str, Any] = {"example": index, "params": example.params}
            try:
                got = (await runtime.execute(code, example.params, limits, host)).value
            except ExecutionError as exc:
                entry.update(got=None, error=exc.to_dict())
                entry["ok"] = example.expected_error == exc.code
            else:
                entry["got"] = got
                entry["ok"] = example.expected_error is None and got == example.expected
                if entry["ok"] and out_validator is not None:
                    problems = schema_errors(out_validator, got)
                    if problems:
                        entry.update(ok=False, error={"code": "invalid_output", "errors": problems})
            entry["expected"] = example.expected if example.expected_error is None else None
            entry["expected_error"] = example.expected_error
            report.append(entry)
        failed = [e for e in report if not e["ok"]]
        if failed:
            raise AdmissionFailed(
                f"{len(failed)} of {len(report)} examples failed; the tool was not admitted", examples=report
            )

    # --- call ---------------------------------------------------------------------------------

    def _validator(self, tool: Tool, which: Literal["input", "output"] = "input") -> Draft202012Validator:
        """The compiled schema of a tool version; versions are immutable, so compile once per version."""
        key = (tool.tool_id, tool.version, which)
        validator = self._validators.get(key)
        if validator is None:
            schema = tool.input_schema if which == "input" else tool.output_schema
            validator = self._validators[key] = Draft202012Validator(schema or {})
        return validator

    async def call(self, ref: str, params: dict[str, Any] | None = None) -> CallResult:
        """Run a tool in its sandbox. Failures are recorded and raised as `ExecutionError`s."""
        call_id = "call_" + uuid.uuid4().hex[:16]
        tool = self.resolve(ref)
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise InvalidParams("params must be a JSON object", got=type(params).__name__)
        problems = schema_errors(self._validator(tool), params)
        if problems:
            raise InvalidParams(
                f"params do not match the input_schema of {tool.name!r}", tool_id=tool.tool_id, errors=problems
            )
        runtime = self.runtimes.get(tool.runtime)
        if runtime is None:
            raise Unavailable(f"runtime {tool.runtime!r} of {tool.name!r} is not available here")
        host = HostBridge(
            read_dirs=tool.capabilities.read_dirs,
            stage=lambda path, data: self.store.stage_write(
                tool.tool_id, path, data, self.clock.now(), call_id=call_id
            ),
            max_log_bytes=self.limits.max_log_bytes,
        )
        started = time.perf_counter()
        error: AwbError | None = None
        execution: Execution | None = None
        with self._slots.take():
            try:
                execution = await runtime.execute(tool.code, params, self.limits, host)
                if tool.output_schema is not None:
                    out_problems = schema_errors(self._validator(tool, "output"), execution.value)
                    if out_problems:
                        raise InvalidOutput("the tool's result does not match its output_schema", errors=out_problems)
            except ExecutionError as exc:
                error = exc
        duration_ms = (time.perf_counter() - started) * 1000
        tool = self._record(tool, call_id, duration_ms, error)
        if error is not None:
            log.info("call %s failed: %s", tool.name, error.code)
            raise error
        assert execution is not None
        return CallResult(
            call_id=call_id,
            tool_id=tool.tool_id,
            name=tool.name,
            version=tool.version,
            result=execution.value,
            logs=host.logs + execution.logs,
            duration_ms=round(duration_ms, 3),
            memory_level=tool.memory_level,
            usage_count=tool.usage_count,
        )

    def _record(self, tool: Tool, call_id: str, duration_ms: float, error: AwbError | None) -> Tool:
        now = self.clock.now()
        fields: dict[str, Any]
        if error is None:
            usage = tool.usage_count + 1
            level = self.policy.level_after_success(tool.memory_level, usage)
            fields = {
                "usage_count": usage,
                "success_count": tool.success_count + 1,
                "last_used_at": now,
                "memory_level": level,
            }
            if tool.status == "archived":
                fields["status"] = "active"
        else:
            fields = {"failure_count": tool.failure_count + 1}
        call = CallRecord(
            call_id=call_id,
            tool_id=tool.tool_id,
            version=tool.version,
            at=now,
            duration_ms=duration_ms,
            ok=error is None,
            error_code=None if error is None else error.code,
        )
        self.store.record_call(call, fields)
        updated = tool.model_copy(update=fields)
        if updated.memory_level != tool.memory_level:
            self.events.publish(
                Event("tier_changed", tool.tool_id, {"before": tool.memory_level, "after": updated.memory_level})
            )
            if updated.memory_level == "long_term":
                updated = self.armory.auto_equip(updated, now)
        self._calls_since_maintenance += 1
        every = self.config.memory.maintenance_every_calls
        if every and self._calls_since_maintenance >= every:
            self.maintain()
        return updated

    # --- list, search, inspect, delete ----------------------------------------------------------

    def list_tools(
        self,
        *,
        memory_level: MemoryLevel | None = None,
        tag: str | None = None,
        query: str | None = None,
        limit: int = 20,
    ) -> list[ToolSummary]:
        return self.list_page(memory_level=memory_level, tag=tag, query=query, limit=limit).tools

    def list_page(
        self,
        *,
        memory_level: MemoryLevel | None = None,
        tag: str | None = None,
        query: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> ToolPage:
        """One page of the listing, with the number of all matches and where the next page starts."""
        if limit < 1 or limit > 1000:
            raise InvalidParams("limit must be between 1 and 1000", limit=limit)
        if offset < 0:
            raise InvalidParams("offset must be 0 or more", offset=offset)
        if query:
            hits = [
                h
                for h in self.search(query, limit=1000).results
                if (memory_level is None or h.memory_level == memory_level) and (tag is None or tag in h.tags)
            ]
            total, tools = len(hits), hits[offset : offset + limit]
        else:
            tools, total = self.store.page_summaries(memory_level=memory_level, tag=tag, limit=limit, offset=offset)
        end = offset + len(tools)
        return ToolPage(tools=tools, total=total, offset=offset, next_offset=end if end < total else None)

    def search(self, query: str, *, limit: int | None = None, top_k: int | None = None) -> SearchResult:
        """The best `limit` matches (`top_k` is the spec's name for it; default 10)."""
        limit = _one_limit(limit, top_k)
        if not isinstance(query, str) or not query.strip():
            raise InvalidParams("the search query is empty", field="query")
        if limit < 1 or limit > 1000:
            raise InvalidParams("limit must be between 1 and 1000", limit=limit)
        if self.search_engine.mode == "hybrid":
            mode, scored = self.search_engine.search(query, limit)
            if mode == "hybrid":
                results = [tool.summary(score=round(score, 4)) for tool, score in scored]
                return SearchResult(query=query, mode="hybrid", results=results)
        words = search_words(query)
        if not words:
            return SearchResult(query=query, mode="text", results=[])
        # Archived tools stay findable but rank after every live match among the best candidates.
        hits = self.store.search_summaries(words, limit=limit, candidates=limit * 3 + 20)
        return SearchResult(query=query, mode="text", results=hits)

    def inspect(self, ref: str) -> Inspection:
        tool = self.resolve(ref, allow_deleted=True)
        return Inspection(
            tool=tool, versions=self.store.versions(tool.tool_id), recent_calls=self.store.calls(tool.tool_id)
        )

    def delete(self, ref: str) -> Tool:
        """Soft delete: the record stays (inspectable, purgeable), the tool can no longer be called."""
        tool = self.resolve(ref)
        now = self.clock.now()
        self.store.update(tool.tool_id, status="deleted", equipped=False, updated_at=now)
        log.info("deleted %s (%s)", tool.name, tool.tool_id)
        self.events.publish(Event("deleted", tool.tool_id, {"equipped": tool.equipped}))
        return tool.model_copy(update={"status": "deleted", "equipped": False, "updated_at": now})

    # --- equip, evolve, find near-duplicates, purge ---------------------------------------------

    def equipped_tools(self) -> list[Tool]:
        """The equipped set, by name: what the MCP face lists as first-class tools."""
        return self.armory.equipped()

    def equip(self, ref: str) -> Tool:
        return self.armory.equip(self.resolve(ref), self.clock.now())

    def unequip(self, ref: str) -> Tool:
        return self.armory.unequip(self.resolve(ref), self.clock.now())

    async def update(
        self,
        ref: str,
        *,
        code: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        examples: list[Example] | list[dict[str, Any]] | None = None,
    ) -> Tool:
        """A new immutable version of the tool, admitted only when its examples pass."""
        return await evolve.update(
            self,
            ref,
            code=code,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            examples=examples,
        )

    def rollback(self, ref: str, to_version: int) -> Tool:
        """Make an earlier version current again; the history stays."""
        return evolve.rollback(self, ref, to_version)

    def similar(self, name: str, description: str, *, exclude: str | None = None, limit: int = 5) -> list[ToolSummary]:
        """Live tools close to a tool with this name and description, scored 0..1, best first."""
        query = f"{name} {description}"
        if not search_words(query):
            return []
        candidates = [s for s in self.search(query, limit=25).results if s.tool_id != exclude]
        return rank_similar(name, description, candidates, limit=limit)

    def purge(
        self,
        *,
        archived_before_days: float | None = None,
        deleted: bool = False,
        dry_run: bool = False,
        only: set[str] | None = None,
    ) -> list[ToolSummary]:
        """Remove archived (idle that long) and soft-deleted tools for good; `dry_run` only lists them.

        `only` limits the purge to these tool_ids (what a person was shown and confirmed).
        """
        return forget.purge(
            self, archived_before_days=archived_before_days, deleted=deleted, dry_run=dry_run, only=only
        )

    # --- memory maintenance ---------------------------------------------------------------------

    def maintain(self) -> list[TierChange]:
        """Demote idle medium-term tools, archive idle short-term ones."""
        self._calls_since_maintenance = 0
        now = self.clock.now()
        changes = []
        for tool in self.store.iter_maintainable():
            change = self.policy.maintenance_change(tool, now)
            if change is None:
                continue
            fields: dict[str, Any] = {"memory_level": change.after}
            data: dict[str, Any] = {"before": change.before, "after": change.after}
            if change.after == "archived":
                # Archived tools leave the equipped set; updated_at dates the archiving (for purge).
                fields.update(status="archived", equipped=False, updated_at=now)
                data["equipped"] = tool.equipped
            self.store.update(tool.tool_id, **fields)
            changes.append(change)
            self.events.publish(Event("tier_changed", tool.tool_id, data))
        if changes:
            log.info("maintenance moved %d tools", len(changes))
        return changes


def _search_engine(store: Store, config: Config) -> HybridSearch:
    """Hybrid search when configured and the `embed` extra is installed; text-only otherwise, with why."""
    if config.search.mode != "hybrid":
        return HybridSearch(store, None, config.search, reason="search.mode is 'text'")
    embedder, reason = create_embedder(config.search.embedding_provider)
    return HybridSearch(store, embedder, config.search, reason=reason)


def _one_limit(limit: int | None, top_k: int | None) -> int:
    if limit is not None and top_k is not None and limit != top_k:
        raise InvalidParams("limit and top_k are the same setting; give one", limit=limit, top_k=top_k)
    chosen = limit if limit is not None else top_k
    return 10 if chosen is None else chosen


def _pydantic_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"path": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()[:20]]


__all__ = ["CallResult", "CraftRequest", "Inspection", "SearchResult", "ToolPage", "Workbench"]
