"""Mask secrets before anything is logged, put into a prompt or persisted.

Two rules: a value under a key that names a secret (`token`, `authorization`, `password`, ...) is masked
whole; any string, under any key, has the substrings that look like credentials (bearer tokens, API keys,
JWTs, private keys) masked in place.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from awb.credentials import MASK, mask_credentials
from awb.safe_copy import CopyRules, safe_copy
from awb.thread_lanes import ThreadLane

T = TypeVar("T")

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
#: Characters a record keeps in all (its strings, keys, about 8 for each other value); the values past
#: them are left out with a marker, unvisited.
RECORD_CHARS = 32_000
#: What a telemetry event keeps: a record and room for the event's own fields and the record's markers,
#: so a record inside an event (a plan's call, recorded by the runner before its event) is not cut again.
EVENT_CHARS = RECORD_CHARS + 4000
#: Characters past a record's cut that are still searched for secrets, so one straddling the cut is
#: recognised whole (a 4096-bit RSA key in PEM is about 3,300).
_SECRET_REACH = 4096
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
#: Tool results and plan results redacted (and summarised) at once in worker threads: a 20 MB text is a
#: fraction of a second of a core, 100,000 rows up to a second (mostly the walk over their values).
RESULT_THREADS = 2
_RESULTS = ThreadLane(RESULT_THREADS)


def _normalise(key: str) -> str:
    return key.lower().replace("-", "_")


def is_sensitive_key(key: str, sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS) -> bool:
    """`Authorization`, `x-api-key` and `db_password` all count: names are compared as fragments."""
    name = _normalise(key)
    return any(_normalise(fragment) in name for fragment in sensitive_keys)


def redact_text(text: str) -> str:
    """`text` with every credential in it masked (`awb.credentials`), in time linear in its length."""
    return mask_credentials(text, MASK)


def redact_payload(
    payload: Any,
    sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS,
    *,
    text: Callable[[str], str] | None = None,
    max_chars: int | None = None,
) -> Any:
    """A copy of `payload` with secrets masked; the input is never changed.

    Dicts, lists and tuples are walked; strings are scrubbed; other scalars pass as they are. The walk
    is bounded (`awb.safe_copy`): parts nested past `MAX_DEPTH`, past `MAX_VALUES` values, or that
    contain themselves are replaced by a marker, never walked. `text` scrubs each string in place of
    `redact_text` (`redact_record` cuts them first); past `max_chars` of text, values are left out.
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

    rules = CopyRules(MAX_DEPTH, MAX_VALUES, max_chars, text=text or redact_text, masked=masked, mask=MASK)
    return safe_copy(payload, rules)


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in one of the threads that redact results: a result can be tens of megabytes, and
    the event loop (other runs, the run's own deadline) goes on meanwhile."""
    return await _RESULTS.run(fn, *args)


async def redact_payload_off_loop(payload: Any) -> Any:
    """`redact_payload(payload)` in one of the threads that redact results."""
    return await off_loop(redact_payload, payload)


def redact_record(
    payload: Any, sensitive_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS, *, max_chars: int = RECORD_CHARS
) -> Any:
    """`redact_payload` for a record: each string cut to RECORD_TEXT_CHARS before its secrets are searched,
    and the record to RECORD_CHARS. A plan's tool call with 20 MB of argument text held the event loop 3 s
    per call (the credential patterns run over every character, twice: the observer's copy and the
    event's), one with 150,000 rows 1 s, and the task's events kept all of it."""
    return redact_payload(payload, sensitive_keys, text=_record_text, max_chars=max_chars)


def _record_text(text: str) -> str:
    # Room for the cut's note: a record of a record (an observed call's copy, then its event) is not cut again.
    if len(text) <= RECORD_TEXT_CHARS + 40:
        return redact_text(text)
    head = redact_text(text[: RECORD_TEXT_CHARS + _SECRET_REACH])[:RECORD_TEXT_CHARS]
    # A private key's pattern needs its END line, which may lie past the secret reach (an 8192-bit RSA
    # key is ~6,400 characters): a BEGIN line still in the head starts a key the cut hid the end of.
    unended = _KEY_BEGIN.search(head)
    if unended is not None:
        head = head[: unended.start()] + MASK
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
