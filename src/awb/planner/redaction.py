"""Mask secrets before anything is logged, put into a prompt or persisted.

Two rules: a value under a key that names a secret (`token`, `authorization`, `password`, ...) is masked
whole; any string, under any key, has the substrings that look like credentials (bearer tokens, API keys,
JWTs, private keys) masked in place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from awb.safe_copy import CopyRules, safe_copy

MASK = "[REDACTED]"
DEFAULT_SENSITIVE_KEYS: tuple[str, ...] = (
    "token",
    "authorization",
    "password",
    "passwd",
    "api_key",
    "apikey",
    "secret",
    "cookie",
    "private_key",
    "credential",
)
#: Deeper than this, a payload is cut rather than walked: redaction must never be a stack overflow.
MAX_DEPTH = 64
#: Values one redaction visits at most (a 1 MB JSON result holds at most about half a million), so a
#: value that shares its parts (a list holding itself twice, forty levels down) costs no more than this.
MAX_VALUES = 1_000_000
#: A string of a record (a telemetry event, a bridged call's observer) keeps this many characters.
RECORD_TEXT_CHARS = 2000
#: Characters past a record's cut that are still searched for secrets, so one straddling the cut is
#: recognised whole (a 4096-bit RSA key in PEM is about 3,300).
_SECRET_REACH = 4096

_CREDENTIAL_PATTERNS = re.compile(
    "|".join(
        (
            r"(?i:bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}",
            r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}",
            r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\bAIza[0-9A-Za-z_-]{35}\b",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        )
    )
)


def _normalise(key: str) -> str:
    return key.lower().replace("-", "_")


def is_sensitive_key(key: str, sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS) -> bool:
    """`Authorization`, `x-api-key` and `db_password` all count: names are compared as fragments."""
    name = _normalise(key)
    return any(_normalise(fragment) in name for fragment in sensitive_keys)


def redact_text(text: str) -> str:
    return _CREDENTIAL_PATTERNS.sub(MASK, text)


def redact_payload(
    payload: Any, sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS, *, text: Callable[[str], str] | None = None
) -> Any:
    """A copy of `payload` with secrets masked; the input is never changed.

    Dicts, lists and tuples are walked; strings are scrubbed; other scalars pass as they are. The walk
    is bounded (`awb.safe_copy`): parts nested past `MAX_DEPTH`, past `MAX_VALUES` values, or that
    contain themselves are replaced by a marker, never walked. `text` scrubs each string in place of
    `redact_text` (`redact_record` cuts them first).
    """
    keys = tuple(sensitive_keys)
    #: Whether each key met is sensitive: rows of a result repeat the same few keys.
    sensitive: dict[str, bool] = {}

    def masked(key: object, value: object) -> bool:
        if not isinstance(key, str) or value is None:
            return False
        known = sensitive.get(key)
        if known is None:
            known = sensitive[key] = is_sensitive_key(key, keys)
        return known and not _a_count(key, value, keys)

    rules = CopyRules(MAX_DEPTH, MAX_VALUES, text=text or redact_text, masked=masked, mask=MASK)
    return safe_copy(payload, rules)


def redact_record(payload: Any, sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS) -> Any:
    """`redact_payload` for a record: each string cut to RECORD_TEXT_CHARS before its secrets are searched.
    A plan's tool call with 20 MB of argument text held the event loop 3 s per call (the credential
    patterns run over every character, twice: the observer's copy and the event's), and the task's
    events kept the whole text."""
    return redact_payload(payload, sensitive_keys, text=_record_text)


def _record_text(text: str) -> str:
    # Room for the cut's note: a record of a record (an observed call's copy, then its event) is not cut again.
    if len(text) <= RECORD_TEXT_CHARS + 40:
        return redact_text(text)
    head = redact_text(text[: RECORD_TEXT_CHARS + _SECRET_REACH])[:RECORD_TEXT_CHARS]
    return f"{head}… [{len(text) - RECORD_TEXT_CHARS} more characters]"


def _a_count(key: str, value: Any, keys: tuple[str, ...]) -> bool:
    """A number under a key that counts tokens and names nothing else secret (`input_tokens`,
    `max_tokens`, `token_count`): usage figures, kept. `token` or `otp_token` may hold a numeric code."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    name = _normalise(key)
    if "tokens" not in name.split("_") and "token_count" not in name:
        return False
    return all(_normalise(fragment) == "token" for fragment in keys if _normalise(fragment) in name)
