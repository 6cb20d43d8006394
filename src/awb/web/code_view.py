"""Code, JSON and diffs as the panel shows them: highlighted by Pygments, with every character that does not
show as itself marked `⟨U+202E⟩` (`awb.safe_code`) and counted in a warning, so a person reviewing a tool
sees exactly what will run."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape
from pygments import format as render
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, JavascriptLexer, JsonLexer, PythonLexer, TextLexer, WatLexer
from pygments.token import Token, _TokenType

from awb import safe_code

FORMATTER = HtmlFormatter(cssclass="code", wrapcode=True)


@dataclass(frozen=True)
class CodeBlock:
    """A highlighted block and, when it has hidden characters, the line that says how many and which."""

    html: Markup
    warning: str | None = None

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


def _tokens(lexer: Lexer, shown: str, language: str) -> list[tuple[_TokenType, str]]:
    """`shown` cut into highlighted tokens whose texts join to exactly `shown`.

    Pygments' own entry point would turn a carriage return into a newline and drop a leading byte-order mark
    before anyone saw them, so the lexer's unprocessed tokens are used. It reads the language's hidden line
    breaks as spaces (each is followed by a newline in `shown`: `safe_code.laid_out`), so it sees the lines
    the language's parser sees; the tokens keep the characters themselves, to be marked.
    """
    breaks = safe_code.LINE_BREAKS.get(language, "")
    lexed = shown.translate({ord(char): " " for char in breaks})
    tokens: list[tuple[_TokenType, str]] = []
    at = 0
    for index, kind, value in lexer.get_tokens_unprocessed(lexed):
        if index != at:  # a lexer that skips or repeats text: shown unhighlighted rather than not as it is
            return [(Token.Text, shown)]
        tokens.append((kind, shown[at : at + len(value)]))
        at += len(value)
    return tokens if at == len(shown) else [(Token.Text, shown)]


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
    # Pygments escapes the source; the markup it returns is ours.
    html = render(_tokens(lexer, shown, language), FORMATTER)
    return CodeBlock(_marked(html), safe_code.warning(code))


def highlighted(code: str, language: str) -> CodeBlock:
    return _block(code, _lexer(language, code), language)


def highlighted_json(value: Any) -> CodeBlock:
    return _block(json.dumps(value, indent=2, ensure_ascii=False), JsonLexer())


def _lines(text: str) -> list[str]:
    # Only newlines end a line of code: `str.splitlines` would also cut at form feeds and U+2028, which
    # Python reads inside a line.
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def highlighted_diff(before: str, after: str, before_name: str, after_name: str) -> CodeBlock | None:
    lines = list(difflib.unified_diff(_lines(before), _lines(after), before_name, after_name, n=3))
    if not lines:
        return None
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return _block(text, DiffLexer())
