"""Which characters do not show as themselves: the one rule behind `awb.safe_text` (escapes in one-line
text) and `awb.safe_code` (marks in code and staged contents), in the terminal and on the panel.

A character is hidden when
1. its category draws nothing or acts on the text around it: controls (Cc, so an ANSI escape's ESC), format
   characters (Cf: bidi overrides and isolates, zero-width characters, tags), surrogates (Cs), private use
   (Co), unassigned (Cn, but for the code points Unicode keeps for emoji, where emoji newer than Python's
   Unicode tables are), line and paragraph separators (Zl, Zp);
2. it is a space other than U+0020 (Zs: the no-break, figure, narrow, medium mathematical and ideographic
   spaces look like a space, or like nothing, and are other characters);
3. it is a Default_Ignorable_Code_Point: Unicode's list of what a renderer draws as nothing, which holds
   letters (Lo: the Hangul fillers U+115F, U+1160, U+3164, U+FFA0) and marks (Mn: U+034F COMBINING
   GRAPHEME JOINER, the variation selectors, the Khmer inherent vowels, the Mongolian ones) as well;
4. it is in `LOOKS_BLANK`: a graphic character whose glyph is empty, which no property names.

Emoji are text, shown as written: within an emoji sequence a zero-width joiner between two pictographs
(👩‍💻), a variation selector 15 or 16 right after a pictograph or a keycap's base (❤️, 1️⃣) and the tags of
the three RGI subdivision flags (England, Scotland, Wales) only choose the glyph of a visible character.
The same characters anywhere else are hidden: a stray joiner or selector makes two strings differ unseen,
and tags spell ASCII that nobody sees ("ASCII smuggling"), so a flag-like run of any other tags is too.
Other variation selectors (U+FE00-FE0D, the ideographic ones from U+E0100) are always marked: rare in
text, and invisible.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable

#: Categories whose characters are hidden (rule 1); Zs is rule 2.
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: Default_Ignorable_Code_Point (DerivedCoreProperties.txt; the same from Unicode 14 to 17).
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
#: Graphic characters drawn as nothing that no property above catches (rule 4).
LOOKS_BLANK = frozenset(
    {
        0x2800,  # BRAILLE PATTERN BLANK (So): a blank cell, used as an "invisible" name or message
        0x1D159,  # MUSICAL SYMBOL NULL NOTEHEAD (So)
        0x16FE4,  # KHITAN SMALL SCRIPT FILLER (Mn)
    }
)
#: Extended_Pictographic (emoji-data.txt, Unicode 15; later versions keep within it): what an emoji's
#: joiner and presentation selector may attach to.
PICTOGRAPHIC = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049), (0x2122, 0x2122),
    (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA), (0x231A, 0x231B), (0x2328, 0x2328),
    (0x2388, 0x2388), (0x23CF, 0x23CF), (0x23E9, 0x23F3), (0x23F8, 0x23FA), (0x24C2, 0x24C2),
    (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x2605),
    (0x2607, 0x2612), (0x2614, 0x2685), (0x2690, 0x2705), (0x2708, 0x2712), (0x2714, 0x2714),
    (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721), (0x2728, 0x2728), (0x2733, 0x2734),
    (0x2744, 0x2744), (0x2747, 0x2747), (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755),
    (0x2757, 0x2757), (0x2763, 0x2767), (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0),
    (0x27BF, 0x27BF), (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
    (0x2B55, 0x2B55), (0x3030, 0x3030), (0x303D, 0x303D), (0x3297, 0x3297), (0x3299, 0x3299),
    (0x1F000, 0x1F0FF), (0x1F10D, 0x1F10F), (0x1F12F, 0x1F12F), (0x1F16C, 0x1F171), (0x1F17E, 0x1F17F),
    (0x1F18E, 0x1F18E), (0x1F191, 0x1F19A), (0x1F1AD, 0x1F1E5), (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A),
    (0x1F22F, 0x1F22F), (0x1F232, 0x1F23A), (0x1F23C, 0x1F23F), (0x1F249, 0x1F3FA), (0x1F400, 0x1F53D),
    (0x1F546, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F774, 0x1F77F), (0x1F7D5, 0x1F7FF), (0x1F80C, 0x1F80F),
    (0x1F848, 0x1F84F), (0x1F85A, 0x1F85F), (0x1F888, 0x1F88F), (0x1F8AE, 0x1F8FF), (0x1F90C, 0x1F93A),
    (0x1F93C, 0x1F945), (0x1F947, 0x1FAFF), (0x1FC00, 0x1FFFD),
)  # fmt: skip


def _character_class(codes: Iterable[int]) -> re.Pattern[str]:
    """A pattern matching any of the sorted `codes`, as ranges (searched far faster than one by one)."""
    runs: list[tuple[int, int]] = []
    for code in codes:
        if runs and runs[-1][1] == code - 1:
            runs[-1] = (runs[-1][0], code)
        else:
            runs.append((code, code))
    return re.compile("[" + "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in runs) + "]")


#: The hidden characters Python counts printable (`str.isprintable` is false for the rest): the
#: Default_Ignorable letters and marks, and `LOOKS_BLANK`.
_PRINTABLE_HIDDEN = _character_class(
    code
    for code in sorted({*LOOKS_BLANK, *(code for low, high in DEFAULT_IGNORABLE for code in range(low, high + 1))})
    if chr(code).isprintable()
)
_ASCII_CONTROLS = re.compile("[\x00-\x1f\x7f]")
#: Controls that code holds on many lines (tabs, the carriage returns of CRLF): found apart.
_LINE_CONTROLS = re.compile("[\t\r]")

ZWJ = "\u200d"
PRESENTATION_SELECTORS = frozenset("\ufe0e\ufe0f")  # VS15 (text), VS16 (emoji)
#: Skin tones: between a pictograph and the joiner that follows it (👩🏽‍💻).
MODIFIERS = frozenset(chr(code) for code in range(0x1F3FB, 0x1F400))
KEYCAP_BASES = frozenset("#*0123456789")
KEYCAP = "\u20e3"
BLACK_FLAG = "\U0001f3f4"
TAG_FIRST = 0xE0020
CANCEL_TAG = "\U000e007f"
#: The tag sequences Unicode recommends for general interchange: 🏴󠁧󠁢󠁥󠁮󠁧󠁿 🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁷󠁬󠁳󠁿.
FLAG_TAGS = frozenset({"gbeng", "gbsct", "gbwls"})
#: The hidden characters an emoji sequence may hold.
_EMOJI_PARTS = frozenset({ZWJ, *PRESENTATION_SELECTORS, *map(chr, range(TAG_FIRST, ord(CANCEL_TAG) + 1))})
_FLAG_TAG_TEXTS = frozenset("".join(chr(0xE0000 + ord(letter)) for letter in name) for name in FLAG_TAGS)
_LONGEST_FLAG_TAGS = max(map(len, FLAG_TAGS))


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    at = bisect_right(ranges, (code, 0x10FFFF)) - 1
    return at >= 0 and ranges[at][0] <= code <= ranges[at][1]


def _hidden_code(code: int) -> bool:
    if code in LOOKS_BLANK or _within(code, DEFAULT_IGNORABLE):
        return True
    category = unicodedata.category(chr(code))
    if category == "Cn" and _within(code, PICTOGRAPHIC):
        return False  # reserved for emoji: a newer one than this Python's Unicode knows (🫨 on 3.11)
    return category in HIDDEN_CATEGORIES or category == "Zs"


#: Characters already judged: text repeats few distinct ones. Cleared when full, so it stays small.
_JUDGED: dict[str, bool] = {}
_JUDGED_MAX = 1 << 14


def is_hidden(char: str) -> bool:
    """Whether `char`, on its own, would not be seen as itself or would change how the text around it is
    seen (`hidden_indexes` lets emoji sequences through)."""
    hidden = _JUDGED.get(char)
    if hidden is None:
        if len(_JUDGED) >= _JUDGED_MAX:
            _JUDGED.clear()
        hidden = _JUDGED[char] = not " " <= char < "\x7f" and _hidden_code(ord(char))
    return hidden


def is_pictographic(char: str) -> bool:
    return _within(ord(char), PICTOGRAPHIC)


def hidden_indexes(text: str) -> list[int]:
    """Where the hidden characters of `text` are, in order: each one `is_hidden` says, but those that are
    part of an emoji sequence."""
    # Most text is printable and holds none of the few printable hidden characters: C-speed checks first,
    # then line by line, so that only a line with something that may be hidden is looked at one by one.
    suspects = _PRINTABLE_HIDDEN.search(text) is not None
    if text.isprintable() and not suspects:
        return []
    if text.isascii():
        return [found.start() for found in _ASCII_CONTROLS.finditer(text)]
    indexes: list[int] = []
    at = 0
    for line in text.split("\n"):
        if at:
            indexes.append(at - 1)  # the newline that ends the line before
        bare = _LINE_CONTROLS.sub("", line)
        if bare.isprintable() and not (suspects and _PRINTABLE_HIDDEN.search(bare)):
            if len(bare) != len(line):
                indexes.extend(at + found.start() for found in _LINE_CONTROLS.finditer(line))
        else:
            judged = _JUDGED.get
            for index, char in enumerate(line):  # the dictionary inline: this loop is the slow path's cost
                hidden = judged(char)
                if (is_hidden(char) if hidden is None else hidden) and not (
                    char in _EMOJI_PARTS and in_emoji_sequence(text, at + index)
                ):
                    indexes.append(at + index)
        at += len(line) + 1
    return indexes


def in_emoji_sequence(text: str, index: int) -> bool:
    """Whether the joiner, selector or tag at `index` is part of an emoji sequence (the module's rule)."""
    char = text[index]
    if char == ZWJ:
        return _ends_pictograph(text, index) and is_pictographic(text[index + 1 : index + 2] or " ")
    if char in PRESENTATION_SELECTORS:
        before = text[index - 1] if index else " "
        return is_pictographic(before) or (before in KEYCAP_BASES and text[index + 1 : index + 2] == KEYCAP)
    if TAG_FIRST <= ord(char) <= ord(CANCEL_TAG):
        return _in_flag(text, index)
    return False


def _ends_pictograph(text: str, index: int) -> bool:
    """Whether a pictograph, with its presentation selector or skin tone, ends just before `index`."""
    at = index - 1
    if at >= 0 and (text[at] in PRESENTATION_SELECTORS or text[at] in MODIFIERS):
        at -= 1
    return at >= 0 and is_pictographic(text[at])


def _in_flag(text: str, index: int) -> bool:
    """Whether the tag at `index` is in one of `FLAG_TAGS`: 🏴, its tags, the cancel tag. A look at a few
    characters either side, so a long run of tags costs no more per tag than a short one."""
    window = text[max(0, index - _LONGEST_FLAG_TAGS - 1) : index]
    flag = window.rfind(BLACK_FLAG)
    if flag < 0:
        return False
    start = index - len(window) + flag + 1
    end = text.find(CANCEL_TAG, index, start + _LONGEST_FLAG_TAGS + 1)
    return end >= 0 and text[start:end] in _FLAG_TAG_TEXTS
