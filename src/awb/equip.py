"""The equipped set: the few tools exposed as first-class tools, global to the workbench and capped.

Equipping is a flag on the tool record, so every process that opens the inventory sees the same set.
"""

from __future__ import annotations

from datetime import datetime

from awb.config import Config
from awb.errors import LimitExceeded, NameConflict, NotEquippable
from awb.events import Event, EventBus
from awb.inventory.models import Tool
from awb.inventory.store import Store
from awb.meta_tools import RESERVED_NAME_RULE, MetaNames, meta_tool_name, reserved_name, served_by
from awb.schema_rules import equip_problems


class Armory:
    """Rules for the equipped set: who may join it, how big it gets, and who hears about changes."""

    def __init__(self, store: Store, config: Config, events: EventBus) -> None:
        self.store = store
        self.config = config
        self.events = events

    def equipped(self) -> list[Tool]:
        """The equipped tools, in a stable order (by name)."""
        tools = self.store.list_tools(equipped=True, limit=max(self.config.max_equipped, 1) + 100)
        return sorted(tools, key=lambda t: t.name)

    def equip(self, tool: Tool, now: datetime, names: MetaNames | None = None) -> Tool:
        """Equip `tool`; a refusal says how to reach it meanwhile in `names`, the words of the face that
        asked (the meta-tools as served, by default)."""
        if tool.equipped:
            return tool
        # `call` is the path that reaches any tool, equipped or not.
        call = (names or served_by(self.config.tool_names))("call")
        if tool.status != "active":
            raise NotEquippable(
                f"tool {tool.name!r} is {tool.status}; call it once ({call}) to bring it back before equipping",
                tool_id=tool.tool_id,
                status=tool.status,
            )
        verb = reserved_name(tool.name)
        if verb is not None:
            meta = meta_tool_name(verb, self.config.tool_names)
            # A record from before craft refused such names: it stays callable, listable and deletable.
            raise NameConflict(
                f"tool {tool.name!r} cannot be equipped beside the meta-tool {meta}: {RESERVED_NAME_RULE}",
                name=tool.name,
                rule="reserved_name",
            )
        problems = equip_problems(tool.input_schema)
        if problems:
            raise NotEquippable(
                f"tool {tool.name!r} cannot be an MCP tool of its own: {problems[0]}. It stays callable with "
                f"{call}; to equip it, update its input_schema to a plain object schema",
                tool_id=tool.tool_id,
                rule="input_schema_root",
            )
        equipped = self.equipped()
        if any(t.tool_id == tool.tool_id for t in equipped):
            return tool.model_copy(update={"equipped": True})  # equipped since `tool` was read
        # Without regard to case, as for the meta-tools' names: models and some clients compare tool names
        # so, and `Adder` listed beside `adder` as a first-class tool could pass for it.
        folded = tool.name.casefold()
        clash = next((t for t in equipped if t.name.casefold() == folded), None)
        if clash is not None:
            if clash.name == tool.name:
                message = f"another equipped tool is named {tool.name!r} ({clash.tool_id})"
            else:
                message = (
                    f"tool {tool.name!r} cannot be equipped beside the equipped tool {clash.name!r} ({clash.tool_id}): "
                    "names that differ only in case pass for each other"
                )
            raise NameConflict(message, name=tool.name, tool_id=clash.tool_id)
        if len(equipped) >= self.config.max_equipped:
            raise LimitExceeded(
                f"{len(equipped)} tools are equipped, the maximum (max_equipped={self.config.max_equipped}); "
                "unequip one first",
                limit="max_equipped",
                equipped=[t.name for t in equipped],
            )
        self.store.update(tool.tool_id, equipped=True, updated_at=now)
        self.events.publish(Event("equipped", tool.tool_id, {"name": tool.name}))
        return tool.model_copy(update={"equipped": True, "updated_at": now})

    def unequip(self, tool: Tool, now: datetime) -> Tool:
        if not tool.equipped:
            return tool
        self.store.update(tool.tool_id, equipped=False, updated_at=now)
        self.events.publish(Event("unequipped", tool.tool_id, {"name": tool.name}))
        return tool.model_copy(update={"equipped": False, "updated_at": now})

    def auto_equip(self, tool: Tool, now: datetime) -> Tool:
        """Equip a long-term tool when the config asks for it and there is room; never raises."""
        if not self.config.auto_equip_long_term or tool.memory_level != "long_term":
            return tool
        # `tool` is as the call read it before it ran: an equip, unequip or delete made since is in the store.
        now_stored = self.store.get(tool.tool_id)
        if now_stored is None:
            return tool
        tool = tool.model_copy(
            update={
                "equipped": now_stored.equipped,
                "status": now_stored.status,
                "input_schema": now_stored.input_schema,
            }
        )
        if tool.equipped:
            return tool
        if reserved_name(tool.name) or tool.status != "active" or equip_problems(tool.input_schema):
            return tool
        if len(self.equipped()) >= self.config.max_equipped:
            return tool
        try:
            return self.equip(tool, now)
        except (LimitExceeded, NameConflict, NotEquippable):
            return tool  # another process filled the set or took the name meanwhile: the call stands
