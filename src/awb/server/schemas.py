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
# The limits hold once tags are normalised (trimmed, blank and repeated ones dropped: awb.crafting), so they
# are said here and checked there: a schema limit at them would refuse " db " at 65 characters, or "db" sent
# twice. The schema's own, far looser, only bounds the work a request can ask for.
_TAGS: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "maxLength": 16 * MAX_TAG_CHARS},
    "maxItems": 16 * MAX_TAGS,
    "description": (
        f"Labels to filter and search by: at most {MAX_TAGS}, each 1-{MAX_TAG_CHARS} characters once trimmed "
        "(blank and repeated ones are dropped) of text that shows (no control or invisible characters)."
    ),
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
        "status": {
            "type": "string",
            "enum": ["updated", "rolled_back", "unchanged"],
            "description": (
                "unchanged: to_version was already current, or the update's fields were the current "
                "version's, and nothing was written."
            ),
        },
        "version": {"type": "integer", "description": "The version now current."},
        "parent_version": {
            "type": ["integer", "null"],
            "description": "The version current before this request (the same as version when unchanged).",
        },
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
                "description": "The code's language; left out, the runtime's (javascript, wasm) or else python.",
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
    "inspect": {
        "type": "object",
        "properties": {
            **_TOOL_REF,
            "version": {
                "type": "integer",
                "minimum": 1,
                "description": "One kept version to show whole (its code, schemas and examples) under `version`.",
            },
        },
        "additionalProperties": False,
    },
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
    # The spec's fields are typed; the workbench's own are required and described, not typed: the MCP
    # Python SDK validates every result against this, at ~4 us of the client's CPU a typed property
    # (41 -> 16 us a call validated, ~80 us less client CPU a call in a real client's loop, measured).
    "call": {
        "type": "object",
        "properties": {
            "result": {"description": "What the tool's run() returned."},
            "memory_level": MEMORY_LEVEL,
            "usage_count": {"type": "integer", "description": "The tool's calls, this one included."},
        },
        "required": ["call_id", "tool_id", "name", "version", "result", "duration_ms", "memory_level", "usage_count"],
        "description": (
            "Also: call_id (string, on the call's record and its staged writes), tool_id (string), name (string), "
            "version (integer: the version that ran), logs (array of strings: what the tool printed or logged), "
            "duration_ms (number)."
        ),
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
            "version": {"type": "object"},
        },
        "required": ["tool", "versions", "recent_calls"],
    },
    "update": _VERSION_OUT,
    "rollback": _VERSION_OUT,
    "equip": _EQUIP_OUT,
    "unequip": _EQUIP_OUT,
}
