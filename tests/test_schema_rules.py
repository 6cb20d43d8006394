"""Normalisation (MCP's object root) and portability (the model APIs' structural rules) of tool schemas."""

from __future__ import annotations

from typing import Any

import pytest

from awb.errors import InvalidParams
from awb.schema_rules import (
    craft_warnings,
    equip_problems,
    normalise_input_schema,
    normalise_output_schema,
    served_output_schema,
    structured_result,
)

PROPS = {"properties": {"x": {"type": "integer"}}}


def test_an_input_schema_without_type_becomes_an_object() -> None:
    assert normalise_input_schema(PROPS) == {"type": "object", **PROPS}
    assert normalise_input_schema({}) == {"type": "object"}
    assert normalise_input_schema({"type": "object"}) == {"type": "object"}


@pytest.mark.parametrize("schema", [{"type": "string"}, {"type": "array"}, True, [], {"type": ["object", "null"]}])
def test_an_input_schema_root_that_is_not_an_object_is_refused(schema: Any) -> None:
    with pytest.raises(
        InvalidParams, match='MCP requires a tool\'s input schema to be a JSON Schema object with type: "object"'
    ):
        normalise_input_schema(schema)


def test_output_schemas_are_normalised_or_kept_for_wrapping() -> None:
    assert normalise_output_schema(PROPS) == {"type": "object", **PROPS}
    assert normalise_output_schema({"type": "string"}) == {"type": "string"}
    assert normalise_output_schema(None) is None
    with pytest.raises(InvalidParams, match="output_schema must be a JSON Schema object"):
        normalise_output_schema(True)


def test_non_object_results_are_wrapped_like_the_sdk_does() -> None:
    assert served_output_schema({"type": "string"}) == {
        "type": "object",
        "properties": {"result": {"type": "string"}},
        "required": ["result"],
    }
    assert served_output_schema(None)["properties"] == {"result": {}}
    point = {"type": "object", **PROPS}
    assert served_output_schema(point) is point
    assert structured_result(point, {"x": 1}) == {"x": 1}
    assert structured_result(None, {"x": 1}) == {"result": {"x": 1}}
    assert structured_result({"type": "array"}, [1]) == {"result": [1]}


@pytest.mark.parametrize("combinator", ["anyOf", "oneOf", "allOf", "not"])
def test_a_root_combinator_cannot_be_equipped_and_is_warned_at_craft(combinator: str) -> None:
    schema = {"type": "object", combinator: [{"required": ["x"]}] if combinator != "not" else {"required": ["x"]}}
    assert combinator in equip_problems(schema)[0]
    assert "awb_call" in craft_warnings(schema, "underscore")[0]
    assert "awb.call" in craft_warnings(schema, "dotted")[0]


def test_required_names_missing_from_properties_are_warned_for_gemini() -> None:
    schema = {"type": "object", "properties": {"x": {}}, "required": ["x", "y"]}
    assert equip_problems(schema) == []
    assert "Gemini" in craft_warnings(schema, "underscore")[0]
    assert craft_warnings({"type": "object", "properties": {"x": {}}, "required": ["x"]}, "underscore") == []
