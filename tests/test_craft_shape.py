"""The spec's craft shape and ours give the same record; the description can come from the code."""

from __future__ import annotations

import pytest

from awb.craft_shape import craft_fields, description_from_code
from awb.errors import AdmissionFailed, InvalidParams
from awb.inventory.models import ToolMetadata
from awb.workbench import CraftRequest, Workbench
from support import add_tool

pytestmark = pytest.mark.anyio

METADATA = {"tags": ["math"], "problem": "adding by hand", "created_by_agent": "planner"}


async def test_the_library_accepts_the_spec_metadata_and_the_flat_fields_alike(workbench: Workbench) -> None:
    spec = {k: v for k, v in add_tool("spec_shape").items() if k != "tags"} | {"metadata": METADATA}
    flat = add_tool("flat_shape") | {"problem": "adding by hand", "created_by_agent": "planner"}
    first = await workbench.craft(spec)
    second = await workbench.craft(flat)
    assert first.metadata == second.metadata == ToolMetadata(**METADATA)


def test_a_craft_request_takes_a_metadata_model_too() -> None:
    request = CraftRequest(
        name="x", code="def run(params):\n    return 1\n", description="d", metadata=ToolMetadata(**METADATA)
    )  # type: ignore[call-arg]
    assert (request.tags, request.problem, request.created_by_agent) == (["math"], "adding by hand", "planner")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"metadata": {"tags": ["a"]}, "tags": ["b"]}, "metadata.tags and tags disagree"),
        ({"metadata": {"owner": "me"}}, "unknown: owner"),
        ({"metadata": ["tags"]}, "metadata must be an object"),
    ],
)
def test_conflicting_or_unknown_metadata_is_invalid_params(fields: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        craft_fields({"name": "x", "code": "c", "description": "d", **fields})


@pytest.mark.parametrize(
    ("code", "description"),
    [
        ('def run(params):\n    """Add two numbers.\n\n    More."""\n    return 1\n', "Add two numbers."),
        ('"""Module that adds.\n"""\ndef run(params):\n    return 1\n', "Module that adds."),
        ('def run(params):\n    """\n    Split on newlines.\n    """\n', "Split on newlines."),
        ("# Count the words\ndef run(params):\n    return 1\n", "Count the words"),
        ("#!/usr/bin/env python\n# Count the words\n", "Count the words"),
        ("// Reverse a string\nfunction run(params) { return 1 }\n", "Reverse a string"),
        ("/**\n * Reverse a string.\n */\nfunction run(params) {}\n", "Reverse a string."),
        ("import math\n\ndef run(params: dict) -> float:\n    '''Square root.'''\n", "Square root."),
        # A one-line docstring in single quotes is a docstring too.
        ("def run(p):\n    'Echo what it is given.'\n    return p\n", "Echo what it is given."),
        ('def run(p) -> dict:\n    "It\'s an echo."\n    return p\n', "It's an echo."),
        ("def run(p):\n    'it\\'s escaped'\n", "it's escaped"),
    ],
)
def test_the_description_defaults_to_the_first_line_of_the_docstring_or_leading_comment(
    code: str, description: str
) -> None:
    assert description_from_code(code) == description
    assert craft_fields({"name": "x", "code": code})["description"] == description


def test_code_without_docstring_or_comment_needs_a_description() -> None:
    with pytest.raises(InvalidParams, match="description is required"):
        craft_fields({"name": "x", "code": "def run(params):\n    return 1\n"})
    assert (
        craft_fields({"name": "x", "code": "def run(params):\n    return 1\n", "description": "given"})["description"]
        == "given"
    )


def test_a_description_taken_from_the_code_is_capped() -> None:
    assert len(description_from_code("# " + "word " * 1000)) == 1024


JS_ADD = "function run(params) {\n  return params.a + params.b;\n}\n"


async def test_javascript_runtime_alone_implies_the_language_in_either_shape(workbench: Workbench) -> None:
    spec = {k: v for k, v in add_tool("js_spec", code=JS_ADD).items() if k != "tags"} | {"metadata": METADATA}
    crafted = await workbench.craft(spec | {"runtime": "javascript"})
    assert (crafted.language, crafted.runtime) == ("javascript", "javascript")
    flat = await workbench.craft(add_tool("js_flat", code=JS_ADD, runtime="javascript"))
    assert (flat.language, flat.runtime) == ("javascript", "javascript")
    assert CraftRequest.model_validate(add_tool("w", runtime="wasm")).language == "wasm"
    with pytest.raises(InvalidParams, match="runs javascript, not python"):
        await workbench.craft(add_tool("js_python", code=JS_ADD, runtime="javascript", language="python"))


async def test_javascript_crafted_as_python_is_refused_with_a_hint_to_say_its_language(workbench: Workbench) -> None:
    with pytest.raises(AdmissionFailed) as refused:
        await workbench.craft(add_tool("js_as_python", code=JS_ADD))
    assert 'looks like JavaScript: craft it with language "javascript"' in refused.value.message
    with pytest.raises(AdmissionFailed) as broken:
        await workbench.craft(add_tool("broken_python", code="def run(params):\n    return (\n"))
    assert "JavaScript" not in broken.value.message
