"""Whole numbers typed into a request (a path, a query, a form field, a header) by a person or a browser.

`str.isdigit` accepts "²" and other digits `int` refuses, `int` refuses more than 4300 digits, and SQLite
overflows past 64 bits: so a number here is ASCII digits that fit a 64-bit integer, or no number at all.
"""

from __future__ import annotations

from awb.inventory.stored_int import MAX_STORED_INT

_MAX_DIGITS = len(str(MAX_STORED_INT))


def whole_number(raw: str | None) -> int | None:
    """`raw` as an int when it is ASCII digits (leading zeros allowed) no larger than MAX_STORED_INT;
    otherwise None, for the caller to treat as absent or to refuse."""
    if not raw or not (raw.isascii() and raw.isdigit()):
        return None
    digits = raw.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS:  # checked before `int`, which refuses very long strings outright
        return None
    value = int(digits)
    return value if value <= MAX_STORED_INT else None
