"""A run's log: what it keeps of the values an agent or a tool sent (masked, bounded)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from awb.blueprints.journal import SUMMARY_CHARS, redact, summarize
from awb.safe_copy import CYCLE


def nested(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def test_redacting_a_value_nested_thousands_deep_cuts_it_with_a_marker() -> None:
    text = json.dumps(redact(nested(5000, "tvly-abc"), ("tvly-abc",)))
    assert "nested deeper than" in text and "tvly-abc" not in text


def test_redacting_or_summarising_a_value_that_holds_itself_is_safe() -> None:
    value: dict[str, Any] = {"query": "tvly-abc", "api_key": "k"}
    value["self"] = value
    assert redact(value, ("tvly-abc",)) == {"query": "***", "api_key": "***", "self": CYCLE}
    summary = summarize(value, ("tvly-abc",))
    assert "tvly-abc" not in summary and CYCLE in summary


@pytest.mark.timeout(30)
def test_a_value_sharing_its_parts_is_redacted_and_summarised_in_bounded_work() -> None:
    shared: list[Any] = ["leaf"]
    for _ in range(40):
        shared = [shared, shared]
    assert len(summarize(shared)) <= SUMMARY_CHARS
    assert "past the first" in json.dumps(redact(shared))


def test_a_summary_of_a_deep_or_huge_output_is_short_and_masked() -> None:
    assert len(summarize(nested(5000))) <= SUMMARY_CHARS
    huge = {"api_key": "k", "text": "tvly-abc " + "y" * 5_000_000}
    summary = summarize(huge, ("tvly-abc",))
    assert len(summary) <= SUMMARY_CHARS and "tvly-abc" not in summary and '"api_key": "***"' in summary
