"""One walk of a tool's result both bounds its size and counts its depth: the answers are those of the
walks it replaced (the size bound, then `nesting_depth` on the call path), for any value, over-deep,
over-size and over-many ones included: same text, same errors, same details."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import awb.sandbox.base as base
from awb.errors import AwbError, InvalidOutput, OutputExceeded
from awb.sandbox.base import Execution, encode_result, nests_too_deep
from awb.text import MAX_RESULT_DEPTH, nesting_depth


def reference_surely_over(value: Any, cap: int, max_values: int) -> tuple[int | None, int]:
    """`_surely_over` as it was before it counted the depth (a copy of it)."""
    total = values = 0
    stack = [value]
    while stack:
        item = stack.pop()
        values += 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 2 + 3 * len(item) + max(len(item) - 1, 0)
            values += len(item)
            if total > cap or values > max_values:
                return (total if total > cap else None), values
            for key, entry in item.items():
                total += len(key) if isinstance(key, str) else 1
                stack.append(entry)
        elif isinstance(item, list | tuple):
            total += 2 + max(len(item) - 1, 0)
            if total > cap or values + len(item) > max_values:
                return (total if total > cap else None), values + len(item)
            stack.extend(item)
        else:
            total += 1
        if total > cap or values > max_values:
            return (total if total > cap else None), values
    return None, values


def reference_encode(value: Any, cap: int, max_values: int) -> str:
    """`encode_output` as it was (a copy of it)."""
    at_least, values = reference_surely_over(value, cap, max_values)
    if at_least is not None:
        raise OutputExceeded(
            f"tool output is at least {at_least} bytes, over the {cap}-byte cap", at_least=at_least, limit=cap
        )
    if values > max_values:
        raise OutputExceeded(
            f"tool output holds more than {max_values} values; return fewer, or fewer and larger ones",
            reason="values",
            limit_values=max_values,
        )
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        raise OutputExceeded("tool output nests too deeply to encode", reason="depth") from None
    except (TypeError, ValueError) as exc:
        raise InvalidOutput(
            f"the tool returned a value that is not JSON-serialisable: {exc}", type=type(value).__name__
        ) from exc
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidOutput("the tool returned text that is not valid Unicode (a lone surrogate)") from None
    if size > cap:
        raise OutputExceeded(f"tool output is {size} bytes, over the {cap}-byte cap", size=size, limit=cap)
    return text


def answer(run: Any) -> tuple[Any, ...]:
    """What a run gives a caller: its value, or its error's type, code, message and details."""
    try:
        return ("ok", run())
    except AwbError as error:
        return ("error", type(error).__name__, error.code, error.message, error.details)


def before(value: Any, cap: int, max_values: int) -> tuple[Any, ...]:
    """The encoded text, then the call path's depth check, as two walks did them."""
    return answer(lambda: (reference_encode(value, cap, max_values), nesting_depth(value, MAX_RESULT_DEPTH)))


def now(value: Any, cap: int) -> tuple[Any, ...]:
    def run() -> tuple[str, int]:
        text, depth = encode_result(value, cap)
        deep = nests_too_deep(Execution(value=value, value_json=text, depth=depth))
        return text, MAX_RESULT_DEPTH + 1 if deep else min(nesting_depth(value, MAX_RESULT_DEPTH), MAX_RESULT_DEPTH)

    return answer(run)


def nested(value: Any, levels: int, kind: str) -> Any:
    for level in range(levels):
        value = {"k": value} if kind == "dict" else [value] if kind == "list" or level % 2 else {"k": value}
    return value


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included: not JSON
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "é" * 30, '"\\\n']),  # lone surrogates: not UTF-8
    st.frozensets(st.integers(), max_size=2),  # not JSON at all
)
keys = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans(), st.tuples(st.integers()))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=60,
)
deep_values = st.builds(
    nested,
    st.one_of(st.integers(), st.text(max_size=5), values),
    st.one_of(st.integers(MAX_RESULT_DEPTH - 3, MAX_RESULT_DEPTH + 3), st.just(5000)),
    st.sampled_from(["list", "dict", "both"]),
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, int, int]:
    """A value, a cap (some just under or over its encoded size, where only the encoding tells) and a
    limit of values (some low enough to be passed)."""
    value = draw(st.one_of(values, deep_values))
    try:
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        size = 100
    cap = draw(st.one_of(st.integers(0, 400), st.integers(max(0, size - 8), size + 2), st.just(1 << 20)))
    return value, cap, draw(st.sampled_from([15, base.MAX_RESULT_VALUES, base.MAX_RESULT_VALUES]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_one_walk_gives_the_answers_of_the_walks_it_replaced(case: tuple[Any, int, int]) -> None:
    value, cap, max_values = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "MAX_RESULT_VALUES", max_values)
        assert now(value, cap) == before(value, cap, max_values)
        assert base._surely_over(value, cap)[:2] == reference_surely_over(value, cap, max_values)


@pytest.mark.parametrize("levels", [MAX_RESULT_DEPTH, MAX_RESULT_DEPTH + 1])
def test_the_counted_depth_is_the_one_the_call_path_refuses_past_the_limit(levels: int) -> None:
    for kind in ("list", "dict", "both"):
        value = nested(1, levels, kind)
        encoded = encode_result(value, 1 << 20)
        assert encoded.depth == levels == nesting_depth(value, 10_000)
        assert nests_too_deep(Execution(value=value, depth=encoded.depth)) == (levels > MAX_RESULT_DEPTH)


def test_a_result_holding_a_tuple_leaves_its_depth_to_the_call_path() -> None:
    # `nesting_depth` does not count tuples (Monty may return one): the depth is counted there, as before.
    value = (nested(1, MAX_RESULT_DEPTH + 1, "list"),)
    encoded = encode_result(value, 1 << 20)
    assert encoded.depth is None
    assert nests_too_deep(Execution(value=value, depth=None)) is False  # as nesting_depth says of it


def test_a_result_is_encoded_without_building_an_encoder_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # json.dumps with options builds a JSONEncoder every time; the call path keeps one.
    def dumps(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("json.dumps was called")

    monkeypatch.setattr(json, "dumps", dumps)
    assert encode_result({"x": "é", "n": [1, 2.5, None, True]}, 1 << 20).text == '{"x":"é","n":[1,2.5,null,true]}'
    with pytest.raises(InvalidOutput):
        encode_result({"x": float("nan")}, 1 << 20)
