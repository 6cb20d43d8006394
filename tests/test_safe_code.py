"""The rule for showing tool code to a person (`awb.safe_code`): what `awb.safe_text` would escape is marked,
everything else is shown as written."""

from __future__ import annotations

import pytest

from awb.safe_code import laid_out, mark, shown, warning
from awb.safe_text import visible

HIDDEN = [
    "\x00",  # C0 control
    "\x1b",  # the ESC of an ANSI escape
    "\x7f",
    "\x85",  # C1 control
    "\u061c",  # Arabic letter mark
    "\u200b",  # zero width space
    "\u200f",  # right-to-left mark
    "\u202a",  # left-to-right embedding
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u2069",  # pop directional isolate
    "\ufeff",  # byte-order mark
    "\u2028",  # line separator
    "\ue000",  # private use
    "\ud800",  # a lone surrogate
]


@pytest.mark.parametrize("char", HIDDEN)
def test_a_character_that_safe_text_escapes_is_marked_in_code(char: str) -> None:
    assert visible(char) != char
    assert shown(f"a{char}b") == f"a⟨U+{ord(char):04X}⟩b" == f"a{mark(char)}b"


def test_backslashes_letters_tabs_and_newlines_are_shown_as_written() -> None:
    code = 'path = "C:\\\\temp\\n"\n\tname = "été 中文 ⟨U+202E⟩"  # \\u202e\n'
    assert shown(code) == code
    assert warning(code) is None


def test_the_warning_counts_every_hidden_character_and_names_each_kind() -> None:
    said = warning("a\u202eb\u202ec\x1b[31m")
    assert said == (
        "3 invisible or control characters, shown as ⟨U+…⟩ marks: U+202E RIGHT-TO-LEFT OVERRIDE (2), U+001B control."
    )
    assert warning("x\u200by") == "1 invisible or control character, shown as ⟨U+…⟩ marks: U+200B ZERO WIDTH SPACE."


def test_the_warning_names_a_few_kinds_and_says_how_many_more() -> None:
    said = warning("".join(HIDDEN))
    assert said is not None and said.startswith("15 invisible or control characters") and "and 10 other kinds" in said


def test_a_line_break_of_the_language_is_followed_by_a_newline_when_it_has_none() -> None:
    # JavaScript ends a `//` comment at U+2028 and a carriage return; Python only at the carriage return.
    assert laid_out("a // x\u2028b()", "javascript") == "a // x\u2028\nb()"
    assert laid_out("a # x\u2028b", "python") == "a # x\u2028b"
    assert laid_out("a # x\rb\r\nc", "python") == "a # x\r\nb\r\nc"
    assert shown("a # x\rb", "python") == "a # x⟨U+000D⟩\nb"
    assert shown("a # x\rb") == "a # x⟨U+000D⟩b"
