"""Code written by tools (and so by language models), shown to a person exactly as it will run.

`awb.safe_text.visible` escapes one-line text, a backslash doubled; code must keep its backslashes, so here
each character that does not show as itself (`awb.invisible`: bidi overrides and isolates, zero-width and
other format characters, C0/C1 controls and so ANSI escapes, odd spaces, fillers, ...), tabs and newlines
apart, becomes a mark such as `⟨U+202E⟩` that each view styles apart from the code ("Trojan Source" cannot
reorder or hide what a reviewer reads). Everything else, non-ASCII letters and emoji sequences included, is
shown as written. Staged contents are shown the same way.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterator

from awb.invisible import hidden_indexes

#: Characters that lay code out and are shown as they are.
LAYOUT = frozenset("\n\t")
#: Hidden characters that also end a line for a language's parser: a view breaks the line after their mark,
#: so that `# note⟨U+000D⟩os.system(...)` is not read as one comment when Python runs the part after it.
LINE_BREAKS = {"python": "\r", "javascript": "\r\u2028\u2029"}
#: Distinct characters a warning names; it counts them all.
NAMED_IN_WARNING = 5


def _marked_indexes(text: str) -> list[int]:
    """Where the characters of `text` that are shown as marks are."""
    if _plain(text):  # most code: the loop runs only when there may be something
        return []
    return [index for index in hidden_indexes(text) if text[index] not in LAYOUT]


def _plain(text: str) -> bool:
    """Whether `text` certainly has no hidden character (printable ASCII, newlines and tabs)."""
    return text.isascii() and text.replace("\n", "").replace("\t", "").isprintable()


def mark(char: str) -> str:
    """What a view shows for a hidden character: `⟨U+202E⟩`."""
    return f"⟨U+{ord(char):04X}⟩"


def describe(char: str) -> str:
    """`U+202E RIGHT-TO-LEFT OVERRIDE`; controls, which have no Unicode name, are called `control`."""
    name = unicodedata.name(char, "control" if unicodedata.category(char) == "Cc" else "")
    return f"U+{ord(char):04X} {name}".rstrip()


def hidden_characters(code: str) -> list[str]:
    """The hidden characters of `code`, in order (one per occurrence)."""
    return [code[index] for index in _marked_indexes(code)]


def warning(code: str) -> str | None:
    """One line saying how many hidden characters `code` has and which, or None when it has none."""
    found = Counter(hidden_characters(code))
    if not found:
        return None
    total = sum(found.values())
    named = [
        describe(char) + (f" ({count})" if count > 1 else "") for char, count in found.most_common(NAMED_IN_WARNING)
    ]
    more = len(found) - len(named)
    listed = ", ".join(named) + (f" and {more} other kinds" if more else "")
    plural = "character" if total == 1 else "characters"
    return f"{total} invisible or control {plural}, shown as ⟨U+…⟩ marks: {listed}."


def laid_out(code: str, language: str = "") -> str:
    """`code` with a newline after each of `language`'s hidden line breaks that has none, so a view shows
    the lines its parser sees (the break's own mark still shows where the character is)."""
    breaks = LINE_BREAKS.get(language, "")
    if not breaks or not any(char in code for char in breaks):
        return code
    out = []
    for index, char in enumerate(code):
        out.append(char)
        if char in breaks and code[index + 1 : index + 2] != "\n":
            out.append("\n")
    return "".join(out)


def pieces(text: str) -> Iterator[tuple[str, bool]]:
    """`text` as runs of shown text (`False`) and single hidden characters (`True`), in order."""
    start = 0
    for index in _marked_indexes(text):
        if start < index:
            yield text[start:index], False
        yield text[index], True
        start = index + 1
    if start < len(text) or not text:
        yield text[start:], False


def shown(code: str, language: str = "") -> str:
    """`code` as plain text, each hidden character replaced by its mark (for output that has no styles)."""
    return "".join(mark(part) if is_mark else part for part, is_mark in pieces(laid_out(code, language)))
