"""The domain service every face talks to: craft, call, list, search, inspect, delete, maintain.

It knows nothing of MCP, HTTP or terminals. Faces turn their protocol into these calls and map
`awb.errors.AwbError` back into their protocol.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from awb import browse, crafting, evolve, forget
from awb.browse import SearchResult, ToolPage
from awb.clock import Clock, SystemClock
from awb.config import Config
from awb.crafting import CraftRequest as CraftRequest
from awb.equip import Armory
from awb.errors import (
    AdmissionFailed,
    AwbError,
    DuplicateTool,
    ExecutionError,
    InvalidOutput,
    InvalidParams,
    NameConflict,
    OutputExceeded,
    ToolDeleted,
    ToolNotFound,
    Unavailable,
)
from awb.events import Event, EventBus
from awb.inventory.memory import MemoryPolicy, TierChange
from awb.inventory.models import (
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
from awb.maintenance import Upkeep
from awb.sandbox.base import Execution, ExecutionSlots, Limits, Runtime
from awb.sandbox.host import HostBridge
from awb.sandbox.registry import build_runtimes, choose_python_runtime, limits_for
from awb.sandbox.staging import protected_paths
from awb.search.duplicates import rank_similar
from awb.search.fts import search_words
from awb.search.hybrid import search_engine
from awb.text import MAX_RESULT_DEPTH, cap_text, nesting_depth
from awb.validation import SchemaTooExpensive, ToolSchema
from awb.validation import schema_errors as schema_errors

log = logging.getLogger("awb.workbench")


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


class Inspection(BaseModel):
    tool: Tool
    versions: list[ToolVersion]
    recent_calls: list[CallRecord]


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
        self.search_engine = search_engine(self.store, self.config.search)
        # Vectors follow every craft, new version, rollback and delete, whichever path made them.
        self.events.subscribe(self._keep_search_in_step)
        # Other processes (the web panel of a server) read the inventory's journal of these events.
        self.events.subscribe(self._journal)
        self.runtimes: dict[str, Runtime] = runtimes or build_runtimes(self.config)
        self._validators: dict[tuple[str, int, str], ToolSchema] = {}
        self._slots = ExecutionSlots(self.config.sandbox.max_concurrent, "tool")
        self._protected = protected_paths(self.config)
        self.upkeep = Upkeep(
            self.store, self.policy, self.clock, self.events, self.config.memory.maintenance_every_calls
        )

    # --- life cycle ---------------------------------------------------------------------------

    async def start(self, *, warm_all: bool = False, warm_search: bool = True) -> None:
        """Warm the default Python runtime; `warm_all` (the server) also pre-forks the others.
        `warm_search` starts loading the embedding model in the background (the HTTP server does it
        once it serves instead).

        Runtimes not warmed start on first use, so libraries and the CLI never pay for a zygote or a
        JavaScript worker they do not need."""
        if warm_search:
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

    def _journal(self, event: Event) -> None:
        append = getattr(self.store, "append_event", None)
        # Tier moves are not toasts; "external" events were journaled by the server that made them.
        if append is None or event.kind in ("tier_changed", "external"):
            return
        data = dict(event.data)
        tool = self.store.get(event.tool_id) if event.tool_id else None
        if tool is not None:
            data.update(name=tool.name, version=tool.version, runtime=tool.runtime)
        try:
            append(event.kind, event.tool_id, data, self.clock.now())
        except Exception as exc:  # the journal is for watchers; a craft or call never fails for it
            log.warning("could not journal the %s event: %s", event.kind, exc)

    def _follow_other_servers(self, change: Any) -> None:
        """Another server committed `change` (an `awb.inventory.postgres_notify.Change`); runs on the
        store's listener thread. Vectors follow; clients re-list when the equipped set may have moved."""
        self.search_engine.follow(change.kind, change.tool_ids)
        if change.equipped:
            self.events.publish(Event("external", None, {"kind": change.kind, "tool_ids": list(change.tool_ids)}))

    async def close(self) -> None:
        await self.upkeep.settled()
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
        return limits_for(self.config)

    # --- lookup -------------------------------------------------------------------------------

    def resolve(self, ref: str, *, allow_deleted: bool = False) -> Tool:
        """The tool named by `ref`: a tool_id or a name."""
        if not isinstance(ref, str) or not ref:
            raise InvalidParams("a tool_id or name is required")
        if ref.startswith("tool_"):
            tool = self.store.get(ref) or self.store.get_by_name(ref, include_deleted=True)
        else:
            # Not an id we mint: the name first (a shared store then reads nothing to learn that no
            # tool has this id), the id still tried for records imported with ids of their own.
            tool = self.store.get_by_name(ref, include_deleted=True) or self.store.get(ref)
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

    async def _validate_craft(self, request: CraftRequest) -> None:
        crafting.validate_request(request, self.config.max_code_bytes)
        await crafting.check_examples(request)

    async def craft(self, request: CraftRequest | dict[str, Any]) -> Tool:
        """Check, admit and store a new tool. Its examples must pass in the sandbox first."""
        if not isinstance(request, CraftRequest):
            try:
                request = CraftRequest.model_validate(request)
            except ValidationError as exc:
                raise InvalidParams("invalid craft request", errors=_pydantic_errors(exc)) from None
        await self._validate_craft(request)
        if self.store.get_by_name(request.name) is not None:
            raise NameConflict(f"a tool named {request.name!r} already exists", name=request.name)
        self.store.check_room(self.config.max_tools)
        # Admission runs tool code: it takes an execution slot like a call, and one time budget in all.
        with self._slots.take():
            budget = self.admission_budget()
            requested = request.runtime
            if request.language == "python" and requested is None and self.config.sandbox.python_runtime == "auto":
                share = budget.limits(share=len(request.examples) + 1)
                requested = await choose_python_runtime(self.runtimes, request.code, request.examples, share)  # type: ignore[assignment]
            runtime = self._runtime_for(request.language, requested)
            self._refuse_duplicate(request)
            # The creation moment, for every face and process that watches (the web panel's toasts).
            self.events.publish(Event("craft_started", None, {"name": request.name, "runtime": runtime.name}))
            try:
                await crafting.admit(runtime, request.code, request.examples, request.output_schema, budget)
            except AdmissionFailed as exc:
                reason = exc.message.split(";")[0]
                self.events.publish(Event("craft_rejected", None, {"name": request.name, "reason": reason}))
                raise
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
            # The cap is checked again where the row is written: concurrent crafts cannot pass it together.
            self.store.add_tool(tool, max_active=self.config.max_tools)
        except AwbError:
            raise
        except Exception as exc:  # a concurrent craft of the same name won the race
            if self.store.get_by_name(request.name) is not None:
                raise NameConflict(f"a tool named {request.name!r} already exists", name=request.name) from exc
            raise
        log.info("crafted %s (%s) on %s", tool.name, tool.tool_id, tool.runtime)
        self.events.publish(Event("crafted", tool.tool_id))
        return tool

    def _refuse_duplicate(self, request: CraftRequest) -> None:
        if self.config.dedupe != "reject":
            return
        close = [
            s for s in self.similar(request.name, request.description) if (s.score or 0) >= self.config.dedupe_threshold
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

    def admission_budget(self) -> crafting.AdmissionBudget:
        return crafting.AdmissionBudget(self.limits, self.config.sandbox.admission_timeout_ms)

    async def _admit(
        self, runtime: Runtime, code: str, examples: list[Example], output_schema: dict[str, Any] | None
    ) -> None:
        """The admission test of a new version (update): in an execution slot, in one time budget."""
        with self._slots.take():
            await crafting.admit(runtime, code, examples, output_schema, self.admission_budget())

    # --- call ---------------------------------------------------------------------------------

    def _schema(self, tool: Tool, which: Literal["input", "output"] = "input") -> ToolSchema:
        """The compiled schema of a tool version; versions are immutable, so compile once per version."""
        key = (tool.tool_id, tool.version, which)
        schema = self._validators.get(key)
        if schema is None:
            raw = tool.input_schema if which == "input" else tool.output_schema
            schema = self._validators[key] = ToolSchema.compile(raw or {})
        return schema

    async def call(self, ref: str, params: dict[str, Any] | None = None) -> CallResult:
        """Run a tool in its sandbox. Failures are recorded and raised as `ExecutionError`s."""
        call_id = "call_" + uuid.uuid4().hex[:16]
        tool = self.resolve(ref)
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise InvalidParams("params must be a JSON object", got=type(params).__name__)
        try:
            problems = await self._schema(tool).problems_off_loop(params)
        except SchemaTooExpensive as exc:
            raise InvalidParams(
                f"params of {tool.name!r} cannot be checked: {exc}", tool_id=tool.tool_id, reason="validation_limit"
            ) from None
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
                tool.tool_id,
                path,
                data,
                self.clock.now(),
                call_id=call_id,
                max_tool_bytes=self.config.sandbox.max_staged_bytes_per_tool,
                max_total_bytes=self.config.sandbox.max_staged_bytes_total,
            ),
            max_log_bytes=self.limits.max_log_bytes,
            protected=self._protected,
        )
        started = time.perf_counter()
        error: AwbError | None = None
        execution: Execution | None = None
        with self._slots.take():
            try:
                execution = await runtime.execute(tool.code, params, self.limits, host)
                self._check_result(tool, execution)
                if tool.output_schema is not None:
                    out_problems = await self._output_problems(tool, execution.value)
                    if out_problems:
                        raise InvalidOutput("the tool's result does not match its output_schema", errors=out_problems)
            except ExecutionError as exc:
                error = exc
            except RecursionError:
                # A result nested past the interpreter's recursion limit, met while encoding or decoding it.
                error = _too_deep(tool)
        duration_ms = (time.perf_counter() - started) * 1000
        if execution is not None:
            peak = execution.peak_memory_bytes
        else:  # a failed run may still have been measured (a tool that hit its memory limit, say)
            peak = error.peak_memory_bytes if isinstance(error, ExecutionError) else None
        tool = self._record(tool, call_id, duration_ms, error, peak)
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
            logs=_capped_logs(host.logs + execution.logs, self.limits.max_log_bytes),
            duration_ms=round(duration_ms, 3),
            memory_level=tool.memory_level,
            usage_count=tool.usage_count,
        )

    def _check_result(self, tool: Tool, execution: Execution) -> None:
        """Results nested past MAX_RESULT_DEPTH cannot be encoded on the wire: a failed call, not a
        success that the face then cannot send."""
        if nesting_depth(execution.value, MAX_RESULT_DEPTH) > MAX_RESULT_DEPTH:
            raise _too_deep(tool)

    async def _output_problems(self, tool: Tool, value: Any) -> list[dict[str, str]]:
        try:
            return await self._schema(tool, "output").problems_off_loop(value)
        except SchemaTooExpensive as exc:
            raise InvalidOutput(f"the tool's result cannot be checked against its output_schema: {exc}") from None

    def _record(
        self,
        tool: Tool,
        call_id: str,
        duration_ms: float,
        error: AwbError | None,
        peak_memory_bytes: int | None = None,
    ) -> Tool:
        now = self.clock.now()
        call = CallRecord(
            call_id=call_id,
            tool_id=tool.tool_id,
            version=tool.version,
            at=now,
            duration_ms=duration_ms,
            ok=error is None,
            error_code=None if error is None else error.code,
            peak_memory_bytes=peak_memory_bytes,
        )
        # Counters move in SQL inside one write transaction, so concurrent calls (from any process)
        # never lose an update; the tier is recomputed there from the counted usage.
        counters = self.store.record_call(call, level_after=self.policy.level_after_success)
        updated = tool.model_copy(
            update={
                "usage_count": counters.usage_count,
                "success_count": counters.success_count,
                "failure_count": counters.failure_count,
                "memory_level": counters.memory_level,
                "status": counters.status,
                "last_used_at": now if error is None else tool.last_used_at,
            }
        )
        if counters.memory_level != counters.previous_level:
            self.events.publish(
                Event("tier_changed", tool.tool_id, {"before": counters.previous_level, "after": counters.memory_level})
            )
            if counters.memory_level == "long_term":
                updated = self.armory.auto_equip(updated, now)
        self.upkeep.counted()
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
        return browse.list_page(
            self.store,
            lambda q, n: self.search(q, limit=n),
            memory_level=memory_level,
            tag=tag,
            query=query,
            limit=limit,
            offset=offset,
        )

    def search(self, query: str, *, limit: int | None = None, top_k: int | None = None) -> SearchResult:
        """The best `limit` matches (`top_k` is the spec's name for it; default 10)."""
        return browse.search(self.store, self.search_engine, query, limit=limit, top_k=top_k)

    def inspect(self, ref: str) -> Inspection:
        tool = self.resolve(ref, allow_deleted=True)
        # A shared store serves calls from a cache that follows other servers a moment late; what a
        # person inspects is read from the database itself.
        reread = getattr(self.store, "reread", None)
        if callable(reread):
            tool = reread(tool.tool_id) or tool
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
        """Demote idle medium-term tools, archive idle short-term ones (see awb.maintenance)."""
        return self.upkeep.run()


def _too_deep(tool: Tool) -> OutputExceeded:
    return crafting.too_deep(tool.name)


def _capped_logs(logs: list[str], max_bytes: int) -> list[str]:
    """The call's log lines up to `max_bytes` in all, whichever runtime produced them."""
    kept: list[str] = []
    used = 0
    for line in logs:
        size = len(line.encode("utf-8", errors="surrogatepass"))
        if used + size > max_bytes:
            kept.append(cap_text(line, max(0, max_bytes - used)) if used < max_bytes else "[log cut at the cap]")
            break
        kept.append(line)
        used += size
    return kept


def _pydantic_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [{"path": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()[:20]]


__all__ = ["CallResult", "CraftRequest", "Inspection", "SearchResult", "ToolPage", "Workbench"]
