"""Text and code from tools, shown in a terminal without letting it drive the terminal.

Staged paths and contents are written by tool code: console markup must not be interpreted, and what
`awb.safe_text.visible` escapes (controls, ANSI escapes, bidi overrides, …) is shown as escapes. A tool's
code is shown as written, with what `awb.safe_code` marks shown as styled `⟨U+202E⟩` marks.
"""

from __future__ import annotations

from rich.text import Text

from awb import safe_code
from awb.safe_text import visible

#: A hidden character's mark in code: styled apart from any text the code itself could hold.
MARK_STYLE = "bold reverse red"


def plain(text: str, *, multiline: bool = False, style: str = "") -> Text:
    """A rich `Text` that prints `text` literally (no markup), escaped as `visible` does."""
    return Text(visible(text, multiline=multiline), style=style)


def code(text: str, language: str = "") -> Text:
    """A rich `Text` of tool code as written, each hidden character a styled mark (`awb.safe_code`)."""
    shown = Text()
    for part, is_hidden in safe_code.pieces(safe_code.laid_out(text, language)):
        shown.append(safe_code.mark(part) if is_hidden else part, style=MARK_STYLE if is_hidden else "")
    return shown
