"""Turning names and free text into FTS5 terms, safely.

Agents send anything as a query: quotes, FTS operators (`NEAR(`, `*`, `name:`), CJK, emoji. We never
pass their text to MATCH as syntax: we take word tokens, drop stop words, quote each token and OR them.
"""

from __future__ import annotations

import re

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# A short English list: measured on MetaTool, keeping stop words costs ~8 NDCG points.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just let me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own please same she
    should so some such than that the their theirs them themselves then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves want need like get use using tool tools""".split()
)


def split_identifier(name: str) -> str:
    """`resizeImage` -> `resize image`, `png_to-JPEG2` -> `png to jpeg2`."""
    spaced = _CAMEL.sub(" ", name)
    return " ".join(token.lower() for token in _WORD.findall(spaced.replace("_", " ")))


def query_terms(query: str) -> list[str]:
    """Lower-cased word tokens of a query, identifiers split, stop words dropped, order kept, no repeats."""
    seen: dict[str, None] = {}
    for raw in _WORD.findall(_CAMEL.sub(" ", query)):
        token = raw.lower()
        if token not in STOP_WORDS:
            seen.setdefault(token, None)
    return list(seen)


def search_words(query: str) -> list[str]:
    """The words a query searches for: `query_terms`, or all its words when every one is a stop word
    (a query made only of stop words still means something)."""
    return query_terms(query) or list(dict.fromkeys(t.lower() for t in _WORD.findall(query)))


def or_expression(words: list[str]) -> str | None:
    """An FTS5 MATCH expression: each word quoted (never read as syntax), OR-ed; None without words."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words) or None
