"""A tool's result is measured against the output cap before it is encoded: an oversized result costs
the server work bounded by the cap, not by the result."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

import awb.sandbox.base as base
from awb.errors import OutputExceeded
from awb.sandbox.base import encode_output
from awb.text import MAX_RESULT_VALUES


def value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 4 or roll < 0.4:
        return rnd.choice([None, True, 0, -12345, 1.5, "", "é" * rnd.randint(0, 30), "x" * rnd.randint(0, 50), '\n"\\'])
    if roll < 0.7:
        return [value(rnd, depth + 1) for _ in range(rnd.randint(0, 6))]
    return {
        rnd.choice(["a", "bb", "é"]) + str(rnd.randint(0, 99)): value(rnd, depth + 1) for _ in range(rnd.randint(0, 6))
    }


def compact(result: Any) -> str:
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def test_the_bound_never_refuses_a_result_that_fits_nor_overstates_one_that_does_not() -> None:
    rnd = random.Random(20261127)
    for _ in range(5000):
        result = value(rnd)
        size = len(compact(result).encode())
        for cap in {0, 1, 5, max(size - 1, 0), size, size + 1}:
            if size <= cap:
                assert encode_output(result, cap) == compact(result)
            else:
                with pytest.raises(OutputExceeded):
                    encode_output(result, cap)
            at_least = base._surely_over(result, cap)[0]
            assert at_least is None or cap < at_least <= size


@pytest.mark.parametrize(
    "make",
    [
        lambda: "x" * 50_000_000,
        lambda: list(range(5_000_000)),
        lambda: {str(i): i for i in range(1_000_000)},
        lambda: [["y" * 1000] * 1000] * 100,
    ],
    ids=["string", "list", "dict", "nested"],
)
def test_an_oversized_result_is_refused_without_encoding_it(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = make()

    def not_encoded(*_: Any, **__: Any) -> str:
        raise AssertionError("the oversized result was encoded")

    monkeypatch.setattr(base.json, "dumps", not_encoded)
    with pytest.raises(OutputExceeded, match="at least") as refused:
        encode_output(huge, 1024 * 1024)
    assert refused.value.details["limit"] == 1024 * 1024


@pytest.mark.parametrize(
    "make",
    [
        lambda: [0] * (MAX_RESULT_VALUES + 1),
        lambda: [[]] * (MAX_RESULT_VALUES + 1),
        lambda: {str(i): None for i in range(MAX_RESULT_VALUES // 2 + 1)},
        lambda: [[[[0] * 10] * 10] * 10] * (MAX_RESULT_VALUES // 1000),
    ],
    ids=["ints", "empty_lists", "dict", "shared_nested"],
)
def test_a_result_of_too_many_values_is_refused_under_the_byte_cap_without_encoding_it(
    make: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each value costs the server's checks and encoders (the MCP SDK's too) microseconds on the event
    # loop: under the 1 MB cap, `[[], [], ...]` held every other client up for seconds.
    many = make()
    assert len(json.dumps(many)) < 1024 * 1024

    def not_encoded(*_: Any, **__: Any) -> str:
        raise AssertionError("the result was encoded")

    monkeypatch.setattr(base.json, "dumps", not_encoded)
    with pytest.raises(OutputExceeded, match="values") as refused:
        encode_output(many, 1024 * 1024)
    assert refused.value.details == {"reason": "values", "limit_values": MAX_RESULT_VALUES}


def test_a_result_of_as_many_values_as_allowed_is_kept() -> None:
    rows = [{"id": i, "name": "n", "ok": True} for i in range(MAX_RESULT_VALUES // 7)]  # 7 values a row
    assert json.loads(encode_output(rows, 1024 * 1024)) == rows


def test_the_cap_counts_the_compact_json_that_goes_on_the_wire() -> None:
    """The result's text is what the faces send (MCP's text content, without encoding it again): the
    compact form, whose size is what the cap counts."""
    rows = [{"id": i, "tags": ["a", "b"]} for i in range(100)]
    wire = compact(rows)
    assert encode_output(rows, len(wire.encode())) == wire
    with pytest.raises(OutputExceeded):
        encode_output(rows, len(wire.encode()) - 1)
