"""Text written by tools, shown to a person without letting it spoof what they see.

Control characters, ANSI escapes, bidirectional overrides, lone surrogates and other invisible code points
are shown as `\\xNN` / `\\uNNNN` escapes (a backslash as `\\\\`), the same in the terminal (`awb staged`)
and in the web panel, so what a person reads is what would be written.
"""

from __future__ import annotations

import unicodedata

#: Characters kept as they are in multi-line content.
_LAYOUT = {"\n", "\t"}
#: Unicode categories of characters that do not show as themselves: controls (C0 and C1, so an ANSI escape's
#: ESC), format characters (bidi overrides and isolates, zero-width ones), surrogates, private use, unassigned
#: code points, line and paragraph separators. `awb.safe_code` marks the same ones in code.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def is_hidden(char: str) -> bool:
    """Whether `char` would not be seen as itself, or would change how the text around it is seen."""
    return unicodedata.category(char) in HIDDEN_CATEGORIES


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
        elif is_hidden(char):
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


class Verbatim(str):
    """Text the server wrote itself (a traceback's frames), logged as it is: `awb.cli.logs` escapes every
    other argument of a log line, since requests and tools choose what those say."""
