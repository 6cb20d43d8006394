"""Text from tools, shown in a terminal without letting it drive the terminal.

Staged paths and contents are written by tool code: console markup must not be interpreted, and
control characters, ANSI escapes, bidirectional overrides and lone surrogates are shown as escapes.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

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
    """`text` with every control, format (bidi), surrogate and unassigned code point escaped;
    `multiline` keeps newlines and tabs."""
    out = []
    for char in text:
        if multiline and char in _LAYOUT:
            out.append(char)
        elif char == "\\":
            out.append("\\\\")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def plain(text: str, *, multiline: bool = False, style: str = "") -> Text:
    """A rich `Text` that prints `text` literally (no markup), escaped as `visible` does."""
    return Text(visible(text, multiline=multiline), style=style)
