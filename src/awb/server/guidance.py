"""What the MCP face tells agents in words: the server's instructions, the meta-tools' descriptions
and result hints, each naming meta-tools as this server serves them (`awb_call` or `awb.call`).
"""

from __future__ import annotations

from functools import partial

from awb.meta_tools import MetaVerb, ToolNames, meta_tool_name


def instructions(tool_names: ToolNames) -> str:
    """The `instructions` of the MCP initialize result."""
    name = partial(meta_tool_name, tool_names=tool_names)
    return (
        f"Agent Workbench is a crafting table for tools. Search ({name('search')}) before you craft; craft "
        f"({name('craft')}) a tool when none fits, with examples; call it with {name('call')}; inspect "
        f"({name('inspect')}) or delete ({name('delete')}) it when it misbehaves. Equip ({name('equip')}) the "
        "few tools you use often: they then appear as tools of their own. Evolve a tool with "
        f"{name('update')}; roll back with {name('rollback')}."
    )


def descriptions(tool_names: ToolNames) -> dict[MetaVerb, str]:
    """Each meta-tool's description in `tools/list`."""
    name = partial(meta_tool_name, tool_names=tool_names)
    return {
        "craft": (
            "Create a new tool: `name` and Python `code` defining `def run(params: dict)` that returns a "
            "JSON-serialisable value; optional description (default: the first line of the code's docstring), "
            "input_schema, output_schema, examples ({params, expected}) that must pass before the tool is "
            "stored, and metadata {tags, problem, created_by_agent} (or those fields flat). The code runs in a "
            "sandbox with no filesystem or network. Returns tool_id, status, memory_level and `similar`: "
            "existing tools close to it (reuse them rather than crafting twice)."
        ),
        "call": "Run a crafted tool by tool_id or name with `params` (validated against its input_schema).",
        "list": (
            f"List tools in the inventory, hot ones first; filter by memory_level, tag or query (ranked as "
            f"{name('search')} ranks; in hybrid mode only tools scoring 0.5 or more). `total` counts every match; "
            "pass `next_offset` back as `offset` for the next page."
        ),
        "search": (
            "Find tools by what they do (full-text over name, description, problem and tags, and by meaning when "
            "`mode` is hybrid); `top_k` (or `limit`) results, best first. Search before crafting. In hybrid mode "
            "`score` is absolute, 0 to 1: under 0.5 the tool probably does not do what the query asks (if the "
            "best is, none fits: craft one); 0.9 and up is a close match. In text mode the best match scores 1."
        ),
        "delete": "Delete a tool (soft delete: it can no longer be called, but its record stays inspectable).",
        "inspect": (
            "Show a tool's full record: code, schemas, examples, version history with per-version usage and "
            "failure counts, usage counters and recent calls. The history lists each version without its code, "
            "schemas and examples; give `version` to see one of them whole."
        ),
        "update": (
            "Evolve a tool: give new code, description, input_schema, output_schema and/or examples; a new "
            "immutable version is stored only if its examples pass (the old ones stay inspectable). With "
            "`to_version`, make an earlier version current instead (rollback)."
        ),
        "rollback": f"Make an earlier version of a tool current again (see {name('inspect')} for its versions).",
        "equip": (
            "Equip a tool: it then appears in tools/list as its own tool, callable directly by name with its own "
            "parameters. The equipped set is shared and capped (max_equipped); clients are notified of changes."
        ),
        "unequip": (f"Unequip a tool: it leaves tools/list but stays in the inventory ({name('call')} still works)."),
    }


def list_changed_hint(tool_names: ToolNames) -> str:
    """The `hint` of an equip or unequip result, for a session that hears no list_changed notification."""
    return (
        "The tool list changed, but this session gets no list_changed notification: list tools again to see "
        f"it ({meta_tool_name('call', tool_names)} reaches any tool by name meanwhile)."
    )
