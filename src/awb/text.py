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

#: A value's place: its key or index and its parent's place (None at the top).
_Link = tuple[str | int, Any] | None


def unencodable_path(value: Any) -> list[str | int] | None:
    """Where a JSON-like value holds text no UTF-8 wire can carry (a lone surrogate, which `json.loads`
    accepts from a `\\ud800` escape), as the keys and indexes that lead to it; None when it holds none.
    A key is checked as well as a value. Without recursion; ASCII text costs no encoding.

    Each value carries a link to its parent's (key, link), and the path is spelled out only for the text
    found: copying the path to every value cost time in depth times size (2.8 s of the event loop for a
    690 KB request nested 900 deep)."""
    stack: list[tuple[Any, _Link]] = [(value, None)]
    while stack:
        node, link = stack.pop()
        if isinstance(node, str):
            if not _encodes(node):
                return _spelled(link)
        elif isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and not _encodes(key):
                    return _spelled((key, link))
                stack.append((child, (key, link)))
        elif isinstance(node, list | tuple):
            stack.extend((child, (index, link)) for index, child in enumerate(node))
    return None


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
