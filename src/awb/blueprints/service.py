"""The blueprint runtime as one service: validate, compile (cached by id), save and list files, run,
read logs, describe the components, improve instructions. The REST face and the CLI are thin over it.
"""

from __future__ import annotations

import dataclasses
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import anyio

from awb.blueprints.compile import CompiledBlueprint, RuntimeOptions, compile_blueprint
from awb.blueprints.components import component_schemas
from awb.blueprints.errors import BlueprintInvalid, BlueprintNotFound
from awb.blueprints.files import BlueprintFile, BlueprintFiles
from awb.blueprints.improve import Improvement, ImproveRequest, improve_instructions
from awb.blueprints.journal import LogEntry, log_limits
from awb.blueprints.knowledge import KnowledgeLibrary
from awb.blueprints.runner import RunReply, run_blueprint
from awb.blueprints.schema import Blueprint, validate_blueprint
from awb.blueprints.sessions import SessionStore, log_page_within
from awb.config import Config


class BlueprintService:
    def __init__(
        self,
        config: Config,
        sessions: SessionStore,
        *,
        options: RuntimeOptions | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.sessions = sessions
        env = dict(os.environ if environ is None else environ)
        options = options or RuntimeOptions(
            environ=env,
            tavily_base_url=config.blueprints.tavily_base_url,
            allow_mcp_commands=config.blueprints.allow_mcp_commands,
        )
        # The service owns the configured knowledge bases (and closes them) unless it was lent some.
        self._own_knowledge = options.knowledge is None
        if options.knowledge is None:
            options = dataclasses.replace(options, knowledge=KnowledgeLibrary.from_config(config))
        self.options = options
        self.knowledge_bases = options.knowledge_bases()
        self.files = BlueprintFiles(config.blueprints_dir, knowledge_bases=self.knowledge_bases)
        self._cache: OrderedDict[str, CompiledBlueprint] = OrderedDict()
        self.log_limits = log_limits(config)
        self.cache_hits = 0

    # --- compile and cache ------------------------------------------------------------------

    def compile(self, data: object) -> CompiledBlueprint:
        """Validate and compile; an ephemeral blueprint (not cached)."""
        if isinstance(data, Blueprint):
            return compile_blueprint(data, self.options)
        return compile_blueprint(validate_blueprint(data, knowledge_bases=self.knowledge_bases), self.options)

    def _remember(self, compiled: CompiledBlueprint) -> CompiledBlueprint:
        self._cache[compiled.blueprint_id] = compiled
        self._cache.move_to_end(compiled.blueprint_id)
        while len(self._cache) > self.config.blueprints.cache_size:
            self._cache.popitem(last=False)
        return compiled

    def validate_and_compile(self, data: object) -> CompiledBlueprint:
        return self._remember(self.compile(data))

    def cached(self, blueprint_id: str) -> CompiledBlueprint | None:
        compiled = self._cache.get(blueprint_id)
        if compiled is not None:
            self._cache.move_to_end(blueprint_id)
            self.cache_hits += 1
        return compiled

    async def get(self, blueprint_id: str) -> tuple[CompiledBlueprint, bool]:
        """The compiled blueprint and whether it came from the cache; saved files are the fallback."""
        compiled = self.cached(blueprint_id)
        if compiled is not None:
            return compiled, True
        blueprint = await anyio.to_thread.run_sync(self.files.find, blueprint_id)
        if blueprint is None:
            raise BlueprintNotFound(
                f"no blueprint with id {blueprint_id!r}: validate-and-compile or save it first",
                blueprint_id=blueprint_id,
            )
        return self._remember(self.compile(blueprint)), False

    # --- files ----------------------------------------------------------------------------------

    async def save(self, data: object) -> tuple[CompiledBlueprint, str]:
        compiled = self.validate_and_compile(data)
        path = await anyio.to_thread.run_sync(self.files.save, compiled.blueprint)
        return compiled, path.name

    async def list_files(self) -> list[BlueprintFile]:
        return await anyio.to_thread.run_sync(self.files.scan)

    async def list_page(self, *, after: str | None, limit: int) -> tuple[list[BlueprintFile], str | None]:
        return await anyio.to_thread.run_sync(lambda: self.files.page(after=after, limit=limit))

    # --- runs -----------------------------------------------------------------------------------

    async def run(
        self, *, message: str, blueprint: object | None, blueprint_id: str | None, session_id: str | None
    ) -> tuple[RunReply, bool]:
        if (blueprint is None) == (blueprint_id is None):
            raise BlueprintInvalid(
                "give exactly one of blueprint or blueprint_id",
                errors=[
                    {"path": "blueprint", "message": "give exactly one of blueprint or blueprint_id", "type": "one_of"}
                ],
            )
        if blueprint_id is not None:
            compiled, hit = await self.get(blueprint_id)
        else:
            compiled, hit = self.compile(blueprint), False
        reply = await run_blueprint(
            compiled, message, session_id=session_id, store=self.sessions, log_limits=self.log_limits
        )
        return reply, hit

    async def logs(self, session_id: str) -> list[LogEntry]:
        return await anyio.to_thread.run_sync(self.sessions.logs, session_id)

    async def log_page(self, session_id: str, *, after: int, limit: int) -> tuple[list[LogEntry], int | None]:
        """At most `limit` entries after the one numbered `after`, within `LOG_PAGE_BYTES` of JSON, and the
        number to read on from (None when these are the last)."""
        return await anyio.to_thread.run_sync(
            lambda: log_page_within(self.sessions, session_id, after=after, limit=limit)
        )

    def close(self) -> None:
        self.sessions.close()
        if self._own_knowledge and self.options.knowledge is not None:
            self.options.knowledge.close()

    # --- builder support ------------------------------------------------------------------------

    def schemas(self) -> dict[str, Any]:
        return component_schemas(self.knowledge_bases)

    async def improve(self, request: ImproveRequest) -> Improvement:
        return await improve_instructions(
            request, model_spec=self.config.blueprints.improve_model, environ=self.options.environ
        )
