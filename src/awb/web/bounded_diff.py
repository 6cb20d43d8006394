"""Unified diffs whose cost is bounded whatever the texts: the panel diffs what tools wrote (a tool's
versions, a staged write against the file on disk), and both sides of such a diff are a tool author's.

difflib's matcher looks, for each line of one side within a range, at every place that line occurs in
the other (up to 1% of it: more often, a line is "popular" and skipped), once per matching block it
finds; lines arranged to make many short matches of lines repeated just under that share make it
quadratic and worse (64 KB of code in two versions: ~9 s of a server CPU, the interpreter's lock held,
each time the tool's page was opened). Here the matcher spends at most `DIFF_STEPS` such looks; a diff
that needs more is not computed, and the caller shows the new text whole instead.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence

#: Places the matcher may look at in one diff (each costs it roughly 0.1 us: ~0.3 s in all at most).
#: Ordinary edits of a file take a few per line; two versions of 64 KB of code, ~100,000.
DIFF_STEPS = 3_000_000


class DiffTooCostly(Exception):
    """Matching the two texts would take more than `DIFF_STEPS`."""


class _BoundedMatcher(difflib.SequenceMatcher[str]):
    """A `SequenceMatcher` that counts, before each search for a longest match, an upper bound of the
    places that search looks at, and stops once they pass its steps."""

    def __init__(self, a: Sequence[str], b: Sequence[str], steps: int) -> None:
        super().__init__(None, a, b)  # autojunk: lines in over 1% of `b` are never looked up
        self._steps = steps
        self._lengths = len(a), len(b)
        # How many places in `b` each line of `a` can match (`b2j`: where each line of `b` is, once junk and
        # popular lines are out); their prefix sums price any range of `a` at once.
        where: dict[str, list[int]] = vars(self)["b2j"]
        places = (len(where.get(line, ())) for line in a)
        self._prefix = list(itertools.accumulate(places, initial=0))

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        ahi = self._lengths[0] if ahi is None else ahi
        bhi = self._lengths[1] if bhi is None else bhi
        # The lines of `a` its loop walks and the places in `b` it looks up for them (its extension over
        # junk lines walks matched lines only, at most `a` in all).
        self._steps -= self._prefix[ahi] - self._prefix[alo] + (ahi - alo)
        if self._steps < 0:
            raise DiffTooCostly
        return super().find_longest_match(alo, ahi, blo, bhi)


def unified_diff(
    before: Sequence[str], after: Sequence[str], before_name: str, after_name: str, *, steps: int = DIFF_STEPS
) -> list[str] | None:
    """`difflib.unified_diff(before, after, before_name, after_name)` as a list of lines, or None when
    matching the texts would take more than `steps` (`DiffTooCostly`)."""
    try:
        groups = list(_BoundedMatcher(before, after, steps).get_grouped_opcodes(3))
    except DiffTooCostly:
        return None
    lines: list[str] = []
    for group in groups:
        if not lines:
            lines += [f"--- {before_name}\n", f"+++ {after_name}\n"]
        first, last = group[0], group[-1]
        lines.append(f"@@ -{_span(first[1], last[2])} +{_span(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [" " + line for line in before[i1:i2]]
                continue
            if tag in ("replace", "delete"):
                lines += ["-" + line for line in before[i1:i2]]
            if tag in ("replace", "insert"):
                lines += ["+" + line for line in after[j1:j2]]
    return lines


def _span(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (difflib's own rule)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"
