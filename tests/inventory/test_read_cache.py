"""The PostgreSQL store's read cache keeps a called tool warm with the counters its call statement read
back, and never lets an answer that arrives late move a counter back."""

from __future__ import annotations

from datetime import UTC, datetime

from awb.inventory.models import Tool
from awb.inventory.read_cache import ReadCache


def tool(usage: int = 0, failures: int = 0) -> Tool:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Tool(
        tool_id="tool_1",
        name="adder",
        description="adds",
        language="python",
        runtime="monty",
        code="def run(params):\n    return 1\n",
        input_schema={"type": "object"},
        created_at=now,
        updated_at=now,
        usage_count=usage,
        failure_count=failures,
    )


def counters(usage: int, failures: int = 0, level: str = "short_term") -> dict[str, object]:
    return {"usage_count": usage, "success_count": usage, "failure_count": failures, "memory_level": level}


def test_a_call_updates_the_cached_record_and_drops_what_it_made_stale() -> None:
    cache = ReadCache()
    cache.put_tool(cache.generation(), "tool_1", tool(usage=4))
    cache.put(cache.generation(), cache.calls, "tool_1", (20, ["old call list"]))
    before = cache.generation()
    cache.counted("tool_1", counters(5, level="medium_term"))
    cached = cache.tools["tool_1"]
    assert (cached.usage_count, cached.success_count, cached.memory_level) == (5, 5, "medium_term")
    assert cache.tool_named("adder") is cached
    assert "tool_1" not in cache.calls
    # Its counters may trail another server's call: an inspection reads it again.
    assert "tool_1" in cache.warmed
    # A read that began before the call must not put its older copy back.
    cache.put_tool(before, "tool_1", tool(usage=4))
    assert cache.tools["tool_1"].usage_count == 5


def test_an_answer_older_than_the_cached_counters_drops_the_record() -> None:
    cache = ReadCache()
    cache.put_tool(cache.generation(), "tool_1", tool(usage=7, failures=1))
    cache.counted("tool_1", counters(6, failures=1))
    assert "tool_1" not in cache.tools and cache.tool_named("adder") is None
    assert "tool_1" not in cache.warmed


def test_an_uncached_tool_stays_uncached() -> None:
    cache = ReadCache()
    cache.counted("tool_1", counters(1))
    assert "tool_1" not in cache.tools


def test_a_field_write_updates_the_cached_record_and_a_delete_frees_its_name() -> None:
    cache = ReadCache()
    cache.put_tool(cache.generation(), "tool_1", tool())
    cache.counts["live"] = 1
    cache.updated("tool_1", {"equipped": True})
    assert cache.tools["tool_1"].equipped and cache.counts == {}
    cache.updated("tool_1", {"status": "deleted", "equipped": False})
    assert cache.tools["tool_1"].status == "deleted" and cache.tool_named("adder") is None
    cache.updated("tool_1", {"name": "renamed"})
    assert "tool_1" not in cache.tools
