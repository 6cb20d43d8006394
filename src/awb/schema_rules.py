"""What a tool's schemas must look like to be served over MCP and accepted by the model APIs.

Two steps, kept apart from JSON Schema validity (which `workbench` checks) so other checks can sit
beside them: *normalisation* at craft and update (a root without `type` but with `properties` is an
object; a root that is not an object schema is refused, saying what MCP requires), and *portability*
(the rules Anthropic's, OpenAI's and Gemini's tool APIs apply that can be checked structurally).
"""

from __future__ import annotations

import re
from typing import Any

from awb.errors import InvalidParams
from awb.meta_tools import ToolNames, meta_tool_name

#: Claude Desktop, the Anthropic and OpenAI APIs all require tool names of this form.
PORTABLE_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

#: Keywords the Anthropic, OpenAI, Bedrock and Azure APIs refuse at an input schema's root (Gemini drops them).
ROOT_COMBINATORS = ("anyOf", "oneOf", "allOf", "not")

MCP_INPUT_RULE = (
    'MCP requires a tool\'s input schema to be a JSON Schema object with type: "object" at its root '
    "(tool arguments are always a JSON object)"
)
COMBINATOR_RULE = (
    "the Anthropic, OpenAI, Bedrock and Azure tool APIs refuse anyOf/oneOf/allOf/not at the root of an "
    "input schema (Gemini drops them)"
)


def normalise_input_schema(schema: Any, field: str = "input_schema") -> dict[str, Any]:
    """The schema with `type: "object"` made explicit; `invalid_params` when its root is not an object."""
    if not isinstance(schema, dict):
        raise InvalidParams(f"{field} must be a JSON Schema object, not {schema!r}: {MCP_INPUT_RULE}", field=field)
    kind = schema.get("type")
    if kind is None:
        return {"type": "object", **schema}
    if kind != "object":
        raise InvalidParams(f"{field} has type {kind!r}: {MCP_INPUT_RULE}", field=field, type=kind)
    return schema


def normalise_output_schema(schema: Any) -> dict[str, Any] | None:
    """An output schema with `type: "object"` made explicit when it has `properties` and no type.

    Any other root (a string, an array...) is kept: the MCP face wraps such results as `{"result": ...}`."""
    if schema is None:
        return None
    if not isinstance(schema, dict):
        raise InvalidParams(
            f"output_schema must be a JSON Schema object, not {schema!r} ({{}} accepts any result)",
            field="output_schema",
        )
    if "type" not in schema and "properties" in schema:
        return {"type": "object", **schema}
    return schema


def normalise_schemas(fields: Any) -> Any:
    """The normalisation step of craft and update, on a request's fields: `type: object` made explicit,
    roots MCP cannot serve refused. Runs before the schemas are checked for validity and limits."""
    if not isinstance(fields, dict):
        return fields
    fields = dict(fields)
    if "input_schema" in fields:
        fields["input_schema"] = normalise_input_schema(fields["input_schema"])
    if fields.get("output_schema") is not None:
        fields["output_schema"] = normalise_output_schema(fields["output_schema"])
    return fields


def result_is_wrapped(output_schema: dict[str, Any] | None) -> bool:
    """Whether results are served as `{"result": ...}`: MCP's structuredContent and outputSchema are objects."""
    return output_schema is None or output_schema.get("type") != "object"


def served_output_schema(output_schema: dict[str, Any] | None) -> dict[str, Any]:
    """The outputSchema a tool is listed with: its own when it describes an object, else the wrapper's."""
    if not result_is_wrapped(output_schema):
        assert output_schema is not None
        return output_schema
    inner: dict[str, Any] = {} if output_schema is None else _moved_under(output_schema, "#/properties/result")
    return {"type": "object", "properties": {"result": inner}, "required": ["result"]}


#: Keywords whose values are data, not schemas: a "$ref" inside an `enum` is not a reference.
DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose values map names (of properties, definitions) to subschemas: any key there is a name.
NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def _moved_under(schema: Any, base: str, *, names: bool = False) -> Any:
    """`schema` as it reads once placed at JSON pointer `base` of a larger document: its local references
    (`#`, `#/$defs/...`) pointed at its own root, which is now the wrapper's (a client resolving
    `#/$defs/w` in the served schema found nothing and refused the tool)."""
    if isinstance(schema, list):
        return [_moved_under(item, base) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if names:
        return {name: _moved_under(subschema, base) for name, subschema in schema.items()}
    moved: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$ref", "$dynamicRef") and isinstance(value, str) and (value == "#" or value.startswith("#/")):
            moved[key] = base + value[1:]
        elif key in DATA_KEYWORDS:
            moved[key] = value
        else:
            moved[key] = _moved_under(value, base, names=key in NAME_MAPS)
    return moved


def structured_result(output_schema: dict[str, Any] | None, value: Any) -> dict[str, Any]:
    """The structuredContent of a result, matching `served_output_schema`."""
    if not result_is_wrapped(output_schema) and isinstance(value, dict):
        return value
    return {"result": value}


def equip_problems(input_schema: Any) -> list[str]:
    """Why a tool with this input schema cannot be a first-class MCP tool (empty when it can)."""
    if not isinstance(input_schema, dict) or input_schema.get("type", "object") != "object":
        return [MCP_INPUT_RULE]
    used = [k for k in ROOT_COMBINATORS if k in input_schema]
    if used:
        return [f"its input_schema uses {', '.join(used)} at the root: {COMBINATOR_RULE}"]
    return []


def portability_problems(input_schema: Any) -> list[str]:
    """The model-API rules this input schema breaks, of those that can be checked from its structure."""
    problems = equip_problems(input_schema)
    if problems:
        return problems
    properties = input_schema.get("properties", {})
    if not isinstance(properties, dict):
        return ["`properties` must be an object"]
    missing = [name for name in input_schema.get("required", []) if name not in properties]
    if missing:
        problems.append(f"required names {missing} are not declared in properties (Gemini refuses such schemas)")
    return problems


def craft_warnings(input_schema: dict[str, Any], tool_names: ToolNames) -> list[str]:
    """What an agent is told after crafting a tool whose schema the model APIs would refuse."""
    blocking = equip_problems(input_schema)
    if blocking:
        call = meta_tool_name("call", tool_names)
        return [f"{p}; this tool cannot be equipped as an MCP tool of its own, but {call} reaches it" for p in blocking]
    return portability_problems(input_schema)
