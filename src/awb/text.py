"""Caps on text and JSON-like values that leave the server: messages, details, logs.

Anything a tool or an agent sent can come back in an error; these keep what comes back small.
"""

from __future__ import annotations

from typing import Any

#: An error message's length on the wire (its details are capped by `bounded`).
MAX_MESSAGE_CHARS = 4000
MAX_DETAIL_STRING_CHARS = 2000
MAX_DETAIL_ITEMS = 50
MAX_DETAIL_DEPTH = 8


def cap_text(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def bounded(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like value with long strings cut, long lists and objects shortened and deep
    nesting replaced by a marker; values that are not JSON become their (capped) repr."""
    if isinstance(value, str):
        return cap_text(value, MAX_DETAIL_STRING_CHARS)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= MAX_DETAIL_DEPTH:
        return "[nested too deeply]"
    if isinstance(value, dict):
        items = list(value.items())
        out = {cap_text(str(k), 200): bounded(v, depth + 1) for k, v in items[:MAX_DETAIL_ITEMS]}
        if len(items) > MAX_DETAIL_ITEMS:
            out["…"] = f"{len(items) - MAX_DETAIL_ITEMS} more keys"
        return out
    if isinstance(value, (list, tuple)):
        shown = [bounded(v, depth + 1) for v in value[:MAX_DETAIL_ITEMS]]
        if len(value) > MAX_DETAIL_ITEMS:
            shown.append(f"… {len(value) - MAX_DETAIL_ITEMS} more items")
        return shown
    return cap_text(repr(value), MAX_DETAIL_STRING_CHARS)


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply a JSON-like value nests, counted up to `limit + 1` (without recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest
