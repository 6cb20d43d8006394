"""Text and Markdown cut into passages: the units a knowledge base indexes and its search returns.

A passage is at most `PASSAGE_CHARS` characters of whole paragraphs from one section, titled by the
section's heading trail (`Handbook > Refunds`), so a hit reads on its own. The size keeps a passage
within what the embedding model reads (256 word pieces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PASSAGE_CHARS = 1000
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Passage:
    #: The file, relative to the knowledge base's directory (`/`-separated).
    source: str
    title: str
    text: str


def _sections(text: str, default_title: str, *, markdown: bool) -> list[tuple[str, str]]:
    """(heading trail, body) pairs; a text file (or Markdown before its first heading) is one section."""
    if not markdown:
        return [(default_title, text)]
    sections: list[tuple[str, str]] = []
    trail: list[tuple[int, str]] = []
    body: list[str] = []
    fenced = False

    def flush() -> None:
        title = " > ".join(name for _, name in trail) or default_title
        sections.append((title, "\n".join(body)))
        body.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            body.append(line)
            continue
        flush()
        level = len(heading.group(1))
        trail = [(lvl, name) for lvl, name in trail if lvl < level]
        trail.append((level, heading.group(2) or default_title))
    flush()
    return sections


def _pieces(paragraph: str, limit: int) -> list[str]:
    """A paragraph longer than `limit` cut at word boundaries (a word longer than `limit` is cut too)."""
    pieces: list[str] = []
    current = ""
    for word in paragraph.split():
        while len(word) > limit:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(word[:limit])
            word = word[limit:]
        if current and len(current) + 1 + len(word) > limit:
            pieces.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        pieces.append(current)
    return pieces


def passages_of(text: str, source: str, *, markdown: bool, limit: int = PASSAGE_CHARS) -> list[Passage]:
    """The passages of one file's text, in reading order; blank sections give none."""
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    passages: list[Passage] = []
    for title, body in _sections(text.replace("\r\n", "\n"), stem, markdown=markdown):
        current = ""
        for block in _PARAGRAPH_BREAK.split(body):
            paragraph = block.strip()
            if not paragraph:
                continue
            for piece in [paragraph] if len(paragraph) <= limit else _pieces(paragraph, limit):
                if current and len(current) + 2 + len(piece) > limit:
                    passages.append(Passage(source, title, current))
                    current = piece
                else:
                    current = f"{current}\n\n{piece}" if current else piece
        if current:
            passages.append(Passage(source, title, current))
    return passages
