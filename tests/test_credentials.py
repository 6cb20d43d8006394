from __future__ import annotations

import base64
import random
import time

import pytest

from awb import credentials
from awb.credentials import CREDENTIAL_PATTERN, mask_credentials

#: Pieces of text near the edges of the patterns: credentials, their beginnings alone, words that
#: overlap (`xoxox`, `AKIAKIA`), letters re's IGNORECASE folds and str.lower does not (`ſ`, `ı`, `İ`),
#: private keys with and without their END line, word characters before a beginning (`\b`), other
#: spaces and a token's punctuation after `Bearer`, a letter that lowers to ASCII (the Kelvin sign).
PIECES = [
    "Bearer ",
    "bEaReR\t",
    "baſic ",
    "basİc  ",
    "BAſıC ",
    "BASIC\n",
    "abcdefgh",
    "abc",
    "sk-",
    "sk-proj-",
    "xsk-",
    "-sk-",
    "ABCDEFGHIJKLMNOPQRST",
    "ghp_",
    "gho_",
    "github_pat_",
    "xoxb-",
    "xoxox",
    "xoxz-",
    "AKIA",
    "AKIAKIA",
    "AKIAABCDEFGHIJKLMNOP",
    "AIza",
    "A" * 35,
    "eyJ",
    "eyJeyJ",
    ".",
    "eyJabcdefgh.",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----END FOO-----",
    "-----BEGIN PRIVATE KEY-----",
    "\n",
    " ",
    "é",
    "日本",
    "İ",
    "x" * 300,
    "_",
    "-",
    "0123456789",
    "\u3000",
    "a.b~c+d/e=",
    "\u212a" * 8,
]


@pytest.mark.parametrize("scan_from", [0, credentials.SCAN_FROM, 10**9])
def test_masking_masks_exactly_what_the_patterns_match_at_every_position(
    monkeypatch: pytest.MonkeyPatch, scan_from: int
) -> None:
    """Short texts are searched in one pass, long ones a pass per first letter: both are tried on every text."""
    monkeypatch.setattr(credentials, "SCAN_FROM", scan_from)
    chance = random.Random(7)
    for _ in range(3000):
        text = "".join(chance.choices(PIECES, k=chance.randint(1, 120)))
        assert mask_credentials(text, "[R]") == CREDENTIAL_PATTERN.sub("[R]", text), text


def test_every_kind_of_credential_is_masked_anywhere_in_a_long_text() -> None:
    secrets = [
        "Bearer abcdefgh.ijk",
        "basic dXNlcjpwYXNzd29yZA==",
        "sk-ant-" + "a" * 20,
        "ghs_" + "b" * 24,
        "github_pat_" + "c" * 30,
        "xoxp-1234567890-abc",
        "AKIA" + "Z" * 16,
        "AIza" + "d" * 35,
        "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2Q",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----",
    ]
    filler = "lorem ipsum dolor " * 20_000
    text = filler.join(f" {secret} " for secret in secrets) + secrets[0]
    masked = mask_credentials(text, "[R]")
    assert masked == CREDENTIAL_PATTERN.sub("[R]", text)
    assert masked.count("[R]") == len(secrets) + 1
    for secret in secrets:
        assert secret[:10] not in masked


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        # Each "eyJ" of a run of token characters starts a JWT that its pattern searches to the run's end.
        pytest.param(
            base64.urlsafe_b64encode(random.Random(1).randbytes(3_000_000)).decode().replace("sk-", "sk_"),
            id="base64url",
        ),
        pytest.param("-eyJ" * 1_000_000, id="eyJ-run"),
        # Each BEGIN without an END searches the rest of the text for one.
        pytest.param(
            "-----BEGIN RSA PRIVATE KEY-----\n" * 120_000 + "-----END RSA KEY-----", id="private-keys-without-end"
        ),
    ],
)
def test_texts_that_make_a_pattern_search_to_their_end_from_many_places_are_masked_in_linear_time(text: str) -> None:
    """Searching from every position took time quadratic in these texts' length: 6 s for 100 KB of the
    second, hours for these 4 MB. The bound only has to tell linear from quadratic: each takes < 1 s,
    1.5 s with 8 busy loops on a 2-core machine, and the quadratic search hours."""
    started = time.perf_counter()
    masked = mask_credentials(text, "[R]")
    assert time.perf_counter() - started < 30
    assert masked == text
