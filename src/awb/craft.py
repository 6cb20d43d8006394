"""Crafting a new tool: its request checked, its examples passed in the sandbox (the admission test),
the record stored under the `max_tools` cap. A new version of a tool is `awb.evolve`'s; what both check
is `awb.crafting`'s.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pydantic import ValidationError

from awb import crafting
from awb.clock import Clock
from awb.config import Config
from awb.crafting import CraftRequest
from awb.errors import AdmissionFailed, AwbError, DuplicateTool, InvalidParams
from awb.events import Event, EventBus
from awb.inventory.lane import StoreLane
from awb.inventory.models import Language, RuntimeName, Tool, ToolSummary
from awb.inventory.names import name_taken
from awb.inventory.store import Store
from awb.meta_tools import MetaNames, served_by
from awb.sandbox.base import ExecutionSlots, Runtime
from awb.sandbox.registry import choose_python_runtime

log = logging.getLogger("awb.workbench")


class Bench(Protocol):
    """What crafting needs of the workbench (`awb.workbench.Workbench` is one)."""

    store: Store
    clock: Clock
    events: EventBus
    config: Config
    runtimes: dict[str, Runtime]
    slots: ExecutionSlots
    lane: StoreLane

    async def validate_craft(self, request: CraftRequest) -> None: ...

    def runtime_for(self, language: Language, requested: RuntimeName | None) -> Runtime: ...

    def admission_budget(self) -> crafting.AdmissionBudget: ...

    def similar(
        self, name: str, description: str, *, exclude: str | None = None, limit: int = 5
    ) -> list[ToolSummary]: ...


async def craft(workbench: Bench, request: CraftRequest | dict[str, Any], names: MetaNames | None) -> Tool:
    """Check, admit and store a new tool. Its examples must pass in the sandbox first."""
    config, store = workbench.config, workbench.store
    if not isinstance(request, CraftRequest):
        try:
            request = CraftRequest.model_validate(request)
        except ValidationError as exc:
            raise InvalidParams.of_model("invalid craft request", exc) from None
    await workbench.validate_craft(request)
    crafting.check_new_name(request.name, config.tool_names)
    lane = workbench.lane  # every store step (events too: the journal is in the store) on the store's lane
    await lane.call(_check_new, store, request.name, config.max_tools)
    # Admission runs tool code: it takes an execution slot like a call, and one time budget in all.
    with workbench.slots.take():
        budget = workbench.admission_budget()
        requested = request.runtime
        if request.language == "python" and requested is None and config.sandbox.python_runtime == "auto":
            share = budget.limits(share=len(request.examples) + 1)
            requested = await choose_python_runtime(workbench.runtimes, request.code, request.examples, share)  # type: ignore[assignment]
        runtime = workbench.runtime_for(request.language, requested)
        await lane.call(_refuse_duplicate, workbench, request, names)
        # The creation moment, for every face and process that watches (the web panel's toasts).
        await lane.call(
            workbench.events.publish, Event("craft_started", None, {"name": request.name, "runtime": runtime.name})
        )
        try:
            await crafting.admit(runtime, request.code, request.examples, request.output_schema, budget)
        except AdmissionFailed as exc:
            reason = exc.message.split(";")[0]
            await _announce(workbench, Event("craft_rejected", None, {"name": request.name, "reason": reason}))
            raise
    grants = config.sandbox.grants.get(request.name, [])
    tool = crafting.new_tool(request, runtime.name, read_dirs=grants, now=workbench.clock.now())
    try:
        await lane.call(_store, store, tool, config.max_tools)
    except AwbError as exc:
        # `craft_started` went out to every panel: its outcome goes too (a name taken meanwhile by another
        # server's craft, the cap reached meanwhile, the inventory gone), as an admission failure's does.
        await _announce(workbench, Event("craft_rejected", None, {"name": request.name, "reason": exc.message}))
        raise
    log.info("crafted %s (%s) on %s", tool.name, tool.tool_id, tool.runtime)
    await _announce(workbench, Event("crafted", tool.tool_id))
    return tool


async def _announce(workbench: Bench, event: Event) -> None:
    """Publish `event` on the store's lane (its journal is in the store). The database not answering in
    time does not undo what happened (a tool stored, an admission failed): the request says that."""
    try:
        await workbench.lane.call(workbench.events.publish, event)
    except AwbError as exc:
        log.warning("could not announce %s: %s", event.kind, exc.message)


def _check_new(store: Store, name: str, max_tools: int) -> None:
    holder = store.name_holder(name)
    if holder is not None:  # refused before admission runs its examples; the store checks again as it writes
        raise name_taken(name, holder.name, holder.tool_id)
    store.check_room(max_tools)


def _store(store: Store, tool: Tool, max_tools: int) -> None:
    try:
        # The cap is checked again where the row is written: concurrent crafts cannot pass it together.
        store.add_tool(tool, max_active=max_tools)
    except AwbError:
        raise
    except Exception as exc:  # a concurrent craft of the name, in any case, won the race (the index said so)
        holder = store.name_holder(tool.name)
        if holder is not None:
            raise name_taken(tool.name, holder.name, holder.tool_id) from exc
        raise


def _refuse_duplicate(workbench: Bench, request: CraftRequest, names: MetaNames | None) -> None:
    config = workbench.config
    if config.dedupe != "reject":
        return
    close = [
        s for s in workbench.similar(request.name, request.description) if (s.score or 0) >= config.dedupe_threshold
    ]
    if close:
        raise DuplicateTool(
            f"{close[0].name!r} ({close[0].tool_id}) already does this (similarity {close[0].score}); "
            f"reuse it, or update it with {(names or served_by(config.tool_names))('update')}",
            tool_id=close[0].tool_id,
            name=close[0].name,
            score=close[0].score,
            threshold=config.dedupe_threshold,
        )
