"""The model's tokenizer for a process that embeds a query or two: built in a millisecond for the texts
it will split, where the whole one takes ~20 ms to load (its 30,522 word pieces parsed and hashed).

WordPiece looks a word's pieces up by their text alone: a tokenizer whose vocabulary holds every word
piece that occurs in a text (as a substring of one of its words, and after `##`) splits that text into
the very ids the whole one does. Every other part (normaliser, pre-tokeniser, special tokens, template)
is the shipped file's. The pieces are found by bisection in a sorted list of them, written once (in
`~/.cache/awb/tokenizers/`, beside the model cache) by the first process that loads the whole tokenizer.
An entry is named by the tokenizer file's content, so the few there are (one per tokenizer) are kept.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from awb.search.cache_home import cache_home

#: Bumped when what a cached list holds changes: older ones are then never read.
FORMAT = 1
PIECES = "pieces.txt"
SKELETON = "tokenizer.json"
#: Substrings looked up for one set of texts, at most; past it the whole tokenizer is quicker.
MAX_LOOKUPS = 20_000


class QueryTokenizers:
    """Tokenizers cut to given texts, from the cached list of one tokenizer file's word pieces."""

    def __init__(self, skeleton: dict[str, Any], pieces: list[str], longest: int) -> None:
        self._skeleton, self._pieces, self._longest = skeleton, pieces, longest
        self._kept = [t["content"] for t in skeleton.get("added_tokens", [])] + [skeleton["model"]["unk_token"]]

    def for_texts(self, texts: Sequence[str]) -> Any | None:
        """A tokenizer that splits `texts` exactly as the whole one, or None (texts too long for it)."""
        from tokenizers import Tokenizer

        empty = Tokenizer.from_str(json.dumps(self._skeleton))
        if empty.normalizer is None or empty.pre_tokenizer is None:
            return None
        words = [
            word
            for text in texts
            for word, _ in empty.pre_tokenizer.pre_tokenize_str(empty.normalizer.normalize_str(text))
        ]
        if sum(len(word) * min(len(word), self._longest) for word in words) * 2 > MAX_LOOKUPS:
            return None
        vocab: dict[str, int] = {}
        for piece in self._kept:
            self._look_up(piece, vocab)
        for word in words:
            for start in range(len(word)):
                for end in range(start + 1, min(len(word), start + self._longest) + 1):
                    self._look_up(word[start:end], vocab)
                    self._look_up("##" + word[start:end], vocab)
        skeleton = {**self._skeleton, "model": {**self._skeleton["model"], "vocab": vocab}}
        return Tokenizer.from_str(json.dumps(skeleton))

    def _look_up(self, piece: str, vocab: dict[str, int]) -> None:
        line = piece + "\t"
        at = bisect.bisect_left(self._pieces, line)
        if at < len(self._pieces) and self._pieces[at].startswith(line):
            vocab[piece] = int(self._pieces[at][len(line) :])


def _entry(tokenizer_file: Path) -> Path | None:
    """The cache folder of the tokenizer, named by what the file holds (~0.5 ms to hash): every install of
    awb on the machine with the same tokenizer shares one, and an edited file gets another."""
    try:
        root = cache_home() / "tokenizers"
    except RuntimeError:  # Path.home() without HOME or a passwd entry
        return None
    digest = hashlib.sha256(f"format {FORMAT}\n".encode() + tokenizer_file.read_bytes()).hexdigest()
    return root / f"tokenizer-{digest[:20]}"


def cached_query_tokenizers(tokenizer_file: Path) -> QueryTokenizers | None:
    """The cached word pieces of `tokenizer_file`, or None (not cached yet, or not readable)."""
    try:
        entry = _entry(tokenizer_file)
        if entry is None:
            return None
        skeleton = json.loads((entry / SKELETON).read_text(encoding="utf-8"))
        lines = (entry / PIECES).read_text(encoding="utf-8").split("\n")
    except (OSError, ValueError):
        return None
    try:
        longest, count = map(int, lines[0].split())
    except ValueError:
        return None
    if lines[-1] != "" or len(lines) - 2 != count:
        return None  # damaged (it is written whole, by a rename): the whole tokenizer is loaded instead
    return QueryTokenizers(skeleton, lines[1:-1], longest)


def save_query_tokenizers(tokenizer_file: Path) -> None:
    """Write the sorted word pieces of `tokenizer_file` into the cache (best effort: a cache that cannot
    be written leaves the whole tokenizer to load next time)."""
    try:
        entry = _entry(tokenizer_file)
        if entry is None or entry.exists():
            return
        whole = json.loads(tokenizer_file.read_text(encoding="utf-8"))
        model = whole["model"]
        vocab: dict[str, int] = model["vocab"]
        if model.get("type") != "WordPiece" or any("\t" in p or "\n" in p or p < "\t" for p in vocab):
            return  # what this cache knows how to cut (BERT's), with pieces a line can hold
        skeleton = {**whole, "model": {**model, "vocab": {}}}
        pieces = sorted(f"{piece}\t{i}" for piece, i in vocab.items())
        lines = [f"{max(map(len, vocab))} {len(pieces)}", *pieces, ""]
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=entry.parent))
    except (OSError, ValueError, KeyError, TypeError):
        return
    try:
        (staging / SKELETON).write_text(json.dumps(skeleton), encoding="utf-8")
        (staging / PIECES).write_text("\n".join(lines), encoding="utf-8")
        staging.rename(entry)  # whole or not at all; another process that wrote it first keeps its own
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)


__all__ = ["QueryTokenizers", "cached_query_tokenizers", "save_query_tokenizers"]
