"""Evolving a tool: new immutable versions that must pass their examples, and rollback to an earlier one.

The tool record always holds its current version; `tool_versions` holds the versions admitted, up to
`max_versions_per_tool` of them: a new version past it removes the oldest, never the current one.
`parent_version` is the version that was current before this one became current (by update or rollback).
What `update` and `rollback` return is the record with `parent_version` the version current when the
request came: a rollback to the version already current, or an update that gives the current version's
fields again, changes nothing, and returns `parent_version` equal to `version` (the record keeps its own).
A deleted tool neither gains a version nor rolls back (`tool_deleted`), even when the delete comes from
another server while the update is tested.
Usage counters stay on the tool across versions; per-version usage and failures live on the versions.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from pydantic import ValidationError

from awb.clock import Clock
from awb.config import Config
from awb.crafting import CraftRequest
from awb.errors import AwbError, InvalidParams, NotEquippable, ToolDeleted, VersionConflict
from awb.events import Event, EventBus
from awb.inventory.lane import StoreLane
from awb.inventory.models import Example, Language, RuntimeName, Tool, ToolVersion
from awb.inventory.store import Store
from awb.meta_tools import MetaNames, served_by
from awb.sandbox.base import Runtime
from awb.schema_rules import equip_problems

log = logging.getLogger("awb.workbench")


class Bench(Protocol):
    """What evolving a tool needs of the workbench (`awb.workbench.Workbench` is one): a version is
    checked and admitted exactly as a craft is."""

    store: Store
    clock: Clock
    events: EventBus
    config: Config
    lane: StoreLane

    def resolve(self, ref: str, *, allow_deleted: bool = False) -> Tool: ...

    async def validate_craft(self, request: CraftRequest) -> None: ...

    def runtime_for(self, language: Language, requested: RuntimeName | None) -> Runtime: ...

    async def admit_version(
        self, runtime: Runtime, code: str, examples: list[Example], output_schema: dict[str, Any] | None
    ) -> None: ...


def _move_to(workbench: Bench, tool: Tool, fields: dict[str, Any]) -> None:
    """Make the kept version `fields["version"]` current, only while `tool.version` still is current,
    that version is still kept (an update elsewhere may prune it) and the tool is not deleted; else the
    error that says which of these no longer holds."""
    store = workbench.store
    if store.update_to_version(tool.tool_id, {"version": tool.version}, **fields):
        return
    now = workbench.resolve(tool.tool_id, allow_deleted=True)
    if now.status == "deleted":
        raise _deleted_meanwhile(tool, "rolled back")
    kept = store.versions(tool.tool_id)
    if all(v.version != fields["version"] for v in kept):
        raise _no_version(tool, fields["version"], kept)
    raise VersionConflict(
        f"tool {tool.name!r} changed during the rollback: version {now.version} is current now, "
        f"not {tool.version}; send the rollback again",
        tool_id=tool.tool_id,
        based_on=tool.version,
        current=now.version,
    )


def _deleted_meanwhile(tool: Tool, action: str) -> ToolDeleted:
    # A deleted tool neither gains a version nor moves to another: the delete that came first stands.
    return ToolDeleted(
        f"tool {tool.name!r} was deleted while it was {action}; it was not changed", tool_id=tool.tool_id
    )


def _refuse_unlistable(
    workbench: Bench, tool: Tool, input_schema: dict[str, Any], which: str, names: MetaNames | None
) -> None:
    """Refuse to make `input_schema` current for an equipped `tool` when it cannot be served as an MCP tool
    of its own: the tool would silently drop out of every client's tool list (an update or a rollback)."""
    problems = equip_problems(input_schema)
    if tool.equipped and problems:
        raise NotEquippable(
            f"tool {tool.name!r} is equipped and {which} cannot be served as its own MCP tool: "
            f"{problems[0]}. Unequip it first (it stays callable with "
            f"{(names or served_by(workbench.config.tool_names))('call')})",
            tool_id=tool.tool_id,
            rule="input_schema_root",
        )


def _no_version(tool: Tool, to_version: int, history: list[ToolVersion]) -> InvalidParams:
    # The tool exists, so tool_not_found would mislead: the argument is what is wrong.
    return InvalidParams(
        f"tool {tool.name!r} has no version {to_version} (its versions: {', '.join(str(v.version) for v in history)})",
        field="to_version",
        tool_id=tool.tool_id,
        versions=[v.version for v in history],
    )


def _examples(raw: Any) -> list[Example]:
    if not isinstance(raw, list):
        raise InvalidParams("examples must be a list of {params, expected} objects", field="examples")
    try:
        return [e if isinstance(e, Example) else Example.model_validate(e) for e in raw]
    except ValidationError as exc:
        raise InvalidParams("invalid examples", errors=[{"message": e["msg"]} for e in exc.errors()[:20]]) from None


async def update(
    workbench: Bench,
    ref: str,
    *,
    code: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    examples: list[Example] | list[dict[str, Any]] | None = None,
    names: MetaNames | None = None,
) -> Tool:
    """Admit a new version of `ref` (fields left out are kept) and make it current; a refusal words a
    meta-tool's action in `names` (the asking face's words; as MCP serves them by default)."""
    lane = workbench.lane
    tool = await lane.call(workbench.resolve, ref)
    if all(v is None for v in (code, description, input_schema, output_schema, examples)):
        raise InvalidParams(
            "nothing to update: give code, description, input_schema, output_schema or examples", tool_id=tool.tool_id
        )
    try:
        request = CraftRequest(
            name=tool.name,
            description=tool.description if description is None else description,
            code=tool.code if code is None else code,
            input_schema=tool.input_schema if input_schema is None else input_schema,
            output_schema=tool.output_schema if output_schema is None else output_schema,
            examples=tool.examples if examples is None else _examples(examples),
            language=tool.language,
            runtime=tool.runtime,
        )
    except ValidationError as exc:
        raise InvalidParams.of_model("invalid update", exc) from None
    if _same_version(tool, request):
        # Nothing to write, as for a rollback to the current version. A client retrying an update whose
        # answer it lost wrote the same version again on each try, and past `max_versions_per_tool`
        # the copies pushed the tool's earlier versions out of its history.
        return tool.model_copy(update={"parent_version": tool.version})
    await workbench.validate_craft(request)
    _refuse_unlistable(workbench, tool, request.input_schema, "the new input_schema", names)
    runtime = workbench.runtime_for(request.language, request.runtime)
    await workbench.admit_version(runtime, request.code, request.examples, request.output_schema)
    now = workbench.clock.now()
    # The store numbers the version and makes it current in one step, only while the version this update
    # was built on and tested with is still current (fields left out are kept from it: two updates at
    # once each kept the other's fields out) and the tool is not deleted meanwhile.
    added = await lane.call(
        workbench.store.add_current_version,
        tool.tool_id,
        tool.version,
        ToolVersion(
            version=tool.version + 1,  # a guess: the store numbers it
            code=request.code,
            description=request.description,
            input_schema=request.input_schema,
            output_schema=request.output_schema,
            examples=request.examples,
            runtime=runtime.name,
            created_at=now,
        ),
        keep=workbench.config.max_versions_per_tool,
    )
    if added.outcome in ("deleted", "gone"):
        raise _deleted_meanwhile(tool, "updated")
    if added.outcome == "changed":
        raise VersionConflict(
            f"tool {tool.name!r} changed while this update was tested: it was built on version {tool.version}, "
            f"and version {added.number} is current now; send the update again",
            tool_id=tool.tool_id,
            based_on=tool.version,
            current=added.number,
        )
    number = added.number
    fields: dict[str, Any] = {
        "version": number,
        "parent_version": tool.version,
        "code": request.code,
        "description": request.description,
        "input_schema": request.input_schema,
        "output_schema": request.output_schema,
        "examples": request.examples,
        "runtime": runtime.name,
        "updated_at": now,
    }
    # The journal and the search index follow on the lane (a remote store's journal is written there); the
    # version is stored whether or not the database answers that in time.
    try:
        await lane.call(
            workbench.events.publish,
            Event("updated", tool.tool_id, {"version": number, "previous": tool.version, "equipped": tool.equipped}),
        )
    except AwbError as exc:
        log.warning("could not announce the update of %s: %s", tool.name, exc.message)
    return tool.model_copy(update=fields)


def _same_version(tool: Tool, request: CraftRequest) -> bool:
    """Whether `request` (fields left out taken from `tool`, and normalised as a craft's) is the version
    `tool` has now."""
    return (
        request.code == tool.code
        and request.description == tool.description
        and request.input_schema == tool.input_schema
        and request.output_schema == tool.output_schema
        and request.examples == tool.examples
    )


def rollback(workbench: Bench, ref: str, to_version: int) -> Tool:
    """Make an earlier (or any other kept) version current again. Nothing is deleted; a rollback to
    the current version is a no-op (see the module's docstring for what it returns)."""
    tool = workbench.resolve(ref)
    if not isinstance(to_version, int) or isinstance(to_version, bool) or to_version < 1:
        raise InvalidParams("to_version must be a positive integer", to_version=to_version)
    history = workbench.store.versions(tool.tool_id)
    target = next((v for v in history if v.version == to_version), None)
    if target is None:
        raise _no_version(tool, to_version, history)
    if target.version != tool.version:
        _refuse_unlistable(workbench, tool, target.input_schema, f"version {target.version}'s input_schema", None)
    if target.version == tool.version:
        # Nothing moves: no write, no event. The version current before this request is this one (the
        # record's own parent_version is older news: it would read as a move from it).
        return tool.model_copy(update={"parent_version": tool.version})
    now = workbench.clock.now()
    fields: dict[str, Any] = {
        "version": target.version,
        "parent_version": tool.version,
        "code": target.code,
        "description": target.description,
        "input_schema": target.input_schema,
        "output_schema": target.output_schema,
        "examples": target.examples,
        "runtime": target.runtime,
        "updated_at": now,
    }
    # Another server (or the CLI) may move, prune or delete the tool between the read and this write:
    # the rollback is from the version it read, or it is refused, as an update is.
    _move_to(workbench, tool, fields)
    workbench.events.publish(
        Event(
            "updated",
            tool.tool_id,
            {"version": target.version, "previous": tool.version, "rollback": True, "equipped": tool.equipped},
        )
    )
    return tool.model_copy(update=fields)
