"""Caps on values that leave the server: how deeply a value nests, counted without recursion."""

from __future__ import annotations

import random
from typing import Any

from awb.text import UNLOCATED, nesting_depth, surrogates_replaced, unencodable_path


def reference_depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


def random_value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 8 or roll < 0.3:
        return rnd.choice([0, "s", None, 1.5, True])
    if roll < 0.65:
        return [random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {str(i): random_value(rnd, depth + 1) for i in range(rnd.randint(0, 4))}


def test_nesting_depth_is_the_depth_counted_up_to_one_past_the_limit() -> None:
    rnd = random.Random(20261128)
    for _ in range(5000):
        value = random_value(rnd)
        for limit in (0, 1, 3, 64):
            assert nesting_depth(value, limit) == min(reference_depth(value), limit + 1), (value, limit)


def test_nesting_depth_stops_one_past_the_limit_of_a_chain_too_deep_to_recurse_on() -> None:
    chain: Any = 0
    for _ in range(100_000):
        chain = {"next": [chain]}
    assert nesting_depth(chain, 64) == 65


def test_unencodable_path_names_the_keys_and_indexes_down_to_the_bad_text() -> None:
    assert unencodable_path({"a": [1, {"b": ["ok", "x\ud800"]}]}) == ["a", 1, "b", 1]
    assert unencodable_path({"ok": 1, "a\udc00": 1}) == ["a\udc00"]  # a key is text too
    assert unencodable_path("\ud800") == []
    assert unencodable_path({"a": ["é", ("t", 2)], "b": None}) is None


def random_text_value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 6 or roll < 0.3:
        return rnd.choice([0, "s", "é", None, 1.5, "\ud800", "x\udfff", "😀"])
    if roll < 0.65:
        return [random_text_value(rnd, depth + 1) for _ in range(rnd.randint(0, 5))]
    return {
        rnd.choice(["k", "é", "\udc00"]) + str(i): random_text_value(rnd, depth + 1) for i in range(rnd.randint(0, 5))
    }


def test_unencodable_path_finds_bad_text_in_values_of_every_size_and_shape() -> None:
    """Values past the one-by-one walk are checked a level at a time; what is found is the same."""
    rnd = random.Random(20261129)
    for _ in range(3000):
        value = random_text_value(rnd)
        path = unencodable_path(value)
        clean = all(_encodes(text) for text in texts_of(value))
        assert (path is None) == clean, value
        if path is not None:
            assert not _encodes(at(value, path)), (value, path)


def test_bad_text_in_a_value_too_big_to_walk_is_found_and_left_unlocated() -> None:
    clean = {"rows": [[i, "é", {"k": "v"}] for i in range(30_000)]}
    assert unencodable_path(clean) is None
    late = {"rows": [*clean["rows"], {"note": "\ud800"}]}  # one list longer than the walk may go
    assert unencodable_path(late) == list(UNLOCATED)
    deep: Any = {"bad\udc00": 1}
    for _ in range(500):
        deep = {"next": [deep, list(range(40))]}
    assert unencodable_path(deep) == list(UNLOCATED)
    small_in_big = {"wide": list(range(100)), "here": ["ok", "\ud800"]}  # past the first walk, locatable
    assert unencodable_path(small_in_big) == ["here", 1]


def texts_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in texts_of(item))]
    if isinstance(value, list):
        return [text for item in value for text in texts_of(item)]
    return []


def at(value: Any, path: list[str | int]) -> Any:
    for step in path[:-1]:
        value = value[step]
    if not path:
        return value
    last = path[-1]
    return (
        last
        if isinstance(value, dict) and isinstance(last, str) and last in value and not _encodes(last)
        else value[last]
    )


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_surrogates_replaced_puts_u_fffd_in_keys_and_values_at_any_depth_and_keeps_clean_values() -> None:
    clean = {"a": [1, "é", {"b": None}]}
    assert surrogates_replaced(clean) is clean
    received = {"k\ud800": ["x\udfffy", {"z": "\ud83d"}], "ok": 1.5}
    assert surrogates_replaced(received) == {"k\ufffd": ["x\ufffdy", {"z": "\ufffd"}], "ok": 1.5}
    chain: Any = "\ud800"
    for _ in range(5000):  # deeper than recursion could walk
        chain = [chain]
    replaced = surrogates_replaced(chain)
    assert unencodable_path(replaced) is None and nesting_depth(replaced, 6000) == 5000


def test_unencodable_path_with_numbers_finds_a_float_that_is_not_finite() -> None:
    value = {"a": [1.5, {"b": float("nan")}], "c": 10**400}
    assert unencodable_path(value) is None
    assert unencodable_path(value, numbers=True) == ["a", 1, "b"]
    assert unencodable_path([float("-inf")], numbers=True) == [0]


def test_a_number_json_cannot_carry_is_found_in_a_value_too_big_to_walk() -> None:
    rows = [[i, 1.5, "é"] for i in range(30_000)]
    assert unencodable_path({"rows": rows}, numbers=True) is None
    assert unencodable_path({"rows": [*rows, float("nan")]}, numbers=True) == list(UNLOCATED)
    assert unencodable_path({"rows": [*rows, float("inf")]}) is None  # numbers are looked at only when asked
    assert unencodable_path({"wide": list(range(100)), "x": [0.5, float("-inf")]}, numbers=True) == ["x", 1]
