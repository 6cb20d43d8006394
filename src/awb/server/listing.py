"""The `tools/list` answer: the meta-tools, then every equipped tool that can be served.

One tool must never break the listing for every client. Craft and update normalise schemas, but a
record can still reach the store another way (an older version of awb, a hand edit, a bug), so each
equipped tool is checked against the wire models of every protocol version the SDK speaks and the
rules for first-class tools; one that fails is left out, logged once with its id, and reported by
`awb doctor`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from awb.config import Config
from awb.errors import InvalidParams
from awb.inventory.models import Tool
from awb.meta_tools import RESERVED_NAME_RULE, MetaNames, ToolNames, meta_tool_name, reserved_name, served_by
from awb.schema_rules import equip_problems, normalise_input_schema, served_output_schema

if TYPE_CHECKING:
    import mcp_types as types

log = logging.getLogger("awb.mcp.listing")

HOSTS_REFUSING_DOTS = "Claude Desktop, the Anthropic API (so Claude Code) and the OpenAI API"


class Equipped(Protocol):
    """Where the equipped tools come from: a `Workbench`, or `awb doctor`'s view of a store (which
    then need not import the workbench)."""

    @property
    def config(self) -> Config: ...

    def equipped_tools(self) -> list[Tool]: ...


def served_tool(tool: Tool, tool_names: ToolNames = "underscore", names: MetaNames | None = None) -> types.Tool:
    """An equipped tool as `tools/list` shows it; `ValueError` when it cannot be served, worded in `names`
    (the meta-tools as served by default; `awb doctor` gives the CLI's)."""
    # The SDK's wire models load with the first equipped tool: `awb doctor` on an inventory with
    # nothing equipped never imports the MCP SDK (a second of CPU on a small machine).
    import mcp_types as types
    from mcp_types.methods import serialize_server_result
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    verb = reserved_name(tool.name)
    if verb is not None:  # equipped before the rule held (or imported so): it would pass for the meta-tool
        meta, call = meta_tool_name(verb, tool_names), (names or served_by(tool_names))("call")
        raise ValueError(f"named like the meta-tool {meta}: {RESERVED_NAME_RULE}; unequip it ({call} still reaches it)")
    problems = equip_problems(tool.input_schema)
    if problems:
        raise ValueError(problems[0])
    try:
        input_schema = normalise_input_schema(tool.input_schema)
    except InvalidParams as error:
        raise ValueError(error.message) from None
    entry = types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=input_schema,
        output_schema=served_output_schema(tool.output_schema),
    )
    # The fields the runner adds to every modern result are given, so only the tool is judged.
    listed = {
        "tools": [entry.model_dump(by_alias=True, mode="json", exclude_none=True)],
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
    }
    for version in KNOWN_PROTOCOL_VERSIONS:
        try:
            serialize_server_result("tools/list", version, listed)
        except ValidationError as error:
            where = "/".join(str(p) for p in error.errors()[0]["loc"])
            raise ValueError(
                f"not a valid MCP tool on protocol {version} ({where}: {error.errors()[0]['msg']})"
            ) from None
    return entry


class EquippedListing:
    """Equipped tools as MCP tools, each checked once per version of its record."""

    def __init__(self, workbench: Equipped, names: MetaNames | None = None) -> None:
        self.workbench = workbench
        self.names = names
        self._served: dict[tuple[str, int, str, str], types.Tool | None] = {}
        #: tool_id -> why it is left out of the listing.
        self.left_out: dict[str, str] = {}

    def tools(self) -> list[types.Tool]:
        served: dict[tuple[str, int, str, str], types.Tool | None] = {}
        for tool in self.workbench.equipped_tools():
            key = (tool.tool_id, tool.version, tool.name, tool.description)
            served[key] = self._served[key] if key in self._served else self._check(tool)
        # Only the records equipped now are kept, so neither map outgrows the equipped set.
        self._served = served
        current = {key[0] for key in served}
        self.left_out = {k: v for k, v in self.left_out.items() if k in current}
        return [entry for entry in served.values() if entry is not None]

    def listed_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema the last listing served for the tool named `name`, or None; reads no store."""
        for entry in list(self._served.values()):
            if entry is not None and entry.name == name:
                return entry.input_schema
        return None

    def _check(self, tool: Tool) -> types.Tool | None:
        try:
            entry = served_tool(tool, self.workbench.config.tool_names, self.names)
        except Exception as error:  # whatever is wrong with the record, the listing goes on
            self.left_out[tool.tool_id] = str(error)
            log.error("equipped tool %s (%s) left out of tools/list: %s", tool.name, tool.tool_id, error)
            return None
        self.left_out.pop(tool.tool_id, None)
        return entry


def listing_checks(workbench: Equipped, names: MetaNames | None = None) -> list[dict[str, Any]]:
    """`awb doctor`'s checks of what MCP clients are shown: equipped tools that cannot be listed (why,
    worded in `names`), and tool names some hosts refuse."""
    listing = EquippedListing(workbench, names)
    listing.tools()
    broken = [f"{tool_id}: {why}" for tool_id, why in listing.left_out.items()]
    checks: list[dict[str, Any]] = [
        {
            "check": "equipped tools",
            "ok": not broken,
            "detail": "; ".join(broken) if broken else "every equipped tool can be listed",
        }
    ]
    warning = tool_names_warning(workbench.config)
    checks.append(
        {
            "check": "tool names",
            "ok": True,
            "detail": f"warning: {warning}" if warning else "underscore names (awb_craft) accepted by every host",
            **({"level": "warning"} if warning else {}),
        }
    )
    return checks


def tool_names_warning(config: Config) -> str | None:
    """The warning `tool_names: "dotted"` deserves, or None."""
    if config.tool_names != "dotted":
        return None
    return (
        f'tool_names is "dotted" (awb.craft): {HOSTS_REFUSING_DOTS} refuse names outside '
        '^[a-zA-Z0-9_-]{1,64}$; use the default "underscore" unless every client accepts dots'
    )
