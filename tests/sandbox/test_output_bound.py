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


def value(rnd: random.Random, depth: int = 0) -> Any:
    roll = rnd.random()
    if depth > 4 or roll < 0.4:
        return rnd.choice([None, True, 0, -12345, 1.5, "", "é" * rnd.randint(0, 30), "x" * rnd.randint(0, 50), '\n"\\'])
    if roll < 0.7:
        return [value(rnd, depth + 1) for _ in range(rnd.randint(0, 6))]
    return {
        rnd.choice(["a", "bb", "é"]) + str(rnd.randint(0, 99)): value(rnd, depth + 1) for _ in range(rnd.randint(0, 6))
    }


def test_the_bound_never_refuses_a_result_that_fits_nor_overstates_one_that_does_not() -> None:
    rnd = random.Random(20261127)
    for _ in range(5000):
        result = value(rnd)
        size = len(json.dumps(result, ensure_ascii=False).encode())
        for cap in {0, 1, 5, max(size - 1, 0), size, size + 1}:
            if size <= cap:
                assert encode_output(result, cap) == json.dumps(result, ensure_ascii=False)
            else:
                with pytest.raises(OutputExceeded):
                    encode_output(result, cap)
            at_least = base._surely_over(result, cap)
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
