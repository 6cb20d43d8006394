"""The panel's pages and actions over HTTP (in-process ASGI): what a person sees and what each button does."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.clock import ManualClock
from awb.config import Config, SearchConfig
from awb.errors import ExecutionError, InvalidParams
from awb.web import create_panel
from awb.workbench import Workbench
from support import ORIGIN, add_tool

pytestmark = pytest.mark.anyio

POST = {"Origin": ORIGIN}


def rows(html: str) -> list[str]:
    """The tool names of the Active Tools list, in order."""
    return re.findall(r'<tr data-tool="([^"]+)">', html)


async def test_the_list_shows_each_live_tool_with_its_runtime_version_status_tier_and_counts(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder", runtime="monty"))
    await workbench.craft(add_tool("jsadder", language="javascript", code="function run(p) { return p.a + p.b; }"))
    await workbench.call("adder", {"a": 1, "b": 2})
    with pytest.raises(InvalidParams):
        await workbench.call("jsadder", {"a": 1})  # fails the input schema: no call record
    await workbench.update("jsadder", code="function run(p) { throw new Error('boom'); }", examples=[])
    with pytest.raises(ExecutionError):
        await workbench.call("jsadder", {"a": 1, "b": 2})
    page = await client.get("/")
    assert page.status_code == 200
    html = page.text
    assert sorted(rows(html)) == ["adder", "jsadder"]
    assert "adder v1" in html and "jsadder v2" in html
    assert 'class="badge rt-monty">Python · Monty' in html
    assert 'class="badge rt-javascript">JS' in html
    adder = html[html.index('data-tool="adder"') :].split("</tr>")[0]
    assert "st-ready" in adder and "short-term" in adder and "1 / 1" in adder
    jsadder = html[html.index('data-tool="jsadder"') :].split("</tr>")[0]
    assert "st-failing" in jsadder and "runtime_error" in jsadder and "0 / 1" in jsadder


@pytest.mark.parametrize(("style", "craft"), [("underscore", "awb_craft"), ("dotted", "awb.craft")])
async def test_an_empty_list_names_the_craft_meta_tool_as_the_server_serves_it(
    config: Config, style: str, craft: str
) -> None:
    async with Workbench(config.model_copy(update={"tool_names": style})) as workbench:
        panel = create_panel(workbench)
        try:
            transport = httpx.ASGITransport(app=panel)
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                html = (await client.get("/")).text
        finally:
            panel.close()
    assert f"an agent crafts them with <code>{craft}</code>" in html


async def test_filters_narrow_the_list_by_runtime_tier_and_tag(workbench: Workbench, client: httpx.AsyncClient) -> None:
    await workbench.craft(add_tool("adder", runtime="monty", tags=["math"]))
    await workbench.craft(
        add_tool("jsadder", language="javascript", code="function run(p) { return p.a + p.b; }", tags=["js"])
    )
    assert rows((await client.get("/", params={"runtime": "javascript"})).text) == ["jsadder"]
    assert rows((await client.get("/", params={"tag": "math"})).text) == ["adder"]
    assert rows((await client.get("/", params={"tier": "long_term"})).text) == []
    assert sorted(rows((await client.get("/", params={"tier": "short_term"})).text)) == ["adder", "jsadder"]
    # An unknown filter value is no filter, never an error page.
    assert len(rows((await client.get("/", params={"runtime": "cobol", "sort": "x"})).text)) == 2


async def test_sorting_by_name_use_and_last_call(
    workbench: Workbench, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    for name in ("zeta", "alpha", "mid"):
        await workbench.craft(add_tool(name, description=f"Add two numbers, flavour {name}"))
    for _ in range(2):
        await workbench.call("mid", {"a": 1, "b": 1})
    assert rows((await client.get("/", params={"sort": "name"})).text) == ["alpha", "mid", "zeta"]
    assert rows((await client.get("/", params={"sort": "usage"})).text)[0] == "mid"
    clock.advance(seconds=60)
    await workbench.call("zeta", {"a": 1, "b": 1})
    assert rows((await client.get("/", params={"sort": "last_call"})).text) == ["zeta", "mid", "alpha"]


async def test_the_search_box_uses_the_workbench_search(workbench: Workbench, client: httpx.AsyncClient) -> None:
    await workbench.craft(add_tool("adder"))
    await workbench.craft(
        {
            "name": "shout",
            "description": "Turn text into upper case letters",
            "code": "def run(params):\n    return params['text'].upper()\n",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            "examples": [{"params": {"text": "a"}, "expected": "A"}],
        }
    )
    html = (await client.get("/", params={"q": "upper case text"})).text
    # A list filtered by a query shows its matches, as awb_list does: not the adder, in either mode.
    expected = [s.name for s in workbench.search("upper case text", limit=500, matches_only=True).results]
    assert rows(html) == expected == ["shout"]
    assert "Search (" in html


async def test_inspect_shows_highlighted_code_schemas_examples_versions_and_the_diff(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    tool = await workbench.craft(add_tool("adder"))
    await workbench.update("adder", code="def run(params):\n    total = params['a'] + params['b']\n    return total\n")
    html = (await client.get(f"/tools/{tool.tool_id}")).text
    assert "adder v2" in html
    assert 'class="code"' in html and '<span class="k">def</span>' in html  # Pygments, server-side
    assert "v1" in html and "Roll back to v1" in html
    assert "Changes from v1 to v2" in html and "total" in html
    assert "&quot;required&quot;" in html or '"required"' in html  # the input schema, as JSON
    assert "expected" in html  # the examples
    older = (await client.get("/tools/adder", params={"version": 1})).text
    assert "version 1, not current" in older
    assert "Changes from" not in older  # v1 has no previous version


async def test_inspect_lists_recent_calls_with_their_errors(workbench: Workbench, client: httpx.AsyncClient) -> None:
    await workbench.craft(
        add_tool(
            "divider",
            code="def run(params):\n    return params['a'] / params['b']\n",
            examples=[{"params": {"a": 6, "b": 2}, "expected": 3}],
        )
    )
    await workbench.call("divider", {"a": 4, "b": 2})
    with pytest.raises(ExecutionError):
        await workbench.call("divider", {"a": 1, "b": 0})
    html = (await client.get("/tools/divider")).text
    calls = html[html.index('id="calls"') :]
    assert calls.count("<tr>") == 3  # header + two calls
    assert "1 failed" in html and "runtime_error" in calls


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "def run(params):\n    block = 'x' * (params['mb'] * 1024 * 1024)\n    return len(block)\n"),
        ("javascript", "function run(p) { const b = new Uint8Array(p.mb * 1048576); b.fill(1); return b.length; }"),
    ],
)
async def test_the_list_and_inspect_show_the_memory_the_last_call_used(
    workbench: Workbench, client: httpx.AsyncClient, language: str, code: str
) -> None:
    await workbench.craft(
        add_tool(
            "block_maker",
            language=language,
            code=code,
            input_schema={"type": "object", "properties": {"mb": {"type": "integer"}}},
            examples=[{"params": {"mb": 1}, "expected": 1048576}],
        )
    )
    await workbench.call("block_maker", {"mb": 40})
    html = (await client.get("/")).text
    row = html[html.index('data-tool="block_maker"') :].split("</tr>")[0]
    [listed] = re.findall(r'data-label="Memory">([\d.]+) MiB<', row)
    assert 36 <= float(listed) < 64, row
    page = (await client.get("/tools/block_maker")).text
    calls = page[page.index('id="calls"') :]
    assert re.findall(r"<td>([\d.]+) MiB</td>", calls) == [listed]


async def test_rollback_from_the_versions_view_makes_the_older_version_current(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    await workbench.update("adder", description="Add two numbers, second edition")
    done = await client.post("/tools/adder/rollback", data={"version": "1"}, headers=POST)
    assert done.status_code == 303
    assert workbench.resolve("adder").description == "Add two numbers and return the sum"
    page = await client.get(done.headers["location"])
    assert "Rolled back: adder v1 is current." in page.text


async def test_equip_and_unequip_from_the_list(workbench: Workbench, client: httpx.AsyncClient) -> None:
    tool = await workbench.craft(add_tool("adder"))
    done = await client.post(f"/tools/{tool.tool_id}/equip", data={"return_to": "/"}, headers=POST)
    assert done.status_code == 303 and done.headers["location"].startswith("/?done=equipped")
    assert workbench.resolve("adder").equipped
    assert "Unequip adder" in (await client.get("/")).text
    await client.post(f"/tools/{tool.tool_id}/unequip", data={"return_to": "/"}, headers=POST)
    assert not workbench.resolve("adder").equipped


async def test_an_equip_refusal_names_the_call_as_an_mcp_client_reaches_it_not_as_if_the_panel_served_it(
    workbench: Workbench, client: httpx.AsyncClient, clock: ManualClock
) -> None:
    # A root combinator is callable but cannot be an MCP tool of its own; an archived tool needs a call first.
    either = {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    await workbench.craft({**add_tool("picker"), "input_schema": either, "examples": []})
    refused = await client.post("/tools/picker/equip", data={"return_to": "/"}, headers=POST)
    assert refused.status_code == 409, refused.text
    assert "It stays callable with awb_call over MCP; to equip it" in refused.text
    assert "callable with awb_call;" not in refused.text
    clock.advance(days=workbench.config.memory.archive_days_short + 1)
    workbench.maintain()
    archived = await client.post("/tools/picker/equip", data={"return_to": "/"}, headers=POST)
    assert "is archived; call it once (awb_call over MCP) to bring it back" in archived.text


async def test_delete_asks_first_then_removes_the_tool(workbench: Workbench, client: httpx.AsyncClient) -> None:
    tool = await workbench.craft(add_tool("adder"))
    confirm = await client.get(f"/tools/{tool.tool_id}/delete")
    assert "Delete adder v1?" in confirm.text
    assert workbench.resolve("adder").status == "active"  # asking deleted nothing
    done = await client.post(f"/tools/{tool.tool_id}/delete", headers=POST)
    assert done.status_code == 303
    assert workbench.store.get_by_name("adder") is None
    assert rows((await client.get(done.headers["location"])).text) == []


async def test_a_change_of_a_missing_tool_answers_with_its_error_code(client: httpx.AsyncClient) -> None:
    answer = await client.post("/tools/nothing_here/delete", headers=POST)
    assert answer.status_code == 404
    assert "tool_not_found" in answer.text
    assert (await client.get("/tools/nothing_here")).status_code == 404


async def staged(workbench: Workbench, note_writer: dict[str, Any], path: Path, text: str) -> None:
    if workbench.store.get_by_name("note_writer") is None:
        await workbench.craft(note_writer)
    await workbench.call("note_writer", {"path": str(path), "text": text})


async def test_staged_writes_show_a_diff_against_the_current_file_and_apply_writes_it(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "todo.txt"
    target.write_text("buy milk\n")
    await staged(workbench, note_writer, target, "buy milk\nbuy bread\n")
    html = (await client.get("/staged")).text
    assert str(target) in html and "changes an existing file" in html
    assert '<span class="gi">+buy bread</span>' in html  # the added line, highlighted as a diff
    [write] = workbench.store.staged_writes("pending")
    done = await client.post(f"/staged/{write['id']}/apply", headers=POST)
    assert done.status_code == 303
    assert target.read_text() == "buy milk\nbuy bread\n"
    assert "Applied: wrote" in (await client.get(done.headers["location"])).text
    again = await client.post(f"/staged/{write['id']}/apply", headers=POST)
    assert again.status_code == 422 and "not pending" in again.text


async def test_the_panel_refuses_to_apply_a_write_whose_grant_was_revoked(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    # The panel checked the tool's stored record, which keeps a grant the configuration has since revoked.
    target = notes / "todo.txt"
    await staged(workbench, note_writer, target, "written after all\n")
    workbench.config.sandbox.grants = {}
    [write] = workbench.store.staged_writes("pending")
    refused = await client.post(f"/staged/{write['id']}/apply", headers=POST)
    assert refused.status_code == 422 and "outside the granted directories" in refused.text
    assert not target.exists()


async def test_discard_drops_a_staged_write_and_writes_nothing(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "new.txt"
    await staged(workbench, note_writer, target, "draft\n")
    assert "a new file" in (await client.get("/staged")).text
    [write] = workbench.store.staged_writes("pending")
    done = await client.post(f"/staged/{write['id']}/discard", headers=POST)
    assert done.status_code == 303
    assert not target.exists()
    assert workbench.store.staged_writes("pending") == []
    assert "No pending staged writes." in (await client.get("/staged")).text
    assert str(target) in (await client.get("/staged", params={"status": "discarded"})).text


async def test_the_staged_page_shows_one_page_at_a_time_with_next_and_previous_links(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    """Applied and discarded writes are kept for good: `?status=all` must not load (and diff) them all."""
    from awb.web.views import STAGED_PAGE

    await staged(workbench, note_writer, notes / "f000.txt", "x")
    tool = workbench.resolve("note_writer")
    at = datetime.fromisoformat(workbench.store.staged_writes()[0]["created_at"])
    for n in range(1, 2 * STAGED_PAGE + 5):
        workbench.store.stage_write(tool.tool_id, str(notes / f"f{n:03}.txt"), "x", at, call_id=f"call_{n:016x}")

    def shown(html: str) -> list[str]:
        return re.findall(r"<code>[^<]*/(f\d{3})\.txt</code>", html)

    def link(html: str, rel: str) -> str | None:
        found = re.findall(rf'<a href="([^"]*)" rel="{rel}">', html)
        return found[0].replace("&amp;", "&") if found else None

    first = (await client.get("/staged", params={"status": "all"})).text
    assert shown(first) == [f"f{n:03}" for n in range(STAGED_PAGE)]
    assert link(first, "prev") is None
    second_url = link(first, "next")
    assert second_url is not None and "status=all" in second_url
    second = (await client.get(second_url)).text
    assert shown(second) == [f"f{n:03}" for n in range(STAGED_PAGE, 2 * STAGED_PAGE)]
    third = (await client.get(link(second, "next") or "")).text
    assert shown(third) == [f"f{n:03}" for n in range(2 * STAGED_PAGE, 2 * STAGED_PAGE + 5)]
    assert link(third, "next") is None
    back = (await client.get(link(third, "prev") or "")).text
    assert shown(back) == shown(second)
    assert shown((await client.get(link(back, "prev") or "")).text) == shown(first)


async def test_agent_runs_are_listed_per_session_with_their_logs(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await _runs_are_listed(workbench, client)


async def test_agent_runs_in_a_postgres_inventory_are_listed_by_the_panel_of_any_server(
    config: Config, clean_pg_url: str
) -> None:
    shared = config.model_copy(update={"inventory_url": clean_pg_url, "search": SearchConfig(mode="text")})
    async with Workbench(shared) as workbench:
        panel = create_panel(workbench)
        try:
            transport = httpx.ASGITransport(app=panel)
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                await _runs_are_listed(workbench, client)
        finally:
            panel.close()


async def _runs_are_listed(workbench: Workbench, client: httpx.AsyncClient) -> None:
    from awb.blueprints.journal import LogEntry
    from awb.blueprints.session_tables import open_session_store

    store = open_session_store(workbench.config)  # the blueprint runtime of this or another process
    now = workbench.clock.now()
    store.append_logs(
        "session-42",
        [
            LogEntry(at=now, run_id="run_a", kind="run_start", data={"message": "hello"}),
            LogEntry(at=now, run_id="run_a", kind="run_end", data={"ok": True}),
        ],
    )
    store.close()
    listing = (await client.get("/runs")).text
    assert "session-42" in listing
    detail = (await client.get("/runs/session-42")).text
    assert "run_start" in detail and "hello" in detail and "run_end" in detail


async def test_a_deleted_tool_is_inspectable_with_a_deleted_badge_of_its_own(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    workbench.delete("adder")
    html = (await client.get("/tools/adder")).text
    [badge] = re.findall(r'<span class="status ([^"]+)">([^<]+)</span></h1>', html)
    assert badge == ("st-deleted", "deleted")
    css = (await client.get("/static/panel.css")).text
    assert re.search(r"^\.st-deleted \{[^}]+\}", css, re.MULTILINE)


async def test_the_empty_runs_page_names_an_endpoint_the_rest_api_serves(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    """It told a person to `POST /api/agents/{id}/run`, a path the API never had (404): runs are posted to
    /api/agents/run with the blueprint or its id in the body."""
    from awb.api.app import create_api
    from awb.blueprints.service import BlueprintService
    from awb.blueprints.session_tables import open_session_store

    page = (await client.get("/runs")).text
    named = re.findall(r"<code>(GET|POST) (/api/[^<\s]*)</code>", page)
    assert named, page
    service = BlueprintService(workbench.config, open_session_store(workbench.config))
    try:
        paths = create_api(service).openapi()["paths"]
    finally:
        service.close()
    assert [(method, path) for method, path in named if method.lower() not in paths.get(path, {})] == []


async def test_a_run_log_shows_its_data_as_written_with_hidden_characters_escaped(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    """A run's log was shown through tojson, which escapes everything past ASCII: an answer in French or
    Chinese read as "h\\u00e9llo \\u4e2d\\u6587". It is JSON as written, as code and tool text are shown;
    only the characters that do not show as themselves are JSON escapes, and markup stays text."""
    from awb.blueprints.journal import LogEntry
    from awb.blueprints.session_tables import open_session_store

    store = open_session_store(workbench.config)
    data = {"response": "héllo 中文 👩‍💻", "spoof": "a\u202eb\u200bc", "html": "<script>alert(1)</script>"}
    store.append_logs("written", [LogEntry(at=workbench.clock.now(), run_id="run_w", kind="run_end", data=data)])
    store.close()
    page = (await client.get("/runs/written")).text
    assert "héllo 中文 👩‍💻" in page
    assert "\u202e" not in page and "\u200b" not in page
    assert "a\\u202eb\\u200bc" in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
