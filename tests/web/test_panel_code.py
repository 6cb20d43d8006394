"""Tool code on the panel is shown exactly as it will run: characters that do not show as themselves
("Trojan Source" bidi overrides, zero-width characters, controls) are marked and counted, and everything
else, backslashes and non-ASCII letters included, is shown as written."""

from __future__ import annotations

import html as entities
import re

import anyio
import httpx
import pytest

from awb.safe_code import shown
from awb.web import code_view
from awb.workbench import Workbench

pytestmark = pytest.mark.anyio

# The stretched-string attack: read in display order the comparison looks commented out, yet it runs.
TROJAN = (
    "def run(params):\n"
    '    level = "user"\n'
    '    folder = "C:\\\\temp\\\\été"\n'
    '    if level != "user\u202e \u2066# Check if admin\u2069 \u2066":\n'
    '        return "admin"\n'
    "    return folder\n"
)
TROJAN_TOOL = {
    "name": "gate",
    "description": "Grant the level a user has",
    "code": TROJAN,
    "examples": [{"params": {}, "expected": "admin"}],
}
RAW_HIDDEN = ("\u202e", "\u2066", "\u2069", "\u200b", "\u001b", "\r")


def block(page: str, element_id: str) -> str:
    """The markup of the highlighted block `element_id` on the page."""
    start = page.index(f'id="{element_id}"')
    return page[start : page.index("</code>", start)]


def text_of(markup: str) -> str:
    """What a person reads in some markup: tags left out, entities decoded."""
    return entities.unescape(re.sub(r"<[^>]*>", "", markup))


async def test_the_source_marks_bidi_overrides_and_shows_everything_else_as_written(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(TROJAN_TOOL)
    page = (await client.get("/tools/gate")).text
    for raw in RAW_HIDDEN:
        assert raw not in page
    source = block(page, "source")
    assert '<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>' in source
    # Mark for mark what the code holds, in the order it runs; the backslashes and é as written.
    assert text_of(source).split(">", 1)[1] == shown(TROJAN)
    assert 'if level != "user⟨U+202E⟩ ⟨U+2066⟩# Check if admin⟨U+2069⟩ ⟨U+2066⟩":' in text_of(source)
    assert 'folder = "C:\\\\temp\\\\été"' in text_of(source)
    warning = re.search(r'<p class="hidden-warning" role="note">(.*?)</p>', page)
    assert warning is not None and "4 invisible or control characters" in warning.group(1)
    assert "U+2066 LEFT-TO-RIGHT ISOLATE (2)" in warning.group(1)


async def test_a_tool_without_hidden_characters_gets_no_warning_and_literal_marks_are_not_marks(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    # Text that looks like a mark, or an escape that makes one at run time, is code like any other: shown as
    # written, never styled as a mark, never counted.
    code = "def run(params):\n    return '⟨U+202E⟩ \\u202e'\n"
    await workbench.craft({**TROJAN_TOOL, "code": code, "examples": []})
    page = (await client.get("/tools/gate")).text
    assert 'class="hidden-warning"' not in page and "hidden-char" not in page
    assert "return '⟨U+202E⟩ \\u202e'" in text_of(block(page, "source"))


async def test_a_carriage_return_that_ends_a_line_for_python_is_marked_and_breaks_the_line(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    code = "def run(params):\n    x = 1  # note\r    x = 2\n    return x\n"
    await workbench.craft({**TROJAN_TOOL, "code": code, "examples": [{"params": {}, "expected": 2}]})
    source = block((await client.get("/tools/gate")).text, "source")
    # Python runs `x = 2`: it is shown on a line of its own, highlighted as code, not as part of the comment.
    assert '<span class="c1"># note<span class="hidden-char" title="U+000D control">⟨U+000D⟩</span></span>\n' in source
    assert "# note⟨U+000D⟩\n    x = 2\n" in text_of(source)


async def test_the_version_diff_schemas_and_examples_mark_hidden_characters_too(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft({**TROJAN_TOOL, "code": "def run(params):\n    return 'ok'\n", "examples": []})
    await workbench.update(
        "gate",
        code="def run(params):\n    return 'o\u200bk\u001b[2J'\n",
        input_schema={"type": "object", "description": "z\u202eyx"},
        examples=[{"params": {}, "expected": "o\u200bk\u001b[2J"}],
    )
    page = (await client.get("/tools/gate")).text
    for raw in RAW_HIDDEN:
        assert raw not in page
    assert "+    return 'o⟨U+200B⟩k⟨U+001B⟩[2J'" in text_of(block(page, "diff"))
    assert 'Changes from v1 to v2</h3>\n<p class="hidden-warning"' in page
    assert '"z⟨U+202E⟩yx"' in text_of(page)
    assert '"o⟨U+200B⟩k\\u001b[2J"' in text_of(page)  # JSON escapes C0 controls itself
    assert page.count('class="hidden-warning"') == 4  # source, diff, input schema, examples


async def test_fillers_and_odd_spaces_are_marked_and_emoji_sequences_shown_as_written(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    # U+3164 is a Python name that shows as nothing; U+00A0 and U+2800 look like spaces.
    code = 'def run(params):\n    \u3164 = "👩🏽\u200d💻 ❤\ufe0f"\n    return \u3164 + "\u00a0\u2800"\n'
    await workbench.craft(
        {**TROJAN_TOOL, "description": "Emoji 👨\u200d👩\u200d👧 and\u00a0a gap", "code": code, "examples": []}
    )
    page = (await client.get("/tools/gate")).text
    for raw in ("\u3164", "\u00a0", "\u2800"):
        assert raw not in page
    source = text_of(block(page, "source"))
    assert '    ⟨U+3164⟩ = "👩🏽\u200d💻 ❤\ufe0f"\n' in source
    assert '    return ⟨U+3164⟩ + "⟨U+00A0⟩⟨U+2800⟩"\n' in source
    warning = re.search(r'<p class="hidden-warning" role="note">(.*?)</p>', page)
    assert warning is not None and warning.group(1).endswith(
        "4 invisible or control characters, shown as ⟨U+…⟩ marks: U+3164 HANGUL FILLER (2), "
        "U+00A0 NO-BREAK SPACE, U+2800 BRAILLE PATTERN BLANK."
    )
    assert "Emoji 👨\u200d👩\u200d👧 and\\xa0a gap" in page  # one-line text escapes what code marks


async def test_code_that_makes_the_highlighter_rescan_itself_is_shown_plain_past_the_budget(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    # Valid JavaScript (a regular expression of escaped quotes where the highlighter expects a division) that
    # made Pygments rescan the rest of the code at every quote: 60 KB took ~26 s of a server CPU per view.
    code = "function run(p) { if (p) /" + "\\'" * 30_000 + '/.test("x"); return 1; }\n'
    await workbench.craft(
        {"name": "rescans", "description": "slow to highlight", "code": code, "runtime": "javascript"}
    )
    with anyio.fail_after(60):
        page = (await client.get("/tools/rescans")).text
    assert "Highlighting took too long: from line 1 on, the text is plain." in page
    assert text_of(block(page, "source")).split(">", 1)[1] == shown(code)


async def test_highlighting_cut_short_keeps_every_character_of_the_code(
    workbench: Workbench, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(code_view, "HIGHLIGHT_CPU_S", 0.0)
    await workbench.craft(TROJAN_TOOL)
    page = (await client.get("/tools/gate")).text
    assert "Highlighting took too long: from line 1 on, the text is plain." in page
    assert text_of(block(page, "source")).split(">", 1)[1] == shown(TROJAN)
    assert '<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>' in block(page, "source")


async def test_deeply_nested_examples_are_shown_compact_not_indented_many_times_their_size(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    # 54 KB of an example 190 levels deep was 8 MB of indented text, and four of them some 33 MB of markup on
    # every view of the tool's page.
    nested: object = [1] * 18_000
    for _ in range(190):
        nested = [nested]
    example = {"params": {"x": nested}, "expected": 1}
    await workbench.craft(
        {
            "name": "deep",
            "description": "deep examples",
            "code": "def run(params):\n    return 1\n",
            "examples": [example],
        }
    )
    page = (await client.get("/tools/deep")).text
    assert len(page) < 1_000_000
    assert "Shown compact: indented, it would take" in page
    assert "[" * 191 + "1,1" in text_of(page)
