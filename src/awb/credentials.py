"""The credentials a text may hold (bearer tokens, API keys, JWTs, private keys), masked in time linear
in the text's length.

The patterns cost 75-185 ns a character when the regex engine tries them at every position: a 20 MB
tool result held the event loop 1.5 s, a 27 MB JSON text 8 s. But each credential begins with one of a
few words (`Bearer`, `sk-`, `eyJ`, ...), which a literal search skips to at a fraction of that; the
patterns then run only where one of those begins, and mask exactly what a search from every position
would.
"""

from __future__ import annotations

import re

#: Each kind of credential: how it can begin in the text in lower case (its first letter, and what
#: follows as a lookahead: a superset of what the pattern takes, case folded) and its pattern, which
#: matches nowhere else. A private key has no beginning here: it is found by its END line.
CREDENTIALS: tuple[tuple[tuple[str, str] | None, str], ...] = (
    (("b", r"(?:earer|asic)\s+[a-z0-9._~+/=-]{8}"), r"(?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    (("s", r"k-"), r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"),
    (("g", r"h[pousr]_|ithub_pat_"), r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"),
    (("x", r"ox[abposr]-"), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (("a", r"kia"), r"\bAKIA[0-9A-Z]{16}\b"),
    (("a", r"iza"), r"\bAIza[0-9A-Za-z_-]{35}\b"),
    (("e", r"yj"), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    (None, r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)
#: What a secret is shown as, wherever a user reads it: run logs (stored with it from the start), run events,
#: planner records, provider errors.
MASK = "***"
CREDENTIAL_PATTERN = re.compile("|".join(pattern for _, pattern in CREDENTIALS))


def _scanners() -> tuple[re.Pattern[str], ...]:
    """One pattern per first letter, `a(?=kia|iza)`: the regex engine skips to that letter as fast as
    `str.find` does, and a lookahead takes no characters, so beginnings that overlap (`xoxox`) are all
    found. (A word in the lookahead also leaves out most English `basic`s and `bearer`s.)"""
    rests: dict[str, list[str]] = {}
    for beginning, _ in CREDENTIALS:
        if beginning is not None:
            rests.setdefault(beginning[0], []).append(beginning[1])
    return tuple(re.compile(f"{re.escape(first)}(?={'|'.join(rest)})") for first, rest in rests.items())


_SCANNERS = _scanners()
#: Every beginning at once, for a short text: one pass costs less there than a pass per letter.
_ANY_BEGINNING = re.compile("|".join(scanner.pattern for scanner in _SCANNERS))
#: Texts shorter than this are searched for any beginning at once; longer ones a pass per letter.
SCAN_FROM = 1024
#: Letters `re.IGNORECASE` takes for an ASCII one of `bearer`/`basic` and `str.lower` does not (and
#: `İ`, which lowers to two characters and would shift every position after it).
_ODD_FOLDS = (("ſ", "s"), ("İ", "i"), ("ı", "i"))
_PEM_BEGIN = "-----BEGIN "
_PEM_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
_JWT_START = re.compile(r"\beyJ")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]*")


def mask_credentials(text: str, mask: str) -> str:
    """`CREDENTIAL_PATTERN.sub(mask, text)`, in time linear in `len(text)`."""
    folded = text.lower() if text.isascii() else _folded(text)
    if folded is None:
        return CREDENTIAL_PATTERN.sub(mask, text)
    if len(text) < SCAN_FROM and _ANY_BEGINNING.search(folded) is None and _PEM_BEGIN not in text:
        return text  # most strings of a result: what follows costs a few microseconds more
    pieces: list[str] = []
    copied = 0  # the text before this is in `pieces`
    #: An "eyJ" before this cannot start a JWT: an earlier one in the same run of token characters did not.
    no_jwt_before = 0
    for start in _possible_starts(text, folded):
        if start < copied or (start < no_jwt_before and text.startswith("eyJ", start)):
            continue
        found = CREDENTIAL_PATTERN.match(text, start)
        if found is not None:
            pieces += (text[copied:start], mask)
            copied = found.end()
        elif text.startswith("eyJ", start) and _JWT_START.match(text, start):
            # A later "eyJ" of this run has a shorter first part ending at the same place and the same
            # rest: it fails too. Without this, a 20 MB base64url blob is searched to its end once for
            # each "eyJ" in it.
            run = _TOKEN_RUN.match(text, start)
            no_jwt_before = run.end() if run is not None else start
    if not pieces:
        return text
    pieces.append(text[copied:])
    return "".join(pieces)


def _folded(text: str) -> str | None:
    """`text` in lower case, each character where it was; None if a letter would lower to several."""
    folded = text
    for odd, letter in _ODD_FOLDS:
        if odd in folded:
            folded = folded.replace(odd, letter)
    folded = folded.lower()
    # No letter lowers to several once İ is gone; a newer Unicode might bring one.
    return folded if len(folded) == len(text) else None


def _possible_starts(text: str, folded: str) -> list[int]:
    """Every position where a credential could start, in order (and a few more: the case is folded)."""
    starts: list[int] = []
    for scanner in _SCANNERS if len(text) >= SCAN_FROM else (_ANY_BEGINNING,):
        starts += (found.start() for found in scanner.finditer(folded))
    at = text.find(_PEM_BEGIN)
    if at >= 0:
        # A private key's pattern searches on to an END line: past the last one, a BEGIN starts no key,
        # and searching the rest of the text from each of them would take time quadratic in its length.
        until = _last_pem_end(text)
        while 0 <= at < until:
            starts.append(at)
            at = text.find(_PEM_BEGIN, at + 1, until)
    starts.sort()
    return starts


def _last_pem_end(text: str) -> int:
    """Where the last line ending a private key starts, or 0."""
    at = len(text)
    while (at := text.rfind("-----END ", 0, at)) >= 0:
        if _PEM_END.match(text, at):
            return at
    return 0
