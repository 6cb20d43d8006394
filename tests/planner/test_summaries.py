from __future__ import annotations

import json
from pathlib import Path

from awb.planner.summaries import needs_summary, summarize_payload


def _messages(n: int) -> list[dict[str, object]]:
    return [
        {
            "id": f"m{i}",
            "from": f"user{i % 7}@example.com",
            "label": ["inbox", "billing", "travel"][i % 3],
            "size": 1000 + i,
            "date": f"2026-0{1 + i % 9}-1{i % 10}",
            "body": "lorem ipsum " * 40,
        }
        for i in range(n)
    ]


def test_a_wide_payload_is_summarised_within_max_chars_with_aggregates_over_every_item(tmp_path: Path) -> None:
    payload = {"total": 2000, "messages": _messages(2000)}
    assert needs_summary(payload)
    summary = summarize_payload("mail.search", payload, purpose="for_planning", max_chars=4000, storage_dir=tmp_path)
    assert len(json.dumps(summary)) <= 4000
    assert set(summary) == {
        "label",
        "original_size",
        "truncated",
        "schema",
        "sample",
        "aggregates",
        "notes",
        "storage_ref",
    }
    assert summary["original_size"]["items"] == 2000
    assert summary["truncated"] is True
    assert summary["aggregates"]["count"] == 2000
    assert summary["aggregates"]["fields"]["size"]["sum"] == sum(1000 + i for i in range(2000))
    assert summary["aggregates"]["fields"]["label"]["top"] == {"inbox": 667, "billing": 667, "travel": 666}
    assert summary["schema"]["items"]["size"] == "integer"
    assert 1 <= len(summary["sample"]) <= 3
    stored = json.loads(Path(summary["storage_ref"]).read_text())
    assert len(stored["messages"]) == 2000


def test_summaries_are_redacted_and_so_is_the_stored_copy(tmp_path: Path) -> None:
    payload = [{"user": "a", "api_key": "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ", "note": "Bearer abcdefghijkl"}] * 50
    summary = summarize_payload("keys", payload, storage_dir=tmp_path)
    text = json.dumps(summary) + Path(summary["storage_ref"]).read_text()
    assert "ABCDEFGHIJ" not in text and "abcdefghijkl" not in text


def test_a_small_payload_is_kept_whole_and_not_marked_truncated() -> None:
    payload = {"id": "m1", "subject": "hello"}
    assert not needs_summary(payload)
    summary = summarize_payload("one", payload)
    assert summary["sample"] == [payload] and summary["truncated"] is False and summary["storage_ref"] is None


def test_purpose_changes_how_much_is_sampled() -> None:
    rows = [{"n": i} for i in range(100)]
    planning = summarize_payload("rows", rows, purpose="for_planning", max_chars=100_000)
    user = summarize_payload("rows", rows, purpose="for_user", max_chars=100_000)
    debug = summarize_payload("rows", rows, purpose="for_debug", max_chars=100_000)
    assert len(planning["sample"]) < len(user["sample"]) < len(debug["sample"])
    assert any("payload type" in note for note in debug["notes"])


def test_a_huge_single_value_is_clipped_to_fit() -> None:
    summary = summarize_payload("blob", {"text": "x" * 200_000}, max_chars=1000)
    assert len(json.dumps(summary)) <= 1000
    assert summary["truncated"] is True


def test_a_payload_json_cannot_encode_is_measured_and_summarised_as_its_safe_copy() -> None:
    deep: object = "bottom"
    for _ in range(100_000):
        deep = {"a": deep}
    loop: list[object] = list(range(10))
    loop.append(loop)
    assert needs_summary(deep, 300) and not needs_summary(loop, 300)
    for payload in (deep, loop):
        summary = summarize_payload("odd", payload, max_chars=2000)
        assert len(json.dumps(summary)) <= 2000
