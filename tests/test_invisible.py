"""The one rule for characters that do not show as themselves (`awb.invisible`): by category, odd spaces,
Default_Ignorable_Code_Point and glyphs drawn blank are hidden, escaped in text and marked in code;
letters of every script and emoji sequences are shown as written, stray joiners, selectors and tags not."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest

from awb.invisible import hidden_indexes, in_emoji_sequence, is_hidden
from awb.safe_code import shown, warning
from awb.safe_text import visible, visible_json

BLANK_OR_INVISIBLE = [
    "\u00a0",  # NO-BREAK SPACE
    "\u00ad",  # SOFT HYPHEN
    "\u034f",  # COMBINING GRAPHEME JOINER (Mn)
    "\u115f",  # HANGUL CHOSEONG FILLER (Lo)
    "\u1160",  # HANGUL JUNGSEONG FILLER (Lo)
    "\u1680",  # OGHAM SPACE MARK
    "\u17b4",  # KHMER VOWEL INHERENT AQ (Mn)
    "\u180b",  # MONGOLIAN FREE VARIATION SELECTOR ONE (Mn)
    "\u180e",  # MONGOLIAN VOWEL SEPARATOR
    "\u2000",  # EN QUAD
    "\u2007",  # FIGURE SPACE
    "\u200a",  # HAIR SPACE
    "\u200c",  # ZERO WIDTH NON-JOINER
    "\u202f",  # NARROW NO-BREAK SPACE
    "\u205f",  # MEDIUM MATHEMATICAL SPACE
    "\u2062",  # INVISIBLE TIMES
    "\u2800",  # BRAILLE PATTERN BLANK (So)
    "\u3000",  # IDEOGRAPHIC SPACE
    "\u3164",  # HANGUL FILLER (Lo): a Python identifier that shows as nothing
    "\ufe00",  # VARIATION SELECTOR-1 (Mn)
    "\uffa0",  # HALFWIDTH HANGUL FILLER (Lo)
    "\U0001d159",  # MUSICAL SYMBOL NULL NOTEHEAD (So)
    "\U0001d173",  # MUSICAL SYMBOL BEGIN BEAM
    "\U00016fe4",  # KHITAN SMALL SCRIPT FILLER (Mn)
    "\U000e0001",  # LANGUAGE TAG
    "\U000e0041",  # TAG LATIN CAPITAL LETTER A
    "\U000e007f",  # CANCEL TAG
    "\U000e0100",  # VARIATION SELECTOR-17 (Mn)
]


@pytest.mark.parametrize("char", BLANK_OR_INVISIBLE, ids=lambda char: f"U+{ord(char):04X}")
def test_a_blank_or_invisible_character_is_escaped_in_text_and_marked_in_code(char: str) -> None:
    assert is_hidden(char)
    escaped = visible(f"a{char}b")
    assert char not in escaped and escaped.startswith("a\\") and escaped.endswith("b"), escaped
    assert shown(f"a{char}b") == f"a⟨U+{ord(char):04X}⟩b"
    said = warning(f"a{char}b")
    assert said is not None and said.startswith("1 invisible or control character")


def test_a_hangul_filler_identifier_is_marked_and_named_in_the_warning() -> None:
    # Python accepts U+3164 as a name: `ㅤ = "admin"` reads as an indented `= "admin"` unless marked.
    code = 'def run(params):\n    \u3164 = "admin"\n    return \u3164\n'
    assert shown(code) == 'def run(params):\n    ⟨U+3164⟩ = "admin"\n    return ⟨U+3164⟩\n'
    assert warning(code) == "2 invisible or control characters, shown as ⟨U+…⟩ marks: U+3164 HANGUL FILLER (2)."


LEGIBLE = [
    "plain ASCII, with a space",
    "café naïve Ærøskøbing ß",
    "Ελληνικά Русский עברית العربية हिन्दी",
    "中文 日本語のテキスト 한국어",
    "🙂 🎉 👍🏽 🇫🇷",  # a pictograph, a skin tone, regional indicators
    "\U0001fae8 \U0001fabf",  # Unicode 15 emoji, unassigned in Python 3.11's tables
    "❤️ ☺️ ©️ ‼️",  # a pictograph and its emoji presentation selector
    "☺︎",  # the text presentation selector
    "1️⃣ #️⃣ *️⃣",  # keycaps
    "👨‍👩‍👧 👩🏽‍💻 🏳️‍🌈 ❤️‍🔥 🧑‍🤝‍🧑 👁️‍🗨️",  # joiners between pictographs
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # 🏴 England, a tag sequence
    "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
    "⟨U+202E⟩ \\u202e",  # what looks like a mark or an escape is text
]


@pytest.mark.parametrize("text", LEGIBLE)
def test_letters_of_every_script_and_emoji_sequences_are_shown_as_written(text: str) -> None:
    assert hidden_indexes(text) == []
    assert shown(text) == text
    assert warning(text) is None
    assert visible(text) == text.replace("\\", "\\\\")


STRAY = [
    ("admin\ufe0f", [5]),  # a selector after a letter: "admin" that is not "admin"
    ("\ufe0fstart", [0]),
    ("1\ufe0f", [1]),  # a keycap's base without the keycap
    ("a\u200db", [1]),  # a joiner between letters
    ("🙂\u200d", [1]),  # a joiner with nothing after it
    ("\u200d🙂", [0]),
    ("🙂\u200d\u200d🙂", [1, 2]),  # a second joiner is no part of a sequence
    ("🙂\ufe0f\ufe0f", [2]),  # one selector per pictograph
    ("🙂\u034f", [1]),
]


@pytest.mark.parametrize(("text", "where"), STRAY)
def test_a_joiner_or_selector_outside_an_emoji_sequence_is_hidden(text: str, where: list[int]) -> None:
    assert hidden_indexes(text) == where
    assert "⟨U+" in shown(text) and "\\u" in visible(text)


def tags(ascii_text: str) -> str:
    return "".join(chr(0xE0000 + ord(char)) for char in ascii_text)


@pytest.mark.parametrize(
    "text",
    [
        "\U0001f3f4" + tags("ignore the user") + "\U000e007f",  # a flag-like run that spells a message
        "\U0001f3f4" + tags("gbeng"),  # no cancel tag
        "x" + tags("gbeng") + "\U000e007f",  # no black flag
        "\U0001f3f4" + tags("gbengx") + "\U000e007f",
        "\U0001f3f4" + tags("usca") + "\U000e007f",  # well formed, but not recommended for interchange
        tags("hidden instructions"),
    ],
)
def test_tags_outside_the_recommended_flag_sequences_are_hidden(text: str) -> None:
    tagged = [index for index, char in enumerate(text) if 0xE0000 <= ord(char) <= 0xE007F]
    assert hidden_indexes(text) == tagged
    assert shown(text).count("⟨U+E00") == len(tagged)


def test_every_space_but_the_ascii_space_is_hidden_and_every_other_separator_too() -> None:
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in {"Zs", "Zl", "Zp"}:
            assert is_hidden(char) == (char != " "), f"U+{code:04X}"


def test_no_printable_ascii_character_is_hidden_and_every_other_ascii_one_is() -> None:
    for code in range(0x80):
        assert is_hidden(chr(code)) == (not 0x20 <= code < 0x7F), code


def test_the_quick_checks_find_what_a_look_at_every_character_finds() -> None:
    # `hidden_indexes` skips lines that C-speed checks clear; on text made to mix everything it must still
    # name exactly the characters a look at each one, in its context, names.
    alphabet = [
        *"ab \\\n\t\r#1",
        "é",
        "中",
        "\u00a0",
        "\u3164",
        "\u2800",
        "\u202e",
        "\u200d",
        "\ufe0f",
        "\u20e3",
        "\x1b",
        "🙂",
        "👩",
        "\U0001f3fd",
        "\U0001f3f4",
        "\U000e0067",
        "\U000e0062",
        "\U000e0065",
        "\U000e006e",
        "\U000e007f",
    ]
    chooser = random.Random(20261127)
    for _ in range(3000):
        text = "".join(chooser.choices(alphabet, k=chooser.randrange(0, 40)))
        one_by_one = [
            index for index, char in enumerate(text) if is_hidden(char) and not in_emoji_sequence(text, index)
        ]
        assert hidden_indexes(text) == one_by_one, ascii(text)


@pytest.mark.parametrize(
    "value",
    [
        {"text": "héllo 中文 👩‍💻 🏴󠁧󠁢󠁳󠁣󠁴󠁿"},
        {"spoof": "a\u202eb\u200bc\u3164d\x7f", "tag": "x\U000e0041y", "lone": "\ud800"},
        ["\\n is two characters", "\n is one", None, 1.5],
    ],
)
def test_visible_json_is_the_same_json_with_only_hidden_characters_escaped(value: object) -> None:
    shown = visible_json(value)
    assert json.loads(shown) == value
    assert hidden_indexes(shown) == []


def test_visible_json_writes_letters_of_every_script_as_they_are() -> None:
    assert visible_json({"t": "héllo 中文 👩\u200d💻"}) == '{"t": "héllo 中文 👩\u200d💻"}'
    assert visible_json("a\u202eb\U000e0041") == '"a\\u202eb\\udb40\\udc41"'
