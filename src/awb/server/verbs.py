"""The meta-tools' answers other than awb_call's: craft, list, search, delete, inspect, update, rollback,
equip and unequip, each turning checked arguments into `Workbench` calls and a structured reply.

awb_call, the hot path, stays in `awb.server.mcp` with the validation every verb goes through first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from awb.errors import InvalidParams
from awb.inventory.models import Tool
from awb.meta_tools import MetaVerb, ToolNames
from awb.schema_rules import craft_warnings
from awb.server.inspection import inspection_reply
from awb.workbench import Workbench

#: A meta-tool's answer to its (already validated) arguments.
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
#: The tool a call's "tool_id or name" names (`McpFace._ref_checked`).
RefChecked = Callable[[dict[str, Any]], Awaitable[str]]


class MetaVerbs:
    """The meta-tools a face serves beside awb_call; `ref_checked` is the face's one rule for naming a tool."""

    def __init__(self, workbench: Workbench, tool_names: ToolNames, ref_checked: RefChecked) -> None:
        self.workbench = workbench
        self.tool_names = tool_names
        self._ref_checked = ref_checked

    def handlers(self) -> dict[MetaVerb, Handler]:
        return {
            "craft": self._craft,
            "list": self._list,
            "search": self._search,
            "delete": self._delete,
            "inspect": self._inspect,
            "update": self._update,
            "rollback": self._rollback,
            "equip": self._equip,
            "unequip": self._unequip,
        }

    async def _craft(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = await self.workbench.craft(arguments)
        lane = self.workbench.lane
        similar = await lane.work(self.workbench.similar, tool.name, tool.description, exclude=tool.tool_id)
        equipped = await lane.call(self.workbench.equipped_tools)
        return {
            "tool_id": tool.tool_id,
            "status": "created",
            "memory_level": tool.memory_level,
            "name": tool.name,
            "description": tool.description,
            "version": tool.version,
            "runtime": tool.runtime,
            "similar": [s.model_dump(mode="json") for s in similar],
            "warnings": craft_warnings(tool.input_schema, self.tool_names),
            "equipped_tools": [t.name for t in equipped],
        }

    async def _list(self, arguments: dict[str, Any]) -> dict[str, Any]:
        listing = partial(
            self.workbench.list_page,
            memory_level=arguments.get("memory_level"),
            tag=arguments.get("tag"),
            query=arguments.get("query"),
            limit=int(arguments.get("limit", 20)),
            offset=int(arguments.get("offset", 0)),
        )
        # Off the event loop: a query ranks with search (which may embed it or build an index), and a
        # listing counts every match (milliseconds at 100,000 tools, more for a tag most tools carry).
        page = await self.workbench.lane.work(listing)
        return {**page.model_dump(mode="json"), "count": len(page.tools)}

    async def _search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # The spec types limit and top_k as `number`: 5.0 is accepted (the schema's integer) and used as 5.
        limit, top_k = (None if arguments.get(k) is None else int(arguments[k]) for k in ("limit", "top_k"))
        # Off the event loop: embedding the query, or a first search building its indexes (seconds at
        # 100k tools), must not hold up every other request.
        found = await self.workbench.lane.work(self.workbench.search, arguments["query"], limit=limit, top_k=top_k)
        return found.model_dump(mode="json")

    async def _delete(self, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = await self.workbench.lane.call(self.workbench.delete, await self._ref_checked(arguments))
        return {"tool_id": tool.tool_id, "name": tool.name, "status": "deleted"}

    async def _inspect(self, arguments: dict[str, Any]) -> dict[str, Any]:
        # Off the event loop, and the history without each version's code, schemas and examples: whole, the
        # reply was every kept version's (100 of up to ~450 KB: 44 MB, 0.3 s of the loop per call in memory),
        # a size a tool's author chooses and any client may ask for again and again.
        ref, number = await self._ref_checked(arguments), arguments.get("version")
        return await self.workbench.lane.work(inspection_reply, self.workbench, ref, number)

    async def _update(self, arguments: dict[str, Any]) -> dict[str, Any]:
        names = ("code", "description", "input_schema", "output_schema", "examples")
        fields = {k: arguments[k] for k in names if k in arguments}
        if "to_version" in arguments:
            if fields:
                raise InvalidParams("give either to_version (a rollback) or new fields, not both", fields=list(fields))
            return await self._rollback(arguments)
        return _version_result(await self.workbench.update(await self._ref_checked(arguments), **fields), "updated")

    async def _rollback(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref, to_version = await self._ref_checked(arguments), int(arguments["to_version"])
        return _version_result(await self.workbench.lane.call(self.workbench.rollback, ref, to_version), "rolled_back")

    async def _equip(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref = await self._ref_checked(arguments)
        return await self.workbench.lane.call(lambda: self._equip_result(self.workbench.equip(ref)))

    async def _unequip(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ref = await self._ref_checked(arguments)
        return await self.workbench.lane.call(lambda: self._equip_result(self.workbench.unequip(ref)))

    def _equip_result(self, tool: Tool) -> dict[str, Any]:
        return {
            "tool_id": tool.tool_id,
            "name": tool.name,
            "equipped": tool.equipped,
            "equipped_tools": [t.name for t in self.workbench.equipped_tools()],
        }


def _version_result(tool: Tool, moved: str) -> dict[str, Any]:
    """`moved` names the change; a version that was already current (a rollback to it) is `unchanged`."""
    return {
        "tool_id": tool.tool_id,
        "name": tool.name,
        "status": "unchanged" if tool.parent_version == tool.version else moved,
        "version": tool.version,
        "parent_version": tool.parent_version,
        "equipped": tool.equipped,
    }
