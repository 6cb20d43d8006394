"""The domain service every face talks to: craft, call, list, search, inspect, delete, maintain.

It knows nothing of MCP, HTTP or terminals. Faces turn their protocol into these calls and map
`awb.errors.AwbError` back into their protocol.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from awb import browse, craft, crafting, evolve, forget
from awb.browse import SearchResult, ToolPage
from awb.calling import Caller, CallResult
from awb.clock import Clock, SystemClock
from awb.config import Config
from awb.crafting import CraftRequest as CraftRequest
from awb.equip import Armory
from awb.errors import (
    InvalidParams,
    ToolDeleted,
    ToolNotFound,
    Unavailable,
)
from awb.events import Event, EventBus
from awb.followers import journal_writer, search_follower
from awb.inventory.lane import StoreLane
from awb.inventory.memory import MemoryPolicy, TierChange
from awb.inventory.models import (
    CallRecord,
    Example,
    Language,
    MemoryLevel,
    RuntimeName,
    Tool,
    ToolSummary,
    ToolVersion,
)
from awb.inventory.open import open_store
from awb.inventory.store import Store
from awb.maintenance import Upkeep
from awb.meta_tools import MetaNames
from awb.sandbox.base import ExecutionSlots, Limits, Runtime
from awb.sandbox.registry import build_runtimes, limits_for
from awb.search.duplicates import rank_similar
from awb.search.fts import search_words
from awb.search.hybrid import search_engine
from awb.validation import off_loop
from awb.validation import schema_errors as schema_errors


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
        #: Where requests run store work: inline on SQLite, off the event loop within a deadline on
        #: PostgreSQL (awb.inventory.lane). Faces ask it for every store-bound step on the loop.
        self.lane = StoreLane(self.store)
        self.clock = clock or SystemClock()
        self.policy = MemoryPolicy(self.config.memory)
        self.events = EventBus()
        self.armory = Armory(self.store, self.config, self.events)
        self.search_engine = search_engine(self.store, self.config.search)
        self.events.subscribe(search_follower(lambda: self.search_engine, self.store))
        self.events.subscribe(journal_writer(self.store, self.clock))
        self.runtimes: dict[str, Runtime] = runtimes or build_runtimes(self.config)
        self._started = False
        sandbox = self.config.sandbox
        self.slots = ExecutionSlots(sandbox.max_concurrent, "tool", per_client=sandbox.per_client_share)
        memory = self.config.memory
        self.upkeep = Upkeep(
            self.store, self.policy, self.clock, self.events, memory.maintenance_every_calls, memory.calls_kept_per_tool
        )
        self.caller = Caller(
            self.config,
            self.store,
            self.clock,
            self.runtimes,
            slots=self.slots,
            policy=self.policy,
            events=self.events,
            armory=self.armory,
            upkeep=self.upkeep,
            lane=self.lane,
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
        # A shared store (PostgreSQL) tells us what other servers change; follow it from now on, once.
        subscribe = getattr(self.store, "subscribe_changes", None)
        if callable(subscribe) and not self._started:
            subscribe(self._follow_other_servers)
        self._started = True
        for name, runtime in self.runtimes.items():
            if warm_all or name == "monty":
                await runtime.start()

    def _follow_other_servers(self, change: Any) -> None:
        """Another server committed `change` (an `awb.inventory.postgres_notify.Change`); runs on the
        store's listener thread. Vectors follow; clients re-list when the equipped set may have moved."""
        self.search_engine.follow(change.kind, change.tool_ids)
        if change.equipped:
            self.events.publish(Event("external", None, {"kind": change.kind, "tool_ids": list(change.tool_ids)}))

    async def close(self) -> None:
        self._started = False
        await self.caller.flush_records()
        await self.upkeep.settled()
        for runtime in self.runtimes.values():
            await runtime.close()
        self.store.close()

    async def __aenter__(self) -> Workbench:
        if not self._started:  # a server starts it first, its own way (`awb.server.transports`)
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

    def runtime_for(self, language: Language, requested: RuntimeName | None) -> Runtime:
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

    async def validate_craft(self, request: CraftRequest) -> None:
        # Checking a schema is bounded but not free (up to its time budget): off the event loop.
        await off_loop(crafting.validate_request, request, self.config.max_code_bytes)
        await crafting.check_examples(request)

    async def craft(self, request: CraftRequest | dict[str, Any], *, names: MetaNames | None = None) -> Tool:
        """Check, admit and store a new tool. Its examples must pass in the sandbox first. `names` (here, in
        `update` and `equip`): the asking face's words for a meta-tool's action; MCP's served names by default."""
        return await craft.craft(self, request, names)

    def admission_budget(self) -> crafting.AdmissionBudget:
        return crafting.AdmissionBudget(self.limits, self.config.sandbox.admission_timeout_ms)

    async def admit_version(
        self, runtime: Runtime, code: str, examples: list[Example], output_schema: dict[str, Any] | None
    ) -> None:
        """The admission test of a new version (update): in an execution slot, in one time budget."""
        with self.slots.take():
            await crafting.admit(runtime, code, examples, output_schema, self.admission_budget())

    # --- call ---------------------------------------------------------------------------------

    async def call(self, ref: str, params: dict[str, Any] | None = None) -> CallResult:
        """Run a tool in its sandbox. Failures are recorded and raised as `ExecutionError`s."""
        # A local store resolves here, on the loop: its call path takes no extra step.
        tool = await self.resolve_for_request(ref) if self.lane.remote else self.resolve(ref)
        return await self.caller.call(tool, params)

    async def resolve_for_request(self, ref: str) -> Tool:
        """`resolve` on the store's lane; on a shared store, a live record its cache holds (kept in step
        with the other servers) answers at once, without a thread hop."""
        if self.lane.remote:
            cached = getattr(self.store, "cached", None)
            tool = cached(ref) if callable(cached) and isinstance(ref, str) else None
            if tool is not None:
                return tool  # type: ignore[no-any-return]
        return await self.lane.call(self.resolve, ref)

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
            lambda q, n: self.search(q, limit=n, matches_only=True),
            memory_level=memory_level,
            tag=tag,
            query=query,
            limit=limit,
            offset=offset,
        )

    def search(
        self, query: str, *, limit: int | None = None, top_k: int | None = None, matches_only: bool = False
    ) -> SearchResult:
        """The best `limit` matches (`top_k` is the spec's name for it; default 10); `matches_only`
        drops, in hybrid mode, the tools scoring under `RELEVANCE_FLOOR` (a listing's matches)."""
        return browse.search(self.store, self.search_engine, query, limit=limit, top_k=top_k, matches_only=matches_only)

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
        """Soft delete: the record stays (inspectable, purgeable), the tool can no longer be called; past
        `max_deleted_tools` soft-deleted tools, the longest-deleted are purged."""
        return forget.delete(
            self.store, self.events, self.resolve(ref), self.resolve, self.clock.now(), self.config.max_deleted_tools
        )

    # --- equip, evolve, find near-duplicates, purge ---------------------------------------------

    def equipped_tools(self) -> list[Tool]:
        """The equipped set, by name: what the MCP face lists as first-class tools."""
        return self.armory.equipped()

    def equip(self, ref: str, *, names: MetaNames | None = None) -> Tool:
        return self.armory.equip(self.resolve(ref), self.clock.now(), names)

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
        names: MetaNames | None = None,
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
            names=names,
        )

    def rollback(self, ref: str, to_version: int) -> Tool:
        """Make an earlier version current again; the history stays. Rolling back to the current version
        changes nothing and returns it with `parent_version` equal to `version`."""
        return evolve.rollback(self, ref, to_version)

    def similar(self, name: str, description: str, *, exclude: str | None = None, limit: int = 5) -> list[ToolSummary]:
        """Live tools close to a tool with this name and description, scored 0..1, best first."""
        # A description may be longer than a search query may be: its start says what the tool is.
        query = f"{name} {description}"[: browse.MAX_QUERY_CHARS]
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
            self.store,
            self.clock,
            self.events,
            archived_before_days=archived_before_days,
            deleted=deleted,
            dry_run=dry_run,
            only=only,
        )

    # --- memory maintenance ---------------------------------------------------------------------

    def maintain(self) -> list[TierChange]:
        """Demote idle medium-term tools, archive idle short-term ones (see awb.maintenance)."""
        return self.upkeep.run()

    def prune_calls(self) -> int:
        """Drop every tool's call records past `memory.calls_kept_per_tool` most recent; how many went."""
        return self.upkeep.prune_calls()


__all__ = ["CallResult", "CraftRequest", "Inspection", "SearchResult", "ToolPage", "Workbench"]
