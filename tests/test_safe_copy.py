"""A safe copy of what an agent or a tool sent: bounded in depth and values, safe on values that hold
themselves, and JSON whatever the value."""

from __future__ import annotations

import json
from typing import Any

from awb.safe_copy import CYCLE, DEEP, CopyRules, safe_copy, safe_dumps


def nested(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def shared(levels: int) -> list[Any]:
    """A list holding the same list twice, `levels` times down: 2**levels leaves to a plain walk."""
    value: list[Any] = ["leaf"]
    for _ in range(levels):
        value = [value, value]
    return value


def count(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(count(v) for v in value)
    return 1


def test_a_value_nested_past_the_depth_ends_in_a_marker_not_a_recursion_error() -> None:
    copy = safe_copy(nested(100_000), CopyRules(max_depth=10))
    for _ in range(10):
        copy = copy["a"]
    assert copy == DEEP.format(limit=10)


def test_a_value_that_holds_itself_is_cut_where_it_comes_round_again() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    record: dict[str, Any] = {"name": "n"}
    record["self"] = record
    assert safe_copy(loop) == [1, CYCLE]
    assert safe_copy(record) == {"name": "n", "self": CYCLE}
    twice = [record, record]  # the same value twice, side by side, is no loop
    assert safe_copy(twice) == [{"name": "n", "self": CYCLE}] * 2


def test_a_value_sharing_its_parts_costs_at_most_the_budget_of_values() -> None:
    copy = safe_copy(shared(60), CopyRules(max_values=1000))
    assert count(copy) <= 1100
    assert "more items]" in json.dumps(copy)


def test_rules_mask_values_by_key_and_rewrite_strings() -> None:
    rules = CopyRules(text=str.upper, masked=lambda key, value: key == "token", mask="***")
    assert safe_copy({"token": "t", "name": ("ada", {"token": 1})}, rules) == {
        "token": "***",
        "name": ["ADA", {"token": "***"}],
    }


def test_the_input_is_left_alone() -> None:
    value = {"a": [1, {"b": "c"}]}
    copy = safe_copy(value, CopyRules(text=str.upper))
    assert value == {"a": [1, {"b": "c"}]} and copy == {"a": [1, {"b": "C"}]}


def test_safe_dumps_writes_what_json_dumps_cannot() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert json.loads(safe_dumps(loop)) == [CYCLE]
    assert safe_dumps(nested(100_000)).count('{"a":') == 64
    assert json.loads(safe_dumps({1: "a", "b": 2}, sort_keys=True)) == {"1": "a", "b": 2}
    assert safe_dumps({"b": 1, "a": 2}, sort_keys=True) == '{"a": 2, "b": 1}'


def test_a_text_budget_cuts_strings_keys_and_containers_and_others_become_text() -> None:
    class Loud:
        def __str__(self) -> str:
            return "L" * 10_000

    rules = CopyRules(max_chars=100, other=str)
    assert safe_copy("x" * 1000, rules) == "x" * 100 + "…[cut: 900 more characters]"
    copy = safe_copy({"k" * 500: 1, "b": list(range(1000))}, rules)
    assert list(copy) == ["k" * 98 + "…[cut: 402 more characters]", "…"]  # the object's braces cost 2
    assert safe_copy([Loud()], rules)[0].endswith("…[cut: 9902 more characters]")
    numbers = safe_copy(list(range(1000)), rules)
    assert numbers[:-1] == list(range(13)) and numbers[-1] == "[cut: 987 more items]"
