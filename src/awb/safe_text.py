"""Text written by tools, shown to a person without letting it spoof what they see.

One-line text (names, paths, descriptions, messages) has its control characters, ANSI escapes,
bidirectional overrides, lone surrogates, odd spaces and other invisible code points (`awb.invisible`)
shown as `\\xNN` / `\\uNNNN` escapes (a backslash as `\\\\`), the same in the terminal and in the web
panel, so what a person reads is what would be written. Code and staged contents keep their backslashes:
`awb.safe_code` marks the same characters there.
"""

from __future__ import annotations

import json
from typing import Any

from awb.invisible import HIDDEN_CATEGORIES, hidden_indexes, is_hidden

__all__ = ["HIDDEN_CATEGORIES", "is_hidden", "visible", "visible_json"]

#: Characters kept as they are in multi-line content.
_LAYOUT = {"\n", "\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, *, multiline: bool = False) -> str:
    """`text` with every hidden character (`awb.invisible`: controls, format characters such as bidi
    overrides, odd spaces, fillers, surrogates, unassigned code points, ...) escaped and each backslash
    doubled; emoji sequences are shown as written; `multiline` keeps newlines and tabs."""
    out = []
    start = 0
    for index in hidden_indexes(text):
        char = text[index]
        if multiline and char in _LAYOUT:
            continue
        out.append(text[start:index].replace("\\", "\\\\"))
        out.append(_escape(char))
        start = index + 1
    out.append(text[start:].replace("\\", "\\\\"))
    return "".join(out)


class Verbatim(str):
    """Text the server wrote itself (a traceback's frames), logged as it is: `awb.cli.logs` escapes every
    other argument of a log line, since requests and tools choose what those say."""


def visible_json(value: Any) -> str:
    """`value` as JSON with every letter as written (French, Chinese, emoji) and each hidden character as
    its JSON escape (`\\u202e`), so the text is still JSON and reads as what it holds."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    out = []
    start = 0
    for index in hidden_indexes(text):
        out.append(text[start:index])
        # What `ensure_ascii` writes: a code point past the BMP as its surrogate pair.
        out.append(json.dumps(text[index])[1:-1] if ord(text[index]) > 0xFFFF else f"\\u{ord(text[index]):04x}")
        start = index + 1
    out.append(text[start:])
    return "".join(out)
