"""Input and output JSON Schemas of the meta-tools, as the MCP face advertises them.

Every input schema is a plain object (type object, no anyOf/oneOf/allOf/not at the root, every
property typed and described) because the Anthropic, OpenAI, Bedrock and Azure tool APIs refuse root
combinators and Gemini drops them. "tool_id or name" is therefore a rule the server checks, not a
schema: both are optional, at least one must be given, and when both are given they must name the
same tool (`invalid_params` otherwise).
"""

from __future__ import annotations

from typing import Any

from awb.browse import MAX_LIMIT, MAX_OFFSET, MAX_QUERY_CHARS
from awb.crafting import MAX_TAG_CHARS, MAX_TAGS

_TOOL_REF: dict[str, Any] = {
    "tool_id": {
        "type": "string",
        "minLength": 1,
        "description": "The tool's id (from craft, list or search). Give tool_id or name.",
    },
    "name": {"type": "string", "minLength": 1, "description": "The tool's name. Give tool_id or name."},
}
MEMORY_LEVEL = {
    "type": "string",
    "enum": ["short_term", "medium_term", "long_term", "archived"],
    "description": "Memory tier: short_term, medium_term, long_term or archived.",
}
_INPUT_SCHEMA_FIELD = (
    "JSON Schema of run()'s params. MCP requires type: object at its root (added when left out); "
    "avoid anyOf/oneOf/allOf/not at the root, which model APIs refuse."
)
_OUTPUT_SCHEMA_FIELD = (
    'Optional JSON Schema of run()\'s result; results that are not objects are served as {"result": ...}.'
)
_TAGS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "maxLength": MAX_TAG_CHARS},
    "maxItems": MAX_TAGS,
    "description": "Labels to filter and search by.",
}
_PROBLEM: dict[str, Any] = {"type": "string", "description": "The problem this tool was made to solve."}
_AGENT: dict[str, Any] = {"type": "string", "description": "Who crafted the tool (an agent's name)."}

SUMMARY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_id": {"type": "string"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "score": {"type": ["number", "null"]},
        "memory_level": MEMORY_LEVEL,
        "usage_count": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "status": {"type": "string"},
        "equipped": {"type": "boolean"},
    },
    "required": ["tool_id", "name", "description", "memory_level", "usage_count"],
}

# What list and search return per tool. Only the keys are declared: every SDK client validates
# structuredContent against outputSchema on each call, and per-property schemas cost ~2 ms of client
# CPU per 50 results (measured), more than the whole server-side listing.
SUMMARY_ITEM: dict[str, Any] = {
    "type": "object",
    "required": SUMMARY["required"],
    "description": (
        "tool_id, name, description, score (search relevance or null), memory_level "
        "(short_term|medium_term|long_term|archived), usage_count, tags, status, equipped"
    ),
}

EXAMPLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "params": {"type": "object", "description": "Arguments the example passes to run()."},
        "expected": {"description": "The exact JSON result expected."},
        "expected_error": {"type": "string", "description": "Or: the error code expected (e.g. runtime_error)."},
    },
    "required": ["params"],
    "additionalProperties": False,
}

_VERSION_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_id": {"type": "string"},
        "name": {"type": "string"},
        "version": {"type": "integer", "description": "The version now current."},
        "parent_version": {"type": ["integer", "null"], "description": "The version current before."},
        "equipped": {"type": "boolean"},
    },
    "required": ["tool_id", "name", "version"],
}

_EQUIPPED_TOOLS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Names now equipped (listed by tools/list as tools of their own).",
}
_HINT: dict[str, Any] = {
    "type": "string",
    "description": "Present when this session cannot be notified that the tool list changed: re-list tools.",
}

_EQUIP_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool_id": {"type": "string"},
        "name": {"type": "string"},
        "equipped": {"type": "boolean"},
        "equipped_tools": _EQUIPPED_TOOLS,
        "hint": _HINT,
    },
    "required": ["tool_id", "name", "equipped", "equipped_tools"],
}

INPUT: dict[str, dict[str, Any]] = {
    "craft": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "Unique tool name."},
            "description": {
                "type": "string",
                "minLength": 1,
                "description": "What the tool does, for search. Default: the first line of the code's docstring "
                "or leading comment.",
            },
            "code": {
                "type": "string",
                "minLength": 1,
                "description": "Source defining `def run(params: dict)` that returns a JSON-serialisable value.",
            },
            "input_schema": {"type": "object", "description": _INPUT_SCHEMA_FIELD},
            "output_schema": {"type": "object", "description": _OUTPUT_SCHEMA_FIELD},
            "examples": {"type": "array", "items": EXAMPLE, "description": "Admission tests run before storing."},
            "language": {
                "type": "string",
                "enum": ["python", "javascript", "wasm"],
                "default": "python",
                "description": "The code's language.",
            },
            "runtime": {
                "type": "string",
                "enum": ["monty", "cpython", "javascript", "wasm"],
                "description": "Sandbox to run it in; chosen from the language when left out.",
            },
            "metadata": {
                "type": "object",
                "properties": {"tags": _TAGS, "problem": _PROBLEM, "created_by_agent": _AGENT},
                "additionalProperties": False,
                "description": "The spec's shape for tags, problem and created_by_agent (or give them flat).",
            },
            "tags": _TAGS,
            "problem": _PROBLEM,
            "created_by_agent": _AGENT,
        },
        "required": ["name", "code"],
        "additionalProperties": False,
    },
    "call": {
        "type": "object",
        "properties": {
            **_TOOL_REF,
            "params": {"type": "object", "description": "Arguments for the tool, as its input_schema describes."},
        },
        "additionalProperties": False,
    },
    "list": {
        "type": "object",
        "properties": {
            "memory_level": MEMORY_LEVEL,
            "tag": {"type": "string", "description": "Only tools with this tag."},
            "query": {
                "type": "string",
                "maxLength": MAX_QUERY_CHARS,
                "description": "Only tools matching this search.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": 20,
                "description": "Page size.",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_OFFSET,
                "default": 0,
                "description": "Skip this many matches (a previous page's next_offset).",
            },
        },
        "additionalProperties": False,
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "Words describing the tool you need.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "default": 10,
                "description": "At most this many.",
            },
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": "The spec's name for limit.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "delete": {"type": "object", "properties": _TOOL_REF, "additionalProperties": False},
    "inspect": {"type": "object", "properties": _TOOL_REF, "additionalProperties": False},
    "update": {
        "type": "object",
        "properties": {
            **_TOOL_REF,
            "code": {"type": "string", "minLength": 1, "description": "New source defining run(params)."},
            "description": {"type": "string", "minLength": 1, "description": "New description."},
            "input_schema": {"type": "object", "description": "New " + _INPUT_SCHEMA_FIELD},
            "output_schema": {"type": "object", "description": "New " + _OUTPUT_SCHEMA_FIELD},
            "examples": {
                "type": "array",
                "items": EXAMPLE,
                "description": "New admission tests; left out, the current examples must pass the new code.",
            },
            "to_version": {
                "type": "integer",
                "minimum": 1,
                "description": "Instead of a new version: make this earlier version current (a rollback).",
            },
        },
        "additionalProperties": False,
    },
    "rollback": {
        "type": "object",
        "properties": {
            **_TOOL_REF,
            "to_version": {"type": "integer", "minimum": 1, "description": "The version to make current."},
        },
        "required": ["to_version"],
        "additionalProperties": False,
    },
    "equip": {"type": "object", "properties": _TOOL_REF, "additionalProperties": False},
    "unequip": {"type": "object", "properties": _TOOL_REF, "additionalProperties": False},
}

OUTPUT: dict[str, dict[str, Any]] = {
    "craft": {
        "type": "object",
        "properties": {
            "tool_id": {"type": "string"},
            "status": {"const": "created"},
            "memory_level": MEMORY_LEVEL,
            "name": {"type": "string"},
            "description": {"type": "string", "description": "As given, or taken from the code."},
            "version": {"type": "integer"},
            "runtime": {"type": "string"},
            "similar": {"type": "array", "items": SUMMARY},
            "warnings": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Rules of model APIs the input_schema breaks (e.g. a root anyOf: not equippable).",
            },
            "equipped_tools": _EQUIPPED_TOOLS,
        },
        "required": ["tool_id", "status", "memory_level", "name", "version", "runtime", "equipped_tools"],
    },
    "call": {
        "type": "object",
        "properties": {
            "call_id": {"type": "string", "description": "Also on the call's record and its staged writes."},
            "tool_id": {"type": "string"},
            "name": {"type": "string"},
            "version": {"type": "integer"},
            "result": {"description": "What the tool's run() returned."},
            "logs": {"type": "array", "items": {"type": "string"}},
            "duration_ms": {"type": "number"},
            "memory_level": MEMORY_LEVEL,
            "usage_count": {"type": "integer"},
        },
        "required": ["call_id", "tool_id", "name", "version", "result", "duration_ms", "memory_level", "usage_count"],
    },
    "list": {
        "type": "object",
        "properties": {
            "tools": {"type": "array", "items": SUMMARY_ITEM},
            "count": {"type": "integer", "description": "Tools on this page."},
            "total": {"type": "integer", "description": "Every match, across pages."},
            "offset": {"type": "integer"},
            "next_offset": {"type": ["integer", "null"], "description": "The next page's offset; null on the last."},
        },
        "required": ["tools", "count", "total", "offset", "next_offset"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "mode": {"type": "string", "enum": ["text", "hybrid"]},
            "results": {"type": "array", "items": SUMMARY_ITEM},
        },
        "required": ["query", "mode", "results"],
    },
    "delete": {
        "type": "object",
        "properties": {"tool_id": {"type": "string"}, "name": {"type": "string"}, "status": {"const": "deleted"}},
        "required": ["tool_id", "name", "status"],
    },
    "inspect": {
        "type": "object",
        "properties": {
            "tool": {"type": "object"},
            "versions": {"type": "array", "items": {"type": "object"}},
            "recent_calls": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["tool", "versions", "recent_calls"],
    },
    "update": _VERSION_OUT,
    "rollback": _VERSION_OUT,
    "equip": _EQUIP_OUT,
    "unequip": _EQUIP_OUT,
}

DESCRIPTIONS: dict[str, str] = {
    "craft": (
        "Create a new tool: `name` and Python `code` defining `def run(params: dict)` that returns a "
        "JSON-serialisable value; optional description (default: the first line of the code's docstring), "
        "input_schema, output_schema, examples ({params, expected}) that must pass before the tool is stored, "
        "and metadata {tags, problem, created_by_agent} (or those fields flat). The code runs in a sandbox "
        "with no filesystem or network. Returns tool_id, status, memory_level and `similar`: existing tools "
        "close to it (reuse them rather than crafting twice)."
    ),
    "call": "Run a crafted tool by tool_id or name with `params` (validated against its input_schema).",
    "list": (
        "List tools in the inventory, hot ones first; filter by memory_level, tag or query (ranked as awb_search "
        "ranks; in hybrid mode only tools scoring 0.5 or more). `total` counts every match; pass `next_offset` "
        "back as `offset` for the next page."
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
        "failure counts, usage counters and recent calls."
    ),
    "update": (
        "Evolve a tool: give new code, description, input_schema, output_schema and/or examples; a new immutable "
        "version is stored only if its examples pass (the old ones stay inspectable). With `to_version`, make an "
        "earlier version current instead (rollback)."
    ),
    "rollback": "Make an earlier version of a tool current again (see awb_inspect for its versions).",
    "equip": (
        "Equip a tool: it then appears in tools/list as its own tool, callable directly by name with its own "
        "parameters. The equipped set is shared and capped (max_equipped); clients are notified of changes."
    ),
    "unequip": "Unequip a tool: it leaves tools/list but stays in the inventory (awb_call still works).",
}

META_TOOLS = tuple(INPUT)
