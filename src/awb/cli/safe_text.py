"""Text from tools, shown in a terminal without letting it drive the terminal.

Staged paths and contents are written by tool code: console markup must not be interpreted, and what
`awb.safe_text.visible` escapes (controls, ANSI escapes, bidi overrides, …) is shown as escapes.
"""

from __future__ import annotations

from rich.text import Text

from awb.safe_text import visible


def plain(text: str, *, multiline: bool = False, style: str = "") -> Text:
    """A rich `Text` that prints `text` literally (no markup), escaped as `visible` does."""
    return Text(visible(text, multiline=multiline), style=style)
