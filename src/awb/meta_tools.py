"""The meta-tools' names: the one place that turns a meta-tool (`craft`, `call`, ...) into the name a
workbench serves it under, `awb_call` or `awb.call` as `tool_names` says.

Everything an agent reads that names a meta-tool (instructions, descriptions, hints, error messages)
takes the name from here, so a server never points an agent at a name it does not serve. A message that
tells its reader to do what a meta-tool does (call the tool, update it) is worded by the face that
answers (`MetaNames`): the MCP face by the name it serves, the CLI and the panel, which serve no MCP
tools, by their own command, or by the meta-tool as an MCP client reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, cast, get_args

#: How meta-tools are named: `awb_craft` (every host accepts it) or the spec's `awb.craft`.
ToolNames = Literal["underscore", "dotted"]

#: The meta-tools, by the verb each is named after.
MetaVerb = Literal["craft", "call", "list", "search", "delete", "inspect", "update", "rollback", "equip", "unequip"]
META_VERBS: tuple[MetaVerb, ...] = get_args(MetaVerb)

_SEPARATOR: dict[ToolNames, str] = {"underscore": "_", "dotted": "."}


def meta_tool_name(verb: MetaVerb, tool_names: ToolNames) -> str:
    """The name the meta-tool `verb` is served under."""
    return f"awb{_SEPARATOR[tool_names]}{verb}"


#: How a face words a meta-tool's action in what it tells its reader: `names("call")`.
MetaNames = Callable[[MetaVerb], str]


def served_by(tool_names: ToolNames) -> MetaNames:
    """The MCP face's words: each meta-tool by the name it is served under (`awb_call`)."""
    return lambda verb: meta_tool_name(verb, tool_names)


def worded_by(commands: Mapping[MetaVerb, str], tool_names: ToolNames) -> MetaNames:
    """The words of a face that serves no MCP tools: its own command for an action it has
    (`awb inventory equip`), else the meta-tool where it is served (`awb_call over MCP`)."""
    return lambda verb: commands.get(verb) or f"{meta_tool_name(verb, tool_names)} over MCP"


def served_names(verb: str) -> tuple[str, ...]:
    """Every name the meta-tool `verb` may be served under, for clients that do not know a workbench's
    `tool_names` (a blueprint's allowlist matches either)."""
    return tuple(f"awb{_SEPARATOR[style]}{verb}" for style in get_args(ToolNames))


def verb_of(name: str, tool_names: ToolNames) -> MetaVerb | None:
    """The meta-tool served as `name` under `tool_names`, or None (a lookup: every MCP request asks)."""
    return _SERVED[tool_names].get(name)


#: Each style's served names, to their meta-tool.
_SERVED: dict[ToolNames, dict[str, MetaVerb]] = {
    style: {meta_tool_name(verb, style): verb for verb in META_VERBS} for style in get_args(ToolNames)
}

#: Names no equipped tool may take: a meta-tool's, in either style (the inventory may be shared by
#: servers configured differently).
RESERVED_NAMES = frozenset(name for verb in META_VERBS for name in served_names(verb))
RESERVED_NAME_RULE = (
    "no tool may take a meta-tool's name in any case, in either style (_ or .): models and some clients "
    "compare tool names without case, so it would pass for the meta-tool"
)


def reserved_name(name: str) -> MetaVerb | None:
    """The meta-tool `name` would pass for, in either style and any case (`call` for `AWB_CALL` or
    `Awb.Call`), or None; `meta_tool_name` gives the name to show."""
    folded = name.casefold()
    return cast(MetaVerb, folded[len("awb_") :]) if folded in RESERVED_NAMES else None
