"""Blueprint rules beyond what the REST tests show: prompts, knowledge, arms, defaults, schemas."""

from __future__ import annotations

from typing import Any

import pytest

from awb.blueprints.errors import BlueprintInvalid
from awb.blueprints.schema import part_schemas, validate_blueprint


def _data(**parts: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "head": {"provider": "anthropic", "model": "claude-haiku-4-5"},
        "legs": {"mode": "single_agent"},
    }
    data.update(parts)
    return data


def _errors(data: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
    with pytest.raises(BlueprintInvalid) as caught:
        validate_blueprint(data, **kwargs)
    return {e["path"]: e for e in caught.value.details["errors"]}


def test_system_prompt_may_be_multi_line_up_to_ten_thousand_characters() -> None:
    prompt = "line one\nline two\n" + "x" * (10_000 - 18)
    assert validate_blueprint(_data(head={"provider": "openai", "model": "gpt-4o", "system_prompt": prompt}))
    errors = _errors(_data(head={"provider": "openai", "model": "gpt-4o", "system_prompt": prompt + "x"}))
    assert "at most 10000 characters" in errors["head.system_prompt"]["message"]


def test_knowledge_needs_a_configured_knowledge_base() -> None:
    heart = {"knowledge": {"enabled": True}}
    errors = _errors(_data(heart=heart))
    assert errors["heart.knowledge.knowledge_base"]["allowed"] == []
    assert "configured: (none)" in errors["heart.knowledge.knowledge_base"]["message"]
    ok = {"knowledge": {"enabled": True, "knowledge_base": "handbook"}}
    assert validate_blueprint(_data(heart=ok), knowledge_bases=("handbook",)).heart.knowledge.enabled


def test_arms_keep_their_order_and_each_is_checked_against_its_own_schema() -> None:
    arms = [
        {"type": "workbench"},
        {"type": "mcp", "name": "files", "url": "http://127.0.0.1:9/mcp"},
        {"type": "tavily_search"},
    ]
    assert [arm.type for arm in validate_blueprint(_data(arms=arms)).arms] == ["workbench", "mcp", "tavily_search"]
    errors = _errors(_data(arms=[{"type": "mcp", "name": "x"}, {"type": "tavily_search", "depth": 1}]))
    assert errors["arms[0]"]["message"].endswith("an mcp arm needs exactly one of url or command")
    assert errors["arms[1].depth"]["type"] == "extra_forbidden"
    errors = _errors(_data(arms=[{"type": "workbench", "tools": ["craft", "format_disk"]}]))
    assert "craft" in errors["arms[0].tools"]["allowed"]
    assert "each tool type" in _errors(_data(arms=[{"type": "tavily_search"}] * 2))["arms"]["message"]


def test_an_mcp_arms_command_given_as_one_string_says_it_is_a_list_of_words() -> None:
    """`command: "python server.py"` got `Input should be a valid list`, which says nothing of what a
    list of what; `awb agents run --server` takes one string, so the slip is easy to make."""
    errors = _errors(_data(arms=[{"type": "mcp", "name": "files", "command": "python server.py"}]))
    error = errors["arms[0].command"]
    assert error["type"] == "command_words", error
    assert error["message"] == (
        "command is a list of words, as a program's argv: ['python', 'server.py'], not one string"
    )
    words = validate_blueprint(_data(arms=[{"type": "mcp", "name": "files", "command": ["python", "server.py"]}]))
    assert words.arms[0].command == ["python", "server.py"]  # type: ignore[union-attr]


def test_absent_parts_get_safe_defaults_and_domains_are_normalized() -> None:
    blueprint = validate_blueprint(_data(spine={"allowed_domains": ["Docs.Python.org.", "docs.python.org"]}))
    assert blueprint.spine.allowed_domains == ["docs.python.org"]
    defaults = validate_blueprint(_data())
    assert (defaults.spine.max_tool_calls, defaults.spine.timeout_seconds) == (10, 60)
    assert defaults.heart.memory.enabled is False and defaults.arms == []


def test_not_an_object_is_an_error_at_the_root() -> None:
    assert _errors(["head"])["(root)"]["type"] == "model_type"


def test_json_schema_is_exported_for_the_whole_blueprint_and_each_part() -> None:
    schemas = part_schemas()
    assert set(schemas) == {"blueprint", "head", "arms", "legs", "heart", "spine"}
    assert schemas["spine"]["properties"]["max_tool_calls"] == {
        "default": 10,
        "maximum": 100,
        "minimum": 1,
        "title": "Max Tool Calls",
        "type": "integer",
    }
    assert schemas["head"]["properties"]["provider"]["enum"] == ["openai", "anthropic"]
    assert schemas["arms"]["items"]["discriminator"]["propertyName"] == "type"


def _unbounded(node: Any, defs: dict[str, Any], path: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """Paths in a JSON Schema where a list has no maxItems or a text no maxLength (nor a fixed set of values)."""
    if not isinstance(node, dict):
        return []
    ref = node.get("$ref", "")
    if ref:
        name = ref.rsplit("/", 1)[1]
        return [] if name in seen else _unbounded(defs[name], defs, path, seen | {name})
    found = []
    kind = node.get("type")
    if kind == "array" and "maxItems" not in node:
        found.append(path)
    if kind == "string" and "maxLength" not in node and "const" not in node:
        pattern = node.get("pattern", "")
        if "enum" not in node and (not pattern or "+" in pattern or "*" in pattern):
            found.append(path)
    for branch in node.get("anyOf", []) + node.get("oneOf", []):
        found += _unbounded(branch, defs, path, seen)
    for key, child in node.get("properties", {}).items():
        found += _unbounded(child, defs, f"{path}.{key}", seen)
    found += _unbounded(node.get("items"), defs, f"{path}[]", seen)
    return found


def test_every_list_and_text_in_a_blueprint_is_bounded() -> None:
    """A valid blueprint stays small: each saved one is read back by every listing and id lookup."""
    whole = part_schemas()["blueprint"]
    assert _unbounded(whole, whole["$defs"], "blueprint") == []
    arm = {"type": "mcp", "name": "docs", "url": "http://127.0.0.1:9/mcp", "tools": [f"t{i}" for i in range(201)]}
    assert "arms[0].tools" in _errors(_data(arms=[arm]))
    arm["tools"] = ["x" * 129]
    assert "arms[0].tools[0]" in _errors(_data(arms=[arm]))
