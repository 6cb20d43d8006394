"""A failed tool's message, whatever the tool sent."""

from __future__ import annotations

from awb.agents.toolbox import ToolOutcome


def test_a_failures_message_is_read_from_json_nested_past_the_decoders_stack_without_raising() -> None:
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    assert ToolOutcome(ok=False, payload=deep).message() == deep[:1000]


def test_a_failures_message_is_written_from_a_payload_that_holds_itself() -> None:
    loop: list[object] = ["failed"]
    loop.append(loop)
    assert ToolOutcome(ok=False, payload=loop).message() == '["failed", "[cut: a value that contains itself]"]'
