from __future__ import annotations

import json
from typing import Any

import pytest

from awb import redaction
from awb.blueprints import journal
from awb.redaction import (
    EVENT_CHARS,
    MASK,
    RECORD_CHARS,
    RECORD_TEXT_CHARS,
    redact_payload,
    redact_record,
    redact_text,
)
from awb.safe_copy import CYCLE


def test_values_under_secret_keys_are_masked_at_any_depth() -> None:
    payload = {
        "user": "ada",
        "Authorization": "Bearer abc.def",
        "nested": [{"db_password": "hunter2", "x-api-key": "k"}, {"refresh_token": "t", "count": 3}],
    }
    redacted = redact_payload(payload)
    assert redacted == {
        "user": "ada",
        "Authorization": MASK,
        "nested": [{"db_password": MASK, "x-api-key": MASK}, {"refresh_token": MASK, "count": 3}],
    }
    assert payload["nested"][0]["db_password"] == "hunter2"  # the input is left alone


def test_credentials_inside_free_text_are_masked_whatever_the_key() -> None:
    text = (
        "curl -H 'Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9' with sk-proj-ABCDEFGHIJKLMNOPQRSTUV "
        "and ghp_0123456789abcdefghijABCDEFGHIJ and AKIAABCDEFGHIJKLMNOP then xoxb-1234567890-abcdef"
    )
    scrubbed = redact_text(text)
    for secret in ("eyJhbGciOi", "sk-proj-ABC", "ghp_0123", "AKIAABCD", "xoxb-1234"):
        assert secret not in scrubbed
    assert scrubbed.startswith("curl -H 'Authorization: ")
    assert redact_payload({"body": text})["body"] == scrubbed


def test_custom_sensitive_keys_replace_the_default_list() -> None:
    assert redact_payload({"ssn": "123", "password": "p"}, sensitive_keys=["ssn"]) == {"ssn": MASK, "password": "p"}


def test_ordinary_words_are_not_mistaken_for_secrets() -> None:
    payload = {"subject": "Quarterly tokens of appreciation", "tokens_used": None, "amount": 12.5}
    assert redact_payload(payload) == payload


def test_a_payload_nested_past_the_walk_limit_is_cut_not_crashed() -> None:
    deep: object = "sk-ABCDEFGHIJKLMNOPQRSTUVWX"
    for _ in range(5000):
        deep = [deep]
    out = redact_payload(deep)
    for _ in range(60):
        out = out[0]
    assert "ABCDEFGH" not in str(out)


def test_token_counts_are_kept_and_tokens_themselves_are_masked() -> None:
    usage = {"input_tokens": 10, "max_tokens": 2.5, "token_count": 0, "usage": {"cache_read_tokens": 3}}
    assert redact_payload(usage) == usage
    secrets = {"token": 123456, "otp_token": 42, "access_tokens": ["abc"], "tokens_secret": 7, "id_tokens": True}
    assert redact_payload(secrets) == dict.fromkeys(secrets, MASK)


def test_a_payload_that_holds_itself_is_redacted_with_a_marker_where_it_comes_round() -> None:
    payload: dict[str, Any] = {"api_key": "k", "note": "Bearer abcdefghijkl"}
    payload["again"] = payload
    assert redact_payload(payload) == {"api_key": MASK, "note": f"{MASK}", "again": CYCLE}


@pytest.mark.timeout(30)
def test_a_payload_sharing_its_parts_is_redacted_in_bounded_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """A list holding one list twice, forty levels down, is 2**40 strings to a plain walk."""
    monkeypatch.setattr(redaction, "MAX_VALUES", 10_000, raising=False)
    shared: list[Any] = ["sk-ABCDEFGHIJKLMNOPQRSTUVWX"]
    for _ in range(40):
        shared = [shared, shared]
    text = json.dumps(redact_payload(shared))
    assert "ABCDEFGH" not in text
    assert text.count(MASK) <= 10_000
    assert "more items]" in text


def test_a_record_cuts_long_text_and_still_masks_a_secret_straddling_the_cut() -> None:
    secret = "sk-" + "A" * 40
    text = "x" * (RECORD_TEXT_CHARS - 10) + " " + secret + " " + "y" * 5_000_000
    recorded = redact_record({"text": text, "short": f"key {secret}"})
    assert recorded["short"] == f"key {MASK}"
    assert recorded["text"].startswith("x" * (RECORD_TEXT_CHARS - 10) + f" {MASK}"[:10])  # the mask may be cut too
    assert "sk-" not in recorded["text"]
    assert len(recorded["text"]) < RECORD_TEXT_CHARS + 50
    assert recorded["text"].endswith(f"… [{len(text) - RECORD_TEXT_CHARS} more characters]")
    assert redact_record(recorded) == recorded  # a record of a record is not cut again


def test_a_record_cut_inside_a_long_private_key_keeps_none_of_it() -> None:
    """A key whose END line is past the cut and the secret reach (an 8192-bit RSA key is ~6,400
    characters) was not masked: the pattern needs the END line, so the head kept its first lines."""
    body = "\n".join("MIIJQgIBADANBgkqhkiG9w0BAQEFAASCCSwwggkoAgEAAoICAQ"[: 40 + n % 24] for n in range(200))
    key = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    recorded = redact_record({"text": "the key: " + key + " and after"})
    assert "MIIJQ" not in recorded["text"] and "BEGIN RSA PRIVATE KEY" not in recorded["text"]
    assert recorded["text"].startswith(f"the key: {MASK}")
    assert recorded["text"].endswith(f"… [{len(key) + len('the key:  and after') - RECORD_TEXT_CHARS} more characters]")


def test_long_strings_at_any_depth_have_every_credential_masked() -> None:
    """Strings past SCAN_FROM are searched only where a credential can begin: at their start, their end,
    next to each other, under keys and in lists and tuples."""
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    long = "Bearer abcdefghijkl " + "lorem ipsum basic " * 1000 + "end sk-" + "A" * 30 + "AKIA" + "B" * 16 + " " + key
    payload = {"rows": [{"body": long, "more": (long, [long])}], "note": long + " xoxb-1234567890-abc"}
    redacted = redact_payload(payload)
    text = json.dumps(redacted)
    for secret in ("abcdefghijkl", "sk-AAAA", "AKIABBBB", "MIIEvQ", "xoxb-"):
        assert secret not in text
    assert text.count(MASK) == 4 * 3 + 1  # the sk- key runs on through AKIA...
    assert redacted["rows"][0]["body"] == f"{MASK} " + "lorem ipsum basic " * 1000 + f"end {MASK} {MASK}"


def test_a_record_of_many_values_keeps_record_chars_and_leaves_the_rest_unvisited() -> None:
    """A plan's call with 150,000 rows of arguments held the event loop 1 s while its record was made."""
    rows = [{"id": f"m{i}", "body": "Bearer abcdefghijkl " * 5, "token": "t"} for i in range(150_000)]
    recorded = redact_record({"rows": rows})
    text = json.dumps(recorded)
    assert len(text) < 2 * RECORD_CHARS, len(text)  # JSON's quotes and separators are not counted
    assert len(recorded["rows"]) < 1000
    assert recorded["rows"][0] == {"id": "m0", "body": f"{MASK} " * 5, "token": MASK}
    assert recorded["rows"][-1].endswith("more items]") and "abcdefghijkl" not in text


def test_a_record_inside_an_event_is_not_cut_again() -> None:
    """A plan's call is recorded by the runner, then again as its telemetry event's `request`."""
    rows = [{"id": f"m{i}", "body": "lorem ipsum " * 5} for i in range(10_000)]
    recorded = redact_record({"rows": rows})
    event = redact_record({"server": "s", "tool": "t", "request": recorded, "ok": True}, max_chars=EVENT_CHARS)
    assert event["request"] == recorded
    assert recorded["rows"][-1] == f"[cut: {10_000 - len(recorded['rows']) + 1} more items]"


def test_run_events_planner_records_and_run_logs_show_a_secret_as_the_one_mask_stored_logs_hold() -> None:
    """Run logs have always been stored with `***`; run events and planner records said `[REDACTED]`."""
    payload = {"api_key": "k", "note": "use sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "headers": {"Authorization": "x"}}
    shown = {"api_key": "***", "note": "use ***", "headers": {"Authorization": "***"}}
    assert redact_payload(payload) == shown  # run events, planner results
    assert redact_record(payload) == shown  # planner telemetry
    assert journal.redact(payload) == shown  # run logs
    assert journal.masked_as_read(shown) == shown  # a stored log reads back as it was stored
    assert MASK == "***"
