from __future__ import annotations

from typing import Any

import pytest

from awb.agents.toolbox import ToolSpec
from awb.planner.discovery import ToolIndex

from .planner_tools import planner_toolbox


def test_search_ranks_the_servers_tools_and_returns_the_documented_fields() -> None:
    index = ToolIndex()
    index.refresh(planner_toolbox([]).specs("tool"))
    rows = index.search("search mailbox messages", limit=5)
    assert rows[0]["server"] == "mail" and rows[0]["tool"] == "search_mail"
    assert {"server", "tool", "short_description", "parameters", "available", "mcp_tool_name", "path"} <= set(rows[0])
    assert rows[0]["parameters"] == {"query": "str", "label": "str (optional)", "limit": "int (optional)"}
    assert rows[0]["path"] == "servers.mail.search_mail"
    assert rows[0]["available"] is True
    assert "input_schema" not in rows[0]
    full = index.search("post a message to a channel", detail_level="full", limit=1)[0]
    assert (full["server"], full["tool"]) == ("chat", "post-message")
    assert full["input_schema"]["required"] == ["channel", "text"]


def test_results_are_unique_per_server_and_tool_and_bounded_by_limit() -> None:
    index = ToolIndex()
    index.refresh(planner_toolbox([]).specs("tool"))
    everything = index.search("", limit=40)
    assert [(r["server"], r["tool"]) for r in everything] == [
        ("chat", "post-message"),
        ("mail", "fail"),
        ("mail", "search_mail"),
    ]
    assert len(index.search("", limit=2)) == 2


def test_the_index_follows_a_changed_tool_list_and_ignores_an_unchanged_one() -> None:
    index = ToolIndex()
    specs = planner_toolbox([]).specs("tool")
    assert index.refresh(specs) is True
    assert index.refresh(list(reversed(specs))) is False
    version = index.version
    added = ToolSpec("calendar.book_room", "Book a meeting room.", {"type": "object", "properties": {}}, "calendar")
    assert index.refresh([*specs, added]) is True and index.version == version + 1
    assert index.search("book a meeting room", limit=1)[0]["tool"] == "book_room"
    index.refresh([added], unavailable=["calendar.book_room"])
    assert [(r["tool"], r["available"]) for r in index.search("", limit=10)] == [("book_room", False)]


def test_auto_mode_ranks_by_meaning_when_the_embed_extra_is_installed() -> None:
    index = ToolIndex(mode="auto")
    if index.mode != "hybrid":
        pytest.skip("the embed extra is not installed")
    index.refresh(planner_toolbox([]).specs("tool"))
    # No word of the query is in the tool's name or description: only the embeddings can find it.
    assert index.search("find emails", limit=1)[0]["tool"] == "search_mail"
    text_only = ToolIndex(mode="text")
    text_only.refresh(planner_toolbox([]).specs("tool"))
    assert text_only.search("find emails", limit=3) == []


def test_only_new_or_changed_tools_are_embedded_again_and_removed_ones_are_not_found() -> None:
    """Every refresh re-embedded the whole catalogue: with 1,000 tools a search after one crafted
    tool cost over a minute."""
    index = ToolIndex(mode="auto")
    if index.mode != "hybrid":
        pytest.skip("the embed extra is not installed")
    embedded: list[str] = []
    index_tools = index._search.index_tools

    def counted(tools: list[Any]) -> int:
        embedded.extend(tool.tool_id for tool in tools)
        return index_tools(tools)

    index._search.index_tools = counted  # type: ignore[method-assign]
    specs = planner_toolbox([]).specs("tool")
    index.refresh(specs)
    assert sorted(embedded) == sorted(spec.name for spec in specs)
    embedded.clear()
    added = ToolSpec("calendar.book_room", "Book a meeting room.", {"type": "object", "properties": {}}, "calendar")
    changed = ToolSpec(specs[0].name, "Something else entirely now.", specs[0].input_schema, specs[0].namespace)
    index.refresh([changed, *specs[2:], added])
    assert sorted(embedded) == sorted([added.name, changed.name])
    names = {(row["server"] + "." + row["tool"]) for row in index.search("", limit=200)}
    assert names == {changed.name, added.name, *(spec.name for spec in specs[2:])}
    assert index.search("book a meeting room", limit=1)[0]["tool"] == "book_room"
    assert all(row["tool"] != specs[1].name.partition(".")[2] for row in index.search(specs[1].description, limit=50))


def test_a_refresh_wraps_only_the_new_and_changed_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change wrapped the whole catalogue again (~0.1 s at 5,000 tools, under the index's lock)."""
    import awb.planner.discovery as discovery

    wrapped: list[str] = []
    wrapper_for = discovery.wrapper_for

    def counted(spec: ToolSpec) -> Any:
        wrapped.append(spec.name)
        return wrapper_for(spec)

    monkeypatch.setattr(discovery, "wrapper_for", counted)
    index = ToolIndex(mode="text")
    specs = planner_toolbox([]).specs("tool")
    index.refresh(specs)
    assert sorted(wrapped) == sorted(spec.name for spec in specs)
    wrapped.clear()
    schema = {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}
    added = ToolSpec("calendar.book_room", "Book a meeting room.", schema, "calendar")
    changed = ToolSpec(specs[0].name, specs[0].description, schema, specs[0].namespace)
    index.refresh([changed, *specs[1:], added])
    assert sorted(wrapped) == sorted([added.name, changed.name])
    rows = {row["server"] + "." + row["tool"]: row for row in index.search("", detail_level="full", limit=200)}
    assert rows[changed.name]["parameters"] == rows[added.name]["parameters"] == {"room": "str"}
    fresh = ToolIndex(mode="text")
    fresh.refresh([changed, *specs[1:], added])
    assert index.search("", detail_level="full", limit=200) == fresh.search("", detail_level="full", limit=200)


def test_a_refresh_fingerprints_only_the_tools_that_differ_from_those_indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every search step hashed the JSON of every tool again (~35 ms at 5,000 tools); an equal tool, read
    again from its server as a new object, keeps its fingerprint."""
    import copy

    import awb.planner.discovery as discovery

    hashed: list[str] = []
    fingerprint = discovery._fingerprint

    def counted(spec: ToolSpec) -> str:
        hashed.append(spec.name)
        return fingerprint(spec)

    monkeypatch.setattr(discovery, "_fingerprint", counted)
    index = ToolIndex(mode="text")
    specs = planner_toolbox([]).specs("tool")
    assert index.refresh(specs) is True
    hashed.clear()
    assert index.refresh(copy.deepcopy(specs)) is False
    assert hashed == []
    changed = ToolSpec(specs[0].name, "Search every mailbox.", specs[0].input_schema, specs[0].namespace)
    assert index.refresh([changed, *copy.deepcopy(specs[1:])]) is True
    assert hashed == [changed.name]
    rows = {row["server"] + "." + row["tool"]: row for row in index.search("", detail_level="full", limit=200)}
    assert rows[changed.name]["description"] == "Search every mailbox."


class CountingEmbedder:
    """Vectors from each text's letters; counts the texts it embeds."""

    model_id = "fake-letters-1"
    dim = 26

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        np = pytest.importorskip("numpy")
        self.texts.extend(texts)
        out = np.full((len(texts), self.dim), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for char in text.lower():
                if "a" <= char <= "z":
                    out[row, ord(char) - 97] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def counting_embedders(monkeypatch: pytest.MonkeyPatch) -> list[CountingEmbedder]:
    """Every embedder the planner's indexes create from now on, each a fresh `CountingEmbedder`."""
    import awb.planner.discovery as discovery

    embedders: list[CountingEmbedder] = []

    def fake_embedder(provider: str) -> tuple[Any, str]:
        embedders.append(CountingEmbedder())
        return embedders[-1], "fake"

    monkeypatch.setattr(discovery, "create_embedder", fake_embedder)
    return embedders


def test_a_second_index_over_the_same_tools_takes_every_vector_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`awb plan` embedded every tool of its servers again at every run (~110 s for 5,000 tools here)."""
    pytest.importorskip("numpy")
    from awb.search.vector_cache import VectorCache

    embedders = counting_embedders(monkeypatch)
    specs = planner_toolbox([]).specs("tool")
    first = ToolIndex(mode="hybrid", vector_cache=VectorCache(tmp_path / "v.sqlite3"))
    first.refresh(specs)
    assert len(embedders[0].texts) == 3 * len(specs)
    second = ToolIndex(mode="hybrid", vector_cache=VectorCache(tmp_path / "v.sqlite3"))
    second.refresh(specs)
    assert embedders[1].texts == []
    assert second.search("search mailbox messages", limit=3) == first.search("search mailbox messages", limit=3)
    assert embedders[1].texts == ["search mailbox messages"]  # the query alone
    added = ToolSpec("calendar.book_room", "Book a meeting room.", {"type": "object", "properties": {}}, "calendar")
    second.refresh([*specs, added])
    assert len(embedders[1].texts) == 1 + 3


@pytest.mark.anyio
async def test_the_model_is_loaded_off_the_event_loop_when_every_vector_came_from_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """With every vector from the cache nothing loaded the model before the task's first search, which
    embeds its query on the event loop: the loop waited ~1 s for the model to load."""
    pytest.importorskip("numpy")
    import threading

    import awb.planner.discovery as discovery
    from awb.search.vector_cache import VectorCache

    waited_on: list[str] = []

    class Loading(CountingEmbedder):
        def wait_loaded(self) -> None:
            waited_on.append(threading.current_thread().name)

    monkeypatch.setattr(discovery, "create_embedder", lambda provider: (Loading(), "fake"))
    specs = planner_toolbox([]).specs("tool")
    ToolIndex(mode="hybrid", vector_cache=VectorCache(tmp_path / "v.sqlite3")).refresh(specs)
    warm = ToolIndex(mode="hybrid", vector_cache=VectorCache(tmp_path / "v.sqlite3"))
    await warm.refresh_off_loop(specs)
    assert waited_on and threading.main_thread().name not in waited_on


def test_an_index_with_a_cache_does_not_load_the_model_beside_its_refresh(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Loading the model (which imports numpy) in the background while the refresh imported numpy too
    failed now and then with 'partially initialized module' (5 runs in 12 of a two-thread import here)."""
    import awb.planner.discovery as discovery
    from awb.search.vector_cache import VectorCache

    started: list[bool] = []

    class Loading(CountingEmbedder):
        def start_loading(self) -> None:
            started.append(True)

    monkeypatch.setattr(discovery, "create_embedder", lambda provider: (Loading(), "fake"))
    ToolIndex(mode="hybrid", vector_cache=VectorCache(tmp_path / "v.sqlite3"))
    assert started == []


def test_another_servers_tools_whose_names_differ_only_in_case_are_both_indexed() -> None:
    """MCP tool names are case-sensitive: an index of a server's tools keeps `Fetch` beside `fetch`, where
    the workbench's own inventory refuses such a pair."""
    index = ToolIndex()
    specs = [
        ToolSpec("web.Fetch", "Fetch a page as HTML.", {"type": "object", "properties": {}}, "web"),
        ToolSpec("web.fetch", "Fetch a page as text.", {"type": "object", "properties": {}}, "web"),
    ]
    assert index.refresh(specs) is True
    assert sorted(r["tool"] for r in index.search("", limit=10)) == ["Fetch", "fetch"]
