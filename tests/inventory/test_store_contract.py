"""The `Store` contract, held by both stores: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.errors import LimitExceeded, NameConflict, OutputExceeded
from awb.inventory.models import CallRecord, Tool, ToolCounters, ToolMetadata, ToolVersion
from awb.inventory.store import Store
from awb.workbench import Workbench
from support import add_tool

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def make_tool(name: str, description: str = "does a thing", **fields: Any) -> Tool:
    tags = fields.pop("tags", [])
    return Tool(
        tool_id=f"tool_{name}",
        name=name,
        description=description,
        language="python",
        runtime="monty",
        code="def run(params):\n    return 1\n",
        input_schema={"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "number"}}},
        metadata=ToolMetadata(tags=tags, problem=fields.pop("problem", "")),
        **{"created_at": NOW, "updated_at": NOW, **fields},
    )


def version_two(created_at: datetime) -> ToolVersion:
    return ToolVersion(
        version=2,
        code="def run(params):\n    return 2\n",
        description="v2",
        input_schema={},
        runtime="monty",
        created_at=created_at,
    )


def test_a_tool_reads_back_exactly_as_it_was_added(store: Store) -> None:
    tool = make_tool("resize_image", "Resize an image", tags=["image", "media"], usage_count=3)
    store.add_tool(tool)
    assert store.get(tool.tool_id) == tool
    assert store.get_by_name("resize_image") == tool
    assert store.get("tool_missing") is None
    [version] = store.versions(tool.tool_id)
    assert (version.version, version.code, version.input_schema) == (1, tool.code, tool.input_schema)
    assert list(version.input_schema["properties"]) == ["z", "a"]  # key order survives


def test_two_live_tools_cannot_share_a_name_but_a_deleted_one_frees_it(store: Store) -> None:
    store.add_tool(make_tool("twin"))
    with pytest.raises(Exception):  # noqa: B017 - each engine raises its own integrity error
        store.add_tool(make_tool("twin").model_copy(update={"tool_id": "tool_twin2"}))
    store.update("tool_twin", status="deleted")
    store.add_tool(make_tool("twin").model_copy(update={"tool_id": "tool_twin3"}))
    live = store.get_by_name("twin")
    assert live is not None and live.tool_id == "tool_twin3"
    deleted = store.get_by_name("twin", include_deleted=True)
    assert deleted is not None and deleted.tool_id == "tool_twin3"
    assert store.count_active() == 1


def test_listing_puts_hot_tiers_first_then_usage_and_pages_with_a_total(store: Store) -> None:
    store.add_tool(make_tool("cold", memory_level="archived", status="archived"))
    store.add_tool(make_tool("warm", memory_level="medium_term", usage_count=6))
    store.add_tool(make_tool("hot", memory_level="long_term", usage_count=60, tags=["x"]))
    store.add_tool(make_tool("new_a", usage_count=1))
    store.add_tool(make_tool("new_b", usage_count=2))
    names = [s.name for s in store.list_summaries(limit=10)]
    assert names == ["hot", "warm", "new_b", "new_a", "cold"]
    page, total = store.page_summaries(limit=2, offset=1)
    assert ([s.name for s in page], total) == (["warm", "new_b"], 5)
    tagged, total = store.page_summaries(tag="x")
    assert ([s.name for s in tagged], total) == (["hot"], 1)
    assert [t.name for t in store.list_tools(include_archived=False, limit=10)] == ["hot", "warm", "new_b", "new_a"]
    assert [t.name for t in store.list_tools(memory_level="archived")] == ["cold"]


def test_search_ranks_name_matches_first_and_archived_tools_last(store: Store) -> None:
    store.add_tool(make_tool("convert_currency", "Convert an amount between currencies"))
    store.add_tool(make_tool("exchange_rates", "Daily rates used to convert currency amounts"))
    store.add_tool(
        make_tool("old_currency", "Convert currency the old way", memory_level="archived", status="archived")
    )
    for filler in ("weather", "translate", "hash_text", "zip_files", "parse_csv", "send_email"):
        store.add_tool(make_tool(filler, f"{filler} for you"))
    store.add_tool(make_tool("gone_currency", "convert currency"))
    store.update("tool_gone_currency", status="deleted")
    hits = store.search_summaries(["convert", "currency"], limit=10)
    names = [h.name for h in hits]
    assert names[0] == "convert_currency"
    assert names[-1] == "old_currency" and "weather" not in names and "gone_currency" not in names
    live_scores = [h.score or 0 for h in hits if h.status != "archived"]
    assert all(s > 0 for s in live_scores) and live_scores == sorted(live_scores, reverse=True)
    scored = store.search_text(["currency"], limit=10)
    assert {t.name for t, _ in scored} == {"convert_currency", "exchange_rates", "old_currency"}
    assert store.search_summaries(["nothingmatcheshere"], limit=5) == []


def test_a_call_is_recorded_with_its_counters_in_one_step(store: Store) -> None:
    store.add_tool(make_tool("counted"))
    call = CallRecord(
        call_id="call_0000000000000001", tool_id="tool_counted", version=1, at=NOW, duration_ms=2.5, ok=True
    )
    store.record_call(call)
    failed = call.model_copy(
        update={"call_id": "call_0000000000000002", "ok": False, "error_code": "timeout", "peak_memory_bytes": 3 << 20}
    )
    store.record_call(failed)
    tool = store.get("tool_counted")
    assert tool is not None
    assert (tool.usage_count, tool.success_count, tool.failure_count, tool.last_used_at) == (1, 1, 1, NOW)
    assert [(c.call_id, c.ok, c.error_code, c.peak_memory_bytes) for c in store.calls("tool_counted")] == [
        ("call_0000000000000002", False, "timeout", 3 << 20),
        ("call_0000000000000001", True, None, None),
    ]
    assert store.calls("tool_counted") == [failed, call]
    [version] = store.versions("tool_counted")
    assert (version.usage_count, version.failure_count) == (2, 1)


def test_calls_recorded_together_each_get_their_counters_and_a_bad_one_only_fails_itself(store: Store) -> None:
    store.add_tool(make_tool("grouped"))
    first = CallRecord(call_id="call_g1", tool_id="tool_grouped", version=1, at=NOW, duration_ms=1.0, ok=True)
    again = first.model_copy(update={"duration_ms": 2.0})  # the same call id: cannot be recorded twice
    failed = first.model_copy(update={"call_id": "call_g2", "ok": False, "error_code": "timeout"})
    results = store.record_calls(
        [first, again, failed], level_after=lambda level, uses: "medium_term" if uses >= 1 else level
    )
    assert isinstance(results[1], Exception)
    one, three = results[0], results[2]
    assert isinstance(one, ToolCounters) and isinstance(three, ToolCounters)
    assert (one.usage_count, one.previous_level, one.memory_level) == (1, "short_term", "medium_term")
    assert (three.usage_count, three.failure_count, three.memory_level) == (1, 1, "medium_term")
    tool = store.get("tool_grouped")
    assert tool is not None
    assert (tool.usage_count, tool.failure_count, tool.memory_level) == (1, 1, "medium_term")
    assert [c.call_id for c in store.calls("tool_grouped")] == ["call_g2", "call_g1"]


def test_calls_of_several_tools_recorded_together_read_back_as_if_recorded_one_by_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add_tool(make_tool("alpha", status="archived", memory_level="archived"))
    store.add_tool(make_tool("beta"))
    store.add_version("tool_beta", version_two(NOW))

    def one_by_one(call: CallRecord, **_: Any) -> ToolCounters:
        raise AssertionError("the group was not recorded together")

    monkeypatch.setattr(store, "record_call", one_by_one)  # the group must go in as one
    at = [NOW + timedelta(seconds=s) for s in range(6)]
    plan = [
        ("alpha", 1, True),
        ("beta", 1, False),
        ("alpha", 1, True),
        ("beta", 2, True),
        ("alpha", 1, False),
        ("beta", 1, True),
    ]
    calls = [
        CallRecord(
            call_id=f"call_t{i}",
            tool_id=f"tool_{name}",
            version=version,
            at=at[i],
            duration_ms=1.0,
            ok=ok,
            error_code=None if ok else "runtime_error",
        )
        for i, (name, version, ok) in enumerate(plan)
    ]
    results = store.record_calls(
        calls,
        level_after=lambda level, uses: (
            "medium_term" if uses >= 2 else ("short_term" if level == "archived" else level)
        ),
    )

    def counters(usage: int, successes: int, failures: int, previous: str, level: str) -> ToolCounters:
        return ToolCounters(
            usage_count=usage,
            success_count=successes,
            failure_count=failures,
            previous_level=previous,
            memory_level=level,
            status="active",
        )  # type: ignore[arg-type]

    assert results == [
        counters(1, 1, 0, "archived", "short_term"),
        counters(0, 0, 1, "short_term", "short_term"),
        counters(2, 2, 0, "short_term", "medium_term"),
        counters(1, 1, 1, "short_term", "short_term"),
        counters(2, 2, 1, "medium_term", "medium_term"),
        counters(2, 2, 1, "short_term", "medium_term"),
    ]
    alpha, beta = store.get("tool_alpha"), store.get("tool_beta")
    assert alpha is not None and beta is not None
    assert (alpha.usage_count, alpha.failure_count, alpha.memory_level, alpha.status, alpha.last_used_at) == (
        2,
        1,
        "medium_term",
        "active",
        at[2],
    )
    assert (beta.usage_count, beta.failure_count, beta.memory_level, beta.last_used_at) == (2, 1, "medium_term", at[5])
    assert [(v.version, v.usage_count, v.failure_count) for v in store.versions("tool_beta")] == [(1, 2, 1), (2, 1, 0)]
    assert [(v.usage_count, v.failure_count) for v in store.versions("tool_alpha")] == [(3, 1)]
    assert [c.call_id for c in store.calls("tool_alpha")] == ["call_t4", "call_t2", "call_t0"]
    assert store.calls("tool_beta") == [calls[5], calls[3], calls[1]]


def test_versions_accumulate_and_purge_removes_everything_about_a_tool(store: Store) -> None:
    store.add_tool(make_tool("evolving"))
    store.add_version("tool_evolving", version_two(NOW + timedelta(days=1)))
    store.update("tool_evolving", version=2, parent_version=1, description="v2")
    assert [v.version for v in store.versions("tool_evolving")] == [1, 2]
    store.update("tool_evolving", status="deleted")
    candidates = store.purge_candidates(archived_before=None, deleted=True)
    assert [t.name for t in candidates] == ["evolving"]
    assert store.delete_forever(["tool_evolving"]) == 1
    assert store.get("tool_evolving") is None and store.versions("tool_evolving") == []


def test_staged_writes_keep_their_call_and_move_through_statuses_once(store: Store) -> None:
    store.add_tool(make_tool("writer"))
    staged_id = store.stage_write("tool_writer", "/tmp/out.txt", "hello", NOW, call_id="call_00000000000000aa")
    stage: Any = store
    [write] = stage.staged_writes("pending")
    assert (write["id"], write["call_id"], write["content"]) == (staged_id, "call_00000000000000aa", "hello")
    assert stage.set_staged_status(staged_id, "applied", expected="pending") is True
    assert stage.set_staged_status(staged_id, "discarded", expected="pending") is False
    assert stage.get_staged(staged_id)["status"] == "applied"


def test_staged_writes_are_read_a_page_at_a_time_forwards_and_backwards(store: Store) -> None:
    store.add_tool(make_tool("writer"))
    ids = [store.stage_write("tool_writer", f"/tmp/out{n}.txt", "x", NOW, call_id=f"call_{n:016x}") for n in range(7)]
    stage: Any = store
    assert stage.set_staged_status(ids[2], "applied", expected="pending")

    def page(status: str | None = None, **where: int) -> list[int]:
        return [w["id"] for w in stage.staged_writes(status, **where)]

    assert page(limit=3) == ids[:3]
    assert page(after_id=ids[2], limit=3) == ids[3:6]
    assert page(after_id=ids[5], limit=3) == ids[6:]
    assert page(before_id=ids[6], limit=3) == ids[3:6]
    assert page(before_id=ids[1], limit=3) == ids[:1]
    assert page("pending", after_id=ids[0], limit=2) == [ids[1], ids[3]]
    assert page("pending", before_id=ids[4], limit=5) == [ids[0], ids[1], ids[3]]
    assert page() == ids


def test_a_page_of_staged_write_previews_reads_each_contents_first_bytes_and_whole_size(store: Store) -> None:
    """A listing's previews never load whole contents (25 writes of 4 MB each: ~100 MB a page). The head is
    cut in bytes, not by the database's text functions: SQLite's stop at a NUL character, and a content
    that hid its rest behind one would preview as short and whole."""
    from awb.sandbox import staging

    store.add_tool(make_tool("writer"))
    nul = "" if type(store).__name__.startswith("Postgres") else "\x00"  # PostgreSQL's text holds no NUL
    content = "é" * 10 + nul + "hidden after a NUL" + "x" * 5000
    staged_id = store.stage_write("tool_writer", "/tmp/out.txt", content, NOW, call_id="call_00000000000000aa")
    [cut] = staging.list_previews(store, "pending", limit=5, preview_bytes=19)  # type: ignore[arg-type]
    assert cut.head == "é" * 9  # 19 bytes end inside the 10th character: it is left out
    [preview] = staging.list_previews(store, "pending", limit=5, preview_bytes=25)  # type: ignore[arg-type]
    assert preview.id == staged_id and preview.path == "/tmp/out.txt"
    assert preview.size == len(content.encode()) and not preview.whole
    assert preview.head == "é" * 10 + (nul + "hidden")[:5]  # 20 bytes of é, then 5 more
    [short] = staging.list_previews(store, None, limit=5, preview_bytes=len(content.encode()))  # type: ignore[arg-type]
    assert short.whole and short.head == content


def test_pending_staged_writes_are_capped_in_number_per_tool_and_in_all(store: Store) -> None:
    """Empty writes pass every byte cap: without a cap on their number, a tool staging 100 a call grew
    the pending list (and each later write's cap check) without end."""
    caps = {"max_tool_bytes": 1 << 20, "max_total_bytes": 1 << 20, "max_tool_writes": 3, "max_total_writes": 5}
    stage: Any = store

    def write(tool: str, n: int) -> int:
        return store.stage_write(tool, f"/tmp/{n}.txt", "", NOW, call_id=f"call_{n:016x}", **caps)

    ids = [write("tool_one", n) for n in range(3)]
    with pytest.raises(OutputExceeded) as per_tool:
        write("tool_one", 3)
    assert per_tool.value.details["limit"] == "sandbox.max_staged_writes_per_tool"
    write("tool_two", 4)
    write("tool_two", 5)
    with pytest.raises(OutputExceeded) as in_all:
        write("tool_three", 6)
    assert in_all.value.details["limit"] == "sandbox.max_staged_writes_total"
    # Applied and discarded writes no longer count.
    assert stage.set_staged_status(ids[0], "applied", expected="pending")
    write("tool_one", 7)
    assert len(stage.staged_writes("pending")) == 5


def test_vectors_are_kept_per_model_and_leave_with_deleted_tools(store: Store) -> None:
    vectors: Any = store
    store.add_tool(make_tool("vec_a"))
    store.add_tool(make_tool("vec_b"))
    vectors.put_vector("tool_vec_a", "model-1", [1.0, 0.0])
    vectors.put_vector("tool_vec_b", "model-1", [0.0, 1.0])
    vectors.put_vector("tool_vec_b", "model-2", [0.5, 0.5])
    assert vectors.vector_model_ids() == {"model-1": 1, "model-2": 1}
    assert [r[0] for r in vectors.load_vectors("model-1")] == ["tool_vec_a"]
    store.update("tool_vec_a", status="deleted")
    assert vectors.load_vectors("model-1") == []


def test_maintainable_tools_are_the_active_short_and_medium_term_ones(store: Store) -> None:
    store.add_tool(make_tool("short"))
    store.add_tool(make_tool("medium", memory_level="medium_term"))
    store.add_tool(make_tool("long", memory_level="long_term"))
    store.add_tool(make_tool("archived", memory_level="archived", status="archived"))
    assert sorted(t.name for t in store.iter_maintainable()) == ["medium", "short"]


def test_maintenance_reads_only_the_tools_idle_past_their_tier_cut_off(store: Store) -> None:
    from datetime import UTC, datetime, timedelta

    from awb.config import MemoryConfig
    from awb.inventory.memory import MemoryPolicy

    now = datetime(2026, 6, 1, tzinfo=UTC)
    ago = {"short_fresh": 10, "short_stale": 90, "medium_fresh": 5, "medium_stale": 40}
    for name, days in ago.items():
        level = "medium_term" if name.startswith("medium") else "short_term"
        store.add_tool(make_tool(name, memory_level=level, created_at=now - timedelta(days=days)))
    # A tool used recently but created long ago is not due; its last use is what counts.
    store.add_tool(make_tool("short_used", created_at=now - timedelta(days=300), last_used_at=now))
    policy = MemoryPolicy(MemoryConfig(demotion_days_medium_to_short=30, archive_days_short=60))
    read = sorted(t.name for t in store.iter_maintainable(policy.idle_before(now)))
    assert read == ["medium_stale", "short_stale"]
    assert sorted(t.name for t in store.iter_maintainable({"short_term": policy.idle_before(now)["short_term"]})) == [
        "short_stale"
    ]


async def test_the_workbench_refuses_a_second_tool_of_the_same_name_and_past_max_tools(
    store_config: Config,
) -> None:
    config = store_config.model_copy(update={"max_tools": 2})
    async with Workbench(config, clock=ManualClock()) as workbench:
        await workbench.craft(add_tool("one"))
        with pytest.raises(NameConflict):
            await workbench.craft(add_tool("one"))
        await workbench.craft(add_tool("two"))
        with pytest.raises(LimitExceeded):
            await workbench.craft(add_tool("three"))
        result = await workbench.call("one", {"a": 2, "b": 3})
        assert (result.result, result.usage_count) == (5, 1)
        assert workbench.search("add numbers").results[0].name in ("one", "two")


def test_a_conditional_update_applies_only_while_the_expected_values_hold(store: Store) -> None:
    store.add_tool(make_tool("guarded", memory_level="medium_term", usage_count=4))
    seen = store.get("tool_guarded")
    assert seen is not None
    expected = {"memory_level": "medium_term", "usage_count": 4, "last_used_at": None, "equipped": False}
    assert store.update_if("tool_guarded", expected, memory_level="short_term") is True
    # The tier moved since it was read: a second change made from the same reading is refused.
    assert store.update_if("tool_guarded", expected, memory_level="archived", status="archived") is False
    assert store.update_if("tool_missing", {}, memory_level="archived") is False
    after = store.get("tool_guarded")
    assert after is not None and (after.memory_level, after.status) == ("short_term", "active")


def test_a_call_between_reading_and_demoting_a_tool_keeps_it_in_its_tier(store: Store) -> None:
    store.add_tool(make_tool("busy", memory_level="medium_term", usage_count=9))
    [read] = [t for t in store.iter_maintainable() if t.name == "busy"]
    later = NOW + timedelta(days=30)
    store.record_call(
        CallRecord(call_id="call_00000000000000b1", tool_id="tool_busy", version=1, at=later, duration_ms=1, ok=True)
    )
    snapshot = {
        column: getattr(read, column)
        for column in ("memory_level", "status", "last_used_at", "usage_count", "equipped")
    }
    assert store.update_if("tool_busy", snapshot, memory_level="short_term") is False
    tool = store.get("tool_busy")
    assert tool is not None and (tool.memory_level, tool.usage_count, tool.last_used_at) == ("medium_term", 10, later)


def test_blueprint_sessions_and_run_logs_live_in_the_inventorys_database(store: Store, store_config: Config) -> None:
    from awb.blueprints.journal import LogEntry
    from awb.blueprints.session_tables import open_session_store

    beside = open_session_store(store_config, inventory=store)  # on the store's own connections
    elsewhere = open_session_store(store_config)  # as another server or the CLI opens it
    try:
        beside.add_exchange("session_1", "bp_1", NOW, "What is 2 + 3?", "5")
        entry = LogEntry(at=NOW, run_id="run_1", kind="run_end", data={"ok": True})
        beside.append_logs("session_1", [entry])
        assert [(t.user, t.assistant) for t in elsewhere.history("session_1", 10)] == [("What is 2 + 3?", "5")]
        assert elsewhere.logs("session_1") == [entry]
        assert [s.session_id for s in elsewhere.sessions()] == ["session_1"]
    finally:
        beside.close()
        elsewhere.close()
    assert store.count_active() == 0  # the store still serves after the session store closed


def test_get_many_reads_the_existing_tools_of_any_status_at_once(store: Store) -> None:
    store.add_tool(make_tool("many_a"))
    store.add_tool(make_tool("many_b", status="deleted"))
    store.add_tool(make_tool("many_c"))
    assert store.get("tool_many_c") is not None  # cached by a shared store: both paths must agree
    found = store.get_many(["tool_many_c", "tool_missing", "tool_many_a", "tool_many_b", "tool_many_a"])
    assert sorted(found) == ["tool_many_a", "tool_many_b", "tool_many_c"]
    assert found["tool_many_b"].status == "deleted"
    assert found["tool_many_a"] == store.get("tool_many_a")
    assert store.get_many([]) == {}


def test_text_scores_name_the_live_matches_and_follow_a_delete(store: Store) -> None:
    ranked: Any = store
    store.add_tool(make_tool("csv_reader", "reads csv files"))
    store.add_tool(make_tool("csv_writer", "writes csv files"))
    store.add_tool(make_tool("weather", "tells the weather"))
    before = dict(ranked.text_scores(["csv"], 10))
    assert set(before) == {"tool_csv_reader", "tool_csv_writer"}
    assert all(score > 0 for score in before.values())
    store.update("tool_csv_writer", status="deleted")
    after = dict(ranked.text_scores(["csv"], 10))
    # Gone from the matches; still counted in the statistics, as a deleted row stays in the index.
    assert after == {"tool_csv_reader": before["tool_csv_reader"]}
    store.update("tool_csv_writer", status="active")
    assert dict(ranked.text_scores(["csv"], 10)) == before


def test_a_tag_filter_follows_tags_through_changes_deletes_and_purges(store: Store) -> None:
    store.add_tool(make_tool("alpha", tags=["math", "demo"]))
    store.add_tool(make_tool("beta", tags=["math"]))
    store.add_tool(make_tool("gamma", tags=["text", "math/extra", "Math"]))

    def tagged(tag: str) -> tuple[list[str], int]:
        page, total = store.page_summaries(tag=tag, limit=10)
        names = sorted(s.name for s in page)
        assert names == sorted(t.name for t in store.list_tools(tag=tag, limit=10))
        return names, total

    assert tagged("math") == (["alpha", "beta"], 2)  # exact tags: not "math/extra", not "Math"
    assert tagged("Math") == (["gamma"], 1)
    store.update("tool_beta", metadata=ToolMetadata(tags=["text"]))
    assert tagged("math") == (["alpha"], 1) and tagged("text") == (["beta", "gamma"], 2)
    store.update("tool_alpha", status="deleted")
    assert tagged("math") == ([], 0) and tagged("demo") == ([], 0)
    store.update("tool_alpha", status="active")
    assert tagged("demo") == (["alpha"], 1)
    assert store.delete_forever(["tool_alpha"]) == 1
    assert tagged("demo") == ([], 0) and tagged("math") == ([], 0)
    store.add_tool(make_tool("alpha", tags=["demo"]).model_copy(update={"tool_id": "tool_alpha2"}))
    assert tagged("demo") == (["alpha"], 1)


def test_pruning_keeps_each_tools_most_recent_calls_and_moves_no_counter(store: Store) -> None:
    for name in ("chatty", "quiet"):
        store.add_tool(make_tool(name))
    for n in range(12):
        store.record_call(
            CallRecord(call_id=f"call_c{n}", tool_id="tool_chatty", version=1, at=NOW, duration_ms=1.0, ok=n % 3 > 0)
        )
    for n in range(3):
        store.record_call(
            CallRecord(call_id=f"call_q{n}", tool_id="tool_quiet", version=1, at=NOW, duration_ms=1.0, ok=True)
        )
    assert len(store.calls("tool_chatty", limit=50)) == 12  # read (and cached) before the prune
    assert store.prune_calls(5, ["tool_chatty", "tool_quiet", "tool_unknown"]) == 7
    assert [c.call_id for c in store.calls("tool_chatty", limit=50)] == [f"call_c{n}" for n in range(11, 6, -1)]
    assert len(store.calls("tool_quiet", limit=50)) == 3
    assert store.prune_calls(5, ["tool_chatty"]) == 0  # nothing past the kept ones any more
    assert store.prune_calls(1) == 6  # every tool's history
    assert [c.call_id for c in store.calls("tool_quiet", limit=50)] == ["call_q2"]
    chatty = store.get("tool_chatty")
    assert chatty is not None
    assert (chatty.usage_count, chatty.success_count, chatty.failure_count) == (8, 8, 4)
    [version] = store.versions("tool_chatty")
    assert (version.usage_count, version.failure_count) == (12, 4)
