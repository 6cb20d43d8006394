"""Caps on text and JSON-like values that leave the server: messages, details, logs.

Anything a tool or an agent sent can come back in an error; these keep what comes back small.
"""

from __future__ import annotations

import math
import re
from itertools import chain
from typing import Any

#: An error message's length on the wire (its details are capped by `bounded`).
MAX_MESSAGE_CHARS = 4000
MAX_DETAIL_STRING_CHARS = 2000
MAX_DETAIL_ITEMS = 50
MAX_DETAIL_DEPTH = 8
#: How deeply a tool's result may nest; deeper ones fail with `output_exceeded` (the wire encoders recurse).
MAX_RESULT_DEPTH = 64
#: How many values (containers, keys and scalars) a tool's result may hold; more fail with
#: `output_exceeded`. What the server does with a result (checks, the faces' encoders, the MCP SDK's
#: serialisation) costs microseconds per value on the event loop: 1 MB of `[[], [], ...]` or of small
#: ints is ~500,000 values, which held every other client up for seconds.
MAX_RESULT_VALUES = 100_000
#: Text in an error's details, all strings together.
MAX_DETAIL_CHARS = 16_000


def cap_text(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def bounded(value: Any) -> Any:
    """A copy of a JSON-like value small enough for the wire: strings cut to MAX_DETAIL_STRING_CHARS,
    lists and objects to MAX_DETAIL_ITEMS, nesting to MAX_DETAIL_DEPTH, and MAX_DETAIL_CHARS of text
    in all (what is past the budget becomes a marker); values that are not JSON become their repr."""
    return _Bounder(MAX_DETAIL_CHARS).copy(value, 0)


class _Bounder:
    def __init__(self, budget: int) -> None:
        self.left = budget

    def text(self, text: str) -> str:
        limit = max(0, min(MAX_DETAIL_STRING_CHARS, self.left))
        out = cap_text(text, limit) if len(text) > limit else text
        self.left -= min(len(text), limit) + 8
        return out

    def copy(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, (bool, int, float)):
            self.left -= 8
            return value
        if depth >= MAX_DETAIL_DEPTH or self.left <= 0:
            return "[cut]"
        if isinstance(value, dict):
            items = list(value.items())
            out: dict[str, Any] = {}
            for key, item in items[:MAX_DETAIL_ITEMS]:
                if self.left <= 0:
                    break
                out[self.text(str(key))] = self.copy(item, depth + 1)
            if len(out) < len(items):
                out["…"] = f"{len(items) - len(out)} more keys"
            return out
        if isinstance(value, (list, tuple)):
            shown: list[Any] = []
            for item in value[:MAX_DETAIL_ITEMS]:
                if self.left <= 0:
                    break
                shown.append(self.copy(item, depth + 1))
            if len(shown) < len(value):
                shown.append(f"… {len(value) - len(shown)} more items")
            return shown
        return self.text(repr(value)[: MAX_DETAIL_STRING_CHARS + 1])


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply a JSON-like value nests, counted up to `limit + 1` (without recursion).

    One level at a time, with the containers of each gathered by C-level list operations: a result
    of 100,000 containers is walked on the event loop, and a generator per container cost twice as much."""
    depth = 0
    level = [value]
    while True:
        containers = [node for node in level if isinstance(node, (dict, list))]
        if not containers:
            return depth
        depth += 1
        if depth > limit:
            return depth
        level = []
        for node in containers:
            level.extend(node.values() if isinstance(node, dict) else node)


#: How errors name what `unencodable_path` finds.
NOT_UNICODE = "text that is not valid Unicode (a lone surrogate, \\ud800-\\udfff)"
#: How errors name what `unencodable_path(..., numbers=True)` finds besides text.
NOT_A_JSON_NUMBER = "a number JSON cannot carry (NaN or Infinity, which a number past ±1.8e308 also becomes)"

#: A value's place: its key or index and its parent's place (None at the top).
_Link = tuple[str | int, Any] | None


def unencodable_path(value: Any, *, numbers: bool = False) -> list[str | int] | None:
    """Where a JSON-like value holds text no UTF-8 wire can carry (a lone surrogate, which `json.loads`
    accepts from a `\\ud800` escape), as the keys and indexes that lead to it; None when it holds none.
    A key is checked as well as a value. Without recursion; ASCII text costs no encoding. With `numbers`,
    a float that is not finite is found too: JSON has no such number, yet the decoders take the tokens
    `NaN` and `Infinity`, and read a number past the float range (`1e309`) as infinity.

    Run on every MCP call's arguments, on the event loop, so its cost is bounded by what the body limit
    lets in (4 MiB): a small value is walked node by node; a bigger one is first checked a level at a
    time with C-level list operations (~40 ms for 4 MB, where the walk took 0.8 s, eight times the
    parse), and only text found to be bad is then located, by a walk of at most `LOCATE_NODES` nodes.
    Past those the place is given as `UNLOCATED`."""
    try:
        return _walk(value, SMALL_NODES, numbers)
    except _TooBig:
        pass
    if _all_encodable(value, numbers):
        return None
    try:
        found = _walk(value, LOCATE_NODES, numbers)
    except _TooBig:
        found = None
    return list(UNLOCATED) if found is None else found


#: Nodes walked one by one before the level-wise check takes over (a call's usual arguments are fewer).
SMALL_NODES = 64
#: Nodes walked to locate bad text in a big value (~25 ms).
LOCATE_NODES = 20_000
#: The place reported for bad text in a value too big to locate it in.
UNLOCATED: tuple[str, ...] = ("…",)


class _TooBig(Exception):
    """A walk's budget of nodes ran out."""


_SEQUENCES = (list, tuple)


def _walk(value: Any, budget: int, numbers: bool) -> list[str | int] | None:
    """The path to the first bad text (None: there is none); `_TooBig` past `budget` nodes.

    Each value carries a link to its parent's (key, link), and the path is spelled out only for the text
    found: copying the path to every value cost time in depth times size."""
    stack: list[tuple[Any, _Link]] = [(value, None)]
    while stack:
        budget -= 1
        if budget < 0:
            raise _TooBig
        node, link = stack.pop()
        if isinstance(node, str):
            if not _encodes(node):
                return _spelled(link)
        elif isinstance(node, float):
            if numbers and not math.isfinite(node):
                return _spelled(link)
        elif isinstance(node, dict | list | tuple) and len(node) > budget:
            raise _TooBig  # before its children are stacked: that alone would cost time in its size
        elif isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and not _encodes(key):
                    return _spelled((key, link))
                stack.append((child, (key, link)))
        elif isinstance(node, list | tuple):
            stack.extend((child, (index, link)) for index, child in enumerate(node))
    return None


def _all_encodable(value: Any, numbers: bool) -> bool:
    """Whether every text in a value (keys included) encodes, and with `numbers` every float is finite, a
    level at a time: each level's texts are joined and checked at once, its containers' children
    gathered by C-level list operations.

    Types are matched exactly (`type(node) is str`, four times quicker than `isinstance` here): the
    values checked are what `json.loads` makes, never subclasses."""
    level = [value]
    while level:
        texts = [node for node in level if type(node) is str]
        if texts and not _encodes("".join(texts)):
            return False
        if numbers and not all(map(math.isfinite, [node for node in level if type(node) is float])):
            return False
        dicts = [node for node in level if type(node) is dict]
        sequences = [node for node in level if type(node) in _SEQUENCES]
        level = list(
            chain(
                chain.from_iterable(dicts),  # the keys
                chain.from_iterable(mapping.values() for mapping in dicts),
                chain.from_iterable(sequences),
            )
        )
    return True


#: A code point of the surrogate range in a `str`: always a lone one, as decoders join a valid pair into one.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a lone surrogate becomes: U+FFFD, as a UTF-8 decoder replaces bytes it cannot read.
REPLACEMENT_CHARACTER = "\ufffd"


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (`text` itself when it holds none)."""
    return text if _encodes(text) else _SURROGATE.sub(REPLACEMENT_CHARACTER, text)


def surrogates_replaced(value: Any) -> Any:
    """A JSON-like value received from elsewhere (a model provider, a web service), with each lone
    surrogate in its text, keys included, replaced by U+FFFD; `value` itself when it holds none.

    `json.loads` turns a `\\ud800` escape into one, and the text then fails wherever it meets UTF-8
    (SQLite, a response's encoder): a model's answer holding one ended its REST run in a 500 after the
    run had finished. Without recursion: the value can nest as deeply as the decoder allowed."""
    if unencodable_path(value) is None:
        return value
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            parent[key] = without_surrogates(node)
        elif isinstance(node, dict):
            copy = {without_surrogates(k) if isinstance(k, str) else k: v for k, v in node.items()}
            parent[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(node, list | tuple):
            items = list(node)
            parent[key] = items
            stack.extend((items, index) for index in range(len(items)))
    return root[0]


def _spelled(link: _Link) -> list[str | int]:
    steps: list[str | int] = []
    while link is not None:
        step, link = link
        steps.append(step)
    return steps[::-1]


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its first), or its type's name when it says nothing."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def os_reason(error: OSError) -> str:
    """The system's reason with the file it concerns, as a person reads it (not "[Errno 17] ..."); a
    folder that could not be made because a file has its name is said so ("File exists" names neither)."""
    if error.filename is None:
        return error.strerror or str(error)
    if isinstance(error, FileExistsError):
        return f"{error.filename} is a file, not a folder"
    return f"{error.strerror or error}: {error.filename}"
