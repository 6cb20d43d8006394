"""The quick check only ever says "surely valid" where jsonschema agrees, and says it for the usual
schemas and arguments (else the call path would pay for jsonschema after all)."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from awb.quick_check import quick_check
from awb.server.schemas import INPUT
from awb.validation import ToolSchema


def valid(schema: Any, instance: Any) -> bool:
    """What the server's full validator (jsonschema, RE2 patterns) says."""
    return not list(ToolSchema.compile(schema).validator.iter_errors(instance))


SCALARS: list[Any] = [None, True, False, 0, 1, -3, 2**70, 1.0, 2.5, -0.0, float("inf"), float("nan"), "", "a", "héllo"]


def random_instance(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.55:
        return rng.choice(SCALARS)
    if roll < 0.8:
        return {rng.choice("abcx"): random_instance(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [random_instance(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def random_schema(rng: random.Random, depth: int = 0) -> Any:
    if rng.random() < 0.08:
        return rng.choice([True, False])
    schema: dict[str, Any] = {}
    for _ in range(rng.randint(0, 4)):
        keyword = rng.choice(
            [
                "type", "type", "properties", "required", "additionalProperties", "enum", "const", "minimum",
                "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems",
                "minProperties", "maxProperties", "items", "description", "format", "multipleOf",
            ]
        )  # fmt: skip
        if keyword == "type":
            names = ["string", "integer", "number", "boolean", "null", "object", "array"]
            schema["type"] = rng.choice(names) if rng.random() < 0.7 else rng.sample(names, 2)
        elif keyword in ("properties",) and depth < 3:
            schema["properties"] = {name: random_schema(rng, depth + 1) for name in rng.sample("abcx", 2)}
        elif keyword == "required":
            schema["required"] = rng.sample("abcx", rng.randint(0, 2))
        elif keyword == "additionalProperties" and depth < 3:
            schema["additionalProperties"] = rng.choice([False, True, random_schema(rng, depth + 1)])
        elif keyword == "enum":
            schema["enum"] = rng.sample([*SCALARS[:10], [1], {"a": 1}], 3)
        elif keyword == "const":
            schema["const"] = rng.choice(SCALARS[:10])
        elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            schema[keyword] = rng.choice([0, 1, 2.5, -1, 3])
        elif keyword.startswith(("min", "max")):
            schema[keyword] = rng.randint(0, 3)
        elif keyword == "items" and depth < 3:
            schema["items"] = random_schema(rng, depth + 1)
        elif keyword == "format":
            schema["format"] = rng.choice(["email", "regex", "date"])
        elif keyword == "description":
            schema["description"] = "words"
    return schema


def test_surely_valid_is_never_wrong_on_thousands_of_random_schemas_and_instances() -> None:
    rng = random.Random(20261127)
    said_valid = checked = 0
    for _ in range(1500):
        schema = random_schema(rng)
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError:
            continue
        check = quick_check(schema)
        if check is None:
            continue
        for _ in range(20):
            instance = random_instance(rng)
            checked += 1
            if check(instance):
                said_valid += 1
                assert valid(schema, instance), (schema, instance)
    # It answers often enough to matter (most random instances fail most random schemas).
    assert checked > 10_000 and said_valid > checked // 10


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, 1.0),  # an integer to jsonschema, not for sure here
        ({"type": "integer"}, True),  # a bool is not an integer
        ({"enum": [1]}, True),
        ({"enum": [1]}, 1.0),
        ({"const": False}, 0),
        ({"minimum": 0}, float("nan")),
        ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}),
        ({"type": "object", "required": ["a"]}, {}),
        ({"items": {"type": "string"}}, ["a", 1]),
        ({"maxLength": 2}, "abc"),
    ],
)
def test_not_sure_is_said_where_exactness_would_need_jsonschema(schema: dict[str, Any], instance: Any) -> None:
    check = quick_check(schema)
    assert check is not None and check(instance) is False


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/a", "$defs": {"a": {}}},
        {"anyOf": [{"type": "string"}]},
        {"type": "string", "pattern": "^a"},
        {"format": "regex"},
        {"properties": {"a": {"multipleOf": 2}}},
        {"x-vendor": 1},
        {"items": False},
    ],
)
def test_a_schema_with_a_keyword_it_does_not_handle_gets_no_quick_check(schema: dict[str, Any]) -> None:
    assert quick_check(schema) is None


def test_the_meta_tools_and_a_typical_tool_schema_pass_their_usual_arguments_quickly() -> None:
    call = ToolSchema.compile(INPUT["call"], trusted=True)
    assert call.quick is not None and call.quick({"name": "add", "params": {"a": 1}})
    assert all(quick_check(schema) is not None for schema in INPUT.values() if "pattern" not in str(schema))
    typical = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "description": "what to read"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
            "mode": {"enum": ["fast", "exact"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    schema = ToolSchema.compile(typical)
    assert schema.quick is not None
    assert schema.quick({"text": "hello", "limit": 5, "mode": "exact", "tags": ["a"]})
    # The errors still come from the full validator.
    assert schema.problems({"text": "", "limit": 500}) == [
        {"path": "/limit", "message": "500 is greater than the maximum of 100"},
        {"path": "/text", "message": "'' should be non-empty"},
    ]
