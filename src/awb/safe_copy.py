"""A copy of a JSON-like value an agent or a tool sent, made in bounded time and stack: nesting past a
depth, values past a count and values that contain themselves become markers, so redacting, logging
or measuring a payload never raises `RecursionError` or runs for ever (a list holding itself twice,
forty levels down, is 2**40 values to a plain walk).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEEP = "[cut: nested deeper than {limit} levels]"
CYCLE = "[cut: a value that contains itself]"
#: What stands for the entries of a container left out once the budget of values is spent.
MORE_ITEMS = "[cut: {count} more items, past the first {limit} values]"
MORE_KEYS = "…"
#: Keys a JSON encoder takes as they are; any other key becomes its `str`.
_JSON_KEYS = (str, int, float, bool, type(None))


def _same(text: str) -> str:
    return text


def _never(key: object, value: object) -> bool:
    return False


@dataclass(frozen=True)
class CopyRules:
    #: Containers deeper than this are cut (the top value is at depth 0).
    max_depth: int = 64
    #: Values visited in all (each container, key and scalar counts one); the rest is cut.
    max_values: int = 1_000_000
    #: Applied to every string value (not to keys).
    text: Callable[[str], str] = _same
    #: `(key, value) -> True` when the value under `key` is replaced by `mask` whole.
    masked: Callable[[object, object], bool] = _never
    mask: str = "[REDACTED]"


def safe_copy(value: Any, rules: CopyRules = CopyRules()) -> Any:
    """A copy of `value` (dicts, lists and tuples walked; tuples become lists; other values kept)
    within `rules`; the input is never changed."""
    return _Copier(rules).copy(value, 0)


class _Copier:
    def __init__(self, rules: CopyRules) -> None:
        self.rules = rules
        self.text, self.masked, self.mask = rules.text, rules.masked, rules.mask
        self.left = rules.max_values
        #: Ids of the containers being copied, from the top down to the current one.
        self.path: set[int] = set()

    def copy(self, value: Any, depth: int) -> Any:
        self.left -= 1
        if isinstance(value, str):
            return self.text(value)
        if not isinstance(value, dict | list | tuple):
            return value
        key = id(value)
        if key in self.path:
            return CYCLE
        if depth >= self.rules.max_depth:
            return DEEP.format(limit=self.rules.max_depth)
        self.path.add(key)
        try:
            return self.mapping(value, depth + 1) if isinstance(value, dict) else self.sequence(value, depth + 1)
        finally:
            self.path.discard(key)

    def mapping(self, value: dict[Any, Any], depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        copy, masked, mask = self.copy, self.masked, self.mask
        for key, item in value.items():
            if self.left <= 0:
                out[MORE_KEYS] = self.more(len(value) - len(out))
                break
            self.left -= 1
            name = key if isinstance(key, _JSON_KEYS) else str(key)
            out[name] = mask if masked(key, item) else copy(item, depth)
        return out

    def sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        out: list[Any] = []
        copy = self.copy
        for item in value:
            if self.left <= 0:
                out.append(self.more(len(value) - len(out)))
                break
            out.append(copy(item, depth))
        return out

    def more(self, count: int) -> str:
        return MORE_ITEMS.format(count=count, limit=self.rules.max_values)


def safe_dumps(value: Any, **options: Any) -> str:
    """`json.dumps(value, **options)`, or, for a value the encoder cannot take (nested past the stack,
    containing itself, keys `sort_keys` cannot order), the JSON of its `safe_copy` (unsorted)."""
    try:
        return json.dumps(value, **options)
    except (RecursionError, ValueError, TypeError):
        options.pop("sort_keys", None)
        return json.dumps(safe_copy(value), **options)
