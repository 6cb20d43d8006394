"""Code, JSON and diffs as the panel shows them: highlighted by Pygments, with every character that does not
show as itself marked `⟨U+202E⟩` (`awb.safe_code`) and counted in a warning, so a person reviewing a tool
sees exactly what will run."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any

from markupsafe import Markup, escape
from pygments import format as render
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, JavascriptLexer, JsonLexer, PythonLexer, TextLexer, WatLexer
from pygments.token import Token, _TokenType

from awb import safe_code
from awb.web import bounded_diff

FORMATTER = HtmlFormatter(cssclass="code", wrapcode=True)
#: CPU time (of the thread rendering the page) highlighting one block may take; the rest is plain text.
#: 64 KB of ordinary code takes ~0.15 s here, a 4 MB diff ~0.4 s.
HIGHLIGHT_CPU_S = 0.5
#: JSON is indented unless that makes it more than this many times its compact size (past the free size).
INDENT_GROWTH = 8
INDENT_FREE_CHARS = 64 * 1024


@dataclass(frozen=True)
class CodeBlock:
    """A highlighted block and, when it has hidden characters, the line that says how many and which."""

    html: Markup
    warning: str | None = None
    #: What the block leaves out or shows otherwise than asked (a diff too costly to compute), for the page.
    note: str = ""

    def __html__(self) -> str:  # rendered as its markup by `{{ block }}` in a template
        return str(self.html)


def code_css() -> str:
    """The highlighter's colours, scoped to `.code` blocks."""
    return str(FORMATTER.get_style_defs(".code"))  # type: ignore[no-untyped-call]


def _lexer(language: str, code: str) -> Lexer:
    lexer: Lexer
    if language == "python":
        lexer = PythonLexer()
    elif language == "javascript":
        lexer = JavascriptLexer()
    elif language == "wasm" and code.lstrip().startswith("("):
        lexer = WatLexer()
    else:  # a base64 WebAssembly binary, or anything else: plain text
        lexer = TextLexer()
    return lexer


def _tokens(lexer: Lexer, shown: str, language: str) -> tuple[list[tuple[_TokenType, str]], int | None]:
    """`shown` cut into highlighted tokens whose texts join to exactly `shown`, and the line from which
    the rest is plain text because highlighting took `HIGHLIGHT_CPU_S` (None when all of it is highlighted).

    Pygments' own entry point would turn a carriage return into a newline and drop a leading byte-order mark
    before anyone saw them, so the lexer's unprocessed tokens are used. It reads the language's hidden line
    breaks as spaces (each is followed by a newline in `shown`: `safe_code.laid_out`), so it sees the lines
    the language's parser sees; the tokens keep the characters themselves, to be marked.
    """
    breaks = safe_code.LINE_BREAKS.get(language, "")
    lexed = shown.translate({ord(char): " " for char in breaks})
    tokens: list[tuple[_TokenType, str]] = []
    at = 0
    # Pygments' lexers try their rules as regular expressions at each token, and some rescan the rest of
    # the text each time (JavaScript's string rule, at every quote of a run of \' that never closes: 60 KB
    # of a valid tool took 26 s of a server CPU on each view of its page). Between two tokens a lexer does
    # at most a few scans of the text, so the budget is checked there.
    stop = time.thread_time() + HIGHLIGHT_CPU_S
    for index, kind, value in lexer.get_tokens_unprocessed(lexed):
        if index != at:  # a lexer that skips or repeats text: shown unhighlighted rather than not as it is
            return [(Token.Text, shown)], None
        tokens.append((kind, shown[at : at + len(value)]))
        at += len(value)
        if time.thread_time() > stop and at < len(shown):
            return [*tokens, (Token.Text, shown[at:])], shown.count("\n", 0, at) + 1
    return (tokens, None) if at == len(shown) else ([(Token.Text, shown)], None)


def _marked(html: str) -> Markup:
    # Pygments' markup is printable ASCII, so every hidden character left in its output comes from the code.
    out = []
    for part, is_hidden in safe_code.pieces(html):
        if is_hidden:
            title = escape(safe_code.describe(part))
            out.append(f'<span class="hidden-char" title="{title}">{safe_code.mark(part)}</span>')
        else:
            out.append(part)
    return Markup("".join(out))


def _block(code: str, lexer: Lexer, language: str = "") -> CodeBlock:
    shown = safe_code.laid_out(code, language)
    if not shown.endswith("\n"):  # as Pygments' own entry point does: its lexers expect whole lines
        shown += "\n"
    tokens, plain_from = _tokens(lexer, shown, language)
    # Pygments escapes the source; the markup it returns is ours.
    html = render(tokens, FORMATTER)
    note = "" if plain_from is None else f"Highlighting took too long: from line {plain_from} on, the text is plain."
    return CodeBlock(_marked(html), safe_code.warning(code), note)


def highlighted(code: str, language: str) -> CodeBlock:
    return _block(code, _lexer(language, code), language)


def highlighted_json(value: Any) -> CodeBlock:
    """`value` as indented JSON, or as compact JSON when indenting would make it many times larger.

    Indenting costs each line two spaces a level: 54 KB of an example nested 190 levels deep became 8 MB of
    text, and a tool's four such examples some 33 MB of markup on every view of its page."""
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    indented = json.dumps(value, indent=2, ensure_ascii=False)
    if len(indented) <= max(INDENT_GROWTH * len(compact), INDENT_FREE_CHARS):
        return _block(indented, JsonLexer())
    note = f"Shown compact: indented, it would take {len(indented):,} characters."
    return replace(_block(compact, JsonLexer()), note=note)


def _lines(text: str) -> list[str]:
    # Only newlines end a line of code: `str.splitlines` would also cut at form feeds and U+2028, which
    # Python reads inside a line.
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def highlighted_diff(
    before: str, after: str, before_name: str, after_name: str, *, steps: int = bounded_diff.DIFF_STEPS
) -> CodeBlock | None:
    """The changes from `before` to `after`, or None when there are none. When matching the two would
    cost the server too much (`bounded_diff.DIFF_STEPS`: both texts may be a tool author's), `after` is
    shown whole, as added lines, with a note that says so."""
    after_lines = _lines(after)
    note = ""
    lines = bounded_diff.unified_diff(_lines(before), after_lines, before_name, after_name, steps=steps)
    if lines is None:
        note = f"Too costly to compare with {before_name}: the whole of {after_name} is shown, every line as added."
        lines = bounded_diff.unified_diff([], after_lines, before_name, after_name) or []
    if not lines:
        return None
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    block = _block(text, DiffLexer())
    return replace(block, note=" ".join(n for n in (note, block.note) if n))
