"""Working memory: bounded, trimmed oldest first, deterministic."""

from __future__ import annotations

from awb.agents.context import Context


def filled(max_chars: int) -> Context:
    context = Context("system", "the task", max_chars=max_chars)
    for i in range(10):
        context.add("tool_result", f"t{i}", {"i": i, "pad": "x" * 40})
    return context


def test_task_is_always_kept_and_oldest_observations_are_trimmed_first() -> None:
    rendered = filled(max_chars=300).render()
    assert rendered.startswith("## Task\nthe task")
    assert "(t9)" in rendered
    assert "(t0)" not in rendered
    kept, dropped = filled(max_chars=300).visible()
    assert dropped == 10 - len(kept)
    assert [o.source for o in kept] == [f"t{i}" for i in range(10 - len(kept), 10)]
    assert f"({dropped} older observations trimmed)" in rendered


def test_an_oversize_payload_is_truncated_with_a_marker() -> None:
    context = Context("system", "task", max_chars=1000)
    observation = context.add("tool_result", "big", "y" * 5000)
    assert len(observation.text) <= 500
    assert observation.text.startswith("y" * 400)
    assert observation.text.endswith("…[truncated 4532 chars]")
    assert "(big)" in context.render()


def test_trimming_is_deterministic() -> None:
    assert filled(max_chars=400).render() == filled(max_chars=400).render()


def test_empty_memory_says_so() -> None:
    assert "(empty)" in Context("s", "t").render()


def test_a_payload_json_cannot_encode_is_remembered_as_its_safe_copy() -> None:
    """A tool's result nested past the encoder's stack, or holding itself, is an observation, not a crash."""
    deep: object = "bottom"
    for _ in range(100_000):
        deep = [deep]
    loop: list[object] = ["top"]
    loop.append(loop)
    context = Context("system", "task", max_chars=100_000)
    assert "nested deeper than" in context.add("tool_result", "deep", deep).text
    assert context.add("tool_result", "loop", loop).text == '["top", "[cut: a value that contains itself]"]'
    assert context.add("tool_result", "keys", {1: "a", "b": 2}).text == '{"1": "a", "b": 2}'
