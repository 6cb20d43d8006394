"""A copy of a JSON-like value an agent or a tool sent, made in bounded time and stack: nesting past a
depth, values past a count, text past a budget and values that contain themselves become markers, so
redacting, logging or measuring a payload never raises `RecursionError` or runs for ever (a list holding
itself twice, forty levels down, is 2**40 values to a plain walk).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from awb.credentials import MASK

DEEP = "[cut: nested deeper than {limit} levels]"
CYCLE = "[cut: a value that contains itself]"
#: What stands for the entries of a container left out once the budget (of values or of text) is spent.
MORE_ITEMS = "[cut: {count} more items]"
MORE_KEYS = "…"
#: Keys a JSON encoder takes as they are; any other key becomes its `str`.
_JSON_KEYS = (str, int, float, bool, type(None))
#: What a number, a boolean or null costs of a text budget (about its JSON, with its separator).
_SCALAR_CHARS = 8


def _same(text: str) -> str:
    return text


def _never(key: object, value: object) -> bool:
    return False


def _kept(value: Any) -> Any:
    return value


def cut_text(text: str, keep: int) -> str:
    """The first `keep` characters of `text` and how many more there were."""
    return f"{text[:keep]}…[cut: {len(text) - keep} more characters]"


@dataclass(frozen=True)
class CopyRules:
    #: Containers deeper than this are cut (the top value is at depth 0).
    max_depth: int = 64
    #: Values visited in all (each container, key and scalar counts one); the rest is cut.
    max_values: int = 1_000_000
    #: Characters of text in all (strings after `text`, keys, a few for each other value); None for no
    #: cap. A string past what is left is cut by `cut(text, keep)`.
    max_chars: int | None = None
    #: Applied to every string value (not to keys).
    text: Callable[[str], str] = _same
    cut: Callable[[str, int], str] = cut_text
    #: `(key, value) -> True` when the value under `key` is replaced by `mask` whole.
    masked: Callable[[object, object], bool] = _never
    mask: str = MASK
    #: What a value of no JSON type becomes (a string is then treated as any string).
    other: Callable[[Any], Any] = _kept


def safe_copy(value: Any, rules: CopyRules = CopyRules()) -> Any:
    """A copy of `value` (dicts, lists and tuples walked; tuples become lists; other values kept)
    within `rules`; the input is never changed."""
    return _Copier(rules).copy(value, 0)


class _Copier:
    def __init__(self, rules: CopyRules) -> None:
        self.rules = rules
        self.text, self.masked, self.mask = rules.text, rules.masked, rules.mask
        self.left = rules.max_values
        self.chars = sys.maxsize if rules.max_chars is None else rules.max_chars
        #: Ids of the containers being copied, from the top down to the current one.
        self.path: set[int] = set()

    def copy(self, value: Any, depth: int) -> Any:
        self.left -= 1
        if isinstance(value, str):
            return self.string(self.text(value))
        if value is None or isinstance(value, bool | int | float):
            self.chars -= _SCALAR_CHARS
            return value
        if not isinstance(value, dict | list | tuple):
            value = self.rules.other(value)
            return self.string(self.text(value)) if isinstance(value, str) else value
        key = id(value)
        if key in self.path:
            return CYCLE
        if depth >= self.rules.max_depth:
            return DEEP.format(limit=self.rules.max_depth)
        self.chars -= 2
        self.path.add(key)
        try:
            return self.mapping(value, depth + 1) if isinstance(value, dict) else self.sequence(value, depth + 1)
        finally:
            self.path.discard(key)

    def string(self, text: str) -> str:
        if len(text) <= self.chars:
            self.chars -= len(text)
            return text
        keep = max(self.chars, 0)
        self.chars = 0
        return self.rules.cut(text, keep)

    def spent(self) -> bool:
        return self.left <= 0 or self.chars <= 0

    def mapping(self, value: dict[Any, Any], depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        copy, masked, mask = self.copy, self.masked, self.mask
        for key, item in value.items():
            if self.spent():
                out[MORE_KEYS] = MORE_ITEMS.format(count=len(value) - len(out))
                break
            self.left -= 1
            name = key if isinstance(key, _JSON_KEYS) else str(key)
            if isinstance(name, str) and self.rules.max_chars is not None:
                name = self.string(name)
            out[name] = mask if masked(key, item) else copy(item, depth)
        return out

    def sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        out: list[Any] = []
        copy = self.copy
        for item in value:
            if self.spent():
                out.append(MORE_ITEMS.format(count=len(value) - len(out)))
                break
            out.append(copy(item, depth))
        return out


def safe_dumps(value: Any, **options: Any) -> str:
    """`json.dumps(value, **options)`, or, for a value the encoder cannot take (nested past the stack,
    containing itself, keys `sort_keys` cannot order), the JSON of its `safe_copy` (unsorted)."""
    try:
        return json.dumps(value, **options)
    except (RecursionError, ValueError, TypeError):
        options.pop("sort_keys", None)
        return json.dumps(safe_copy(value), **options)
