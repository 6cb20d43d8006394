"""Helpers of the client tests (a plain module with a unique name: every test folder has a conftest)."""

from __future__ import annotations

from collections.abc import Callable

from support import REPO

EXAMPLES = REPO / "examples" / "clients"

#: What every example prints after its protocol line: craft -> call -> search -> equip -> listed -> direct call.
JOURNEY = [
    "craft: word_count",
    'call: {"longest": "not", "words": 4}',
    "search: word_count",
    "equip: ['word_count']",
    "listed: True",
    'direct: {"longest": "quick", "words": 4}',
]

RunExample = Callable[..., list[str]]
