"""The panel's guards: changes only from its own pages (Origin/Host checks against CSRF and DNS
rebinding), the API token when one is configured, and tool text always escaped."""

from __future__ import annotations

import html as html_entities
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.clock import ManualClock
from awb.config import Config
from awb.panel_access import PASS_SECONDS, issue_pass
from awb.safe_code import shown
from awb.web import create_panel
from awb.workbench import Workbench
from support import ORIGIN, PANEL_COOKIE, add_tool

pytestmark = pytest.mark.anyio

TOKEN = "a-long-enough-panel-token-0123"


async def test_a_change_without_origin_or_referer_is_refused_and_changes_nothing(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    answer = await client.post("/tools/adder/delete")
    assert answer.status_code == 403 and "cross_origin" in answer.text
    assert workbench.resolve("adder").status == "active"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Origin": "https://127.0.0.1:7777"},
        {"Origin": "null"},
        {"Referer": "http://evil.example/page"},
        {"Origin": ORIGIN, "Sec-Fetch-Site": "cross-site"},
    ],
)
async def test_a_change_from_another_origin_is_refused(
    workbench: Workbench, client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    await workbench.craft(add_tool("adder"))
    answer = await client.post("/tools/adder/equip", headers=headers)
    assert answer.status_code == 403
    assert not workbench.resolve("adder").equipped


async def test_a_same_origin_referer_is_enough_when_origin_is_missing(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    answer = await client.post("/tools/adder/equip", headers={"Referer": f"{ORIGIN}/"})
    assert answer.status_code == 303
    assert workbench.resolve("adder").equipped


async def test_a_foreign_host_header_is_not_served(workbench: Workbench, client: httpx.AsyncClient) -> None:
    # DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
    answer = await client.get("/", headers={"Host": "evil.example:7777"})
    assert answer.status_code == 421


async def test_return_to_never_leaves_the_server(workbench: Workbench, client: httpx.AsyncClient) -> None:
    await workbench.craft(add_tool("adder"))
    answer = await client.post("/tools/adder/equip", data={"return_to": "//evil.example/x"}, headers={"Origin": ORIGIN})
    assert answer.headers["location"].startswith("/?done=equipped")


async def test_tool_text_is_escaped_everywhere_it_is_shown(workbench: Workbench, client: httpx.AsyncClient) -> None:
    hostile = "<script>alert(1)</script>"
    await workbench.craft(add_tool("adder", description=f"Add numbers {hostile}", tags=['"><img src=x>']))
    for path in ("/", "/tools/adder", "/tools/adder/delete"):
        html = (await client.get(path)).text
        assert hostile not in html
        assert "<img src=x>" not in html
    assert "&lt;script&gt;" in (await client.get("/")).text


@pytest.fixture
async def guarded(tmp_path: Path, clock: ManualClock) -> AsyncIterator[tuple[Workbench, httpx.AsyncClient]]:
    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=TOKEN)
    async with Workbench(config, clock=clock) as workbench:
        panel = create_panel(workbench)
        transport = httpx.ASGITransport(app=panel)
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
            yield workbench, client
        panel.close()


async def test_with_a_token_configured_pages_ask_to_sign_in_first(
    guarded: tuple[Workbench, httpx.AsyncClient],
) -> None:
    workbench, client = guarded
    await workbench.craft(add_tool("adder"))
    page = await client.get("/tools/adder")
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/tools/adder"
    change = await client.post("/tools/adder/delete", headers={"Origin": ORIGIN})
    assert change.status_code == 303 and change.headers["location"].startswith("/login")
    assert workbench.resolve("adder").status == "active"
    assert (await client.get("/events")).status_code == 303


async def test_signing_in_with_the_token_lets_changes_through(guarded: tuple[Workbench, httpx.AsyncClient]) -> None:
    workbench, client = guarded
    await workbench.craft(add_tool("adder"))
    wrong = await client.post("/login", data={"token": "nope", "next": "/"}, headers={"Origin": ORIGIN})
    assert wrong.status_code == 401
    assert "panel_token" not in wrong.headers.get("set-cookie", "")
    signed = await client.post("/login", data={"token": TOKEN, "next": "/tools/adder"}, headers={"Origin": ORIGIN})
    assert signed.status_code == 303 and signed.headers["location"] == "/tools/adder"
    cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    # Every port of 127.0.0.1 is sent the cookie: it holds a pass that expires, never the token.
    assert TOKEN.lower() not in cookie
    assert f"max-age={PASS_SECONDS}" in cookie
    assert (await client.get("/tools/adder")).status_code == 200
    done = await client.post("/tools/adder/delete", headers={"Origin": ORIGIN})
    assert done.status_code == 303
    assert workbench.store.get_by_name("adder") is None


async def test_signing_out_drops_the_pass_and_only_the_panels_own_pages_can_sign_a_person_out(
    guarded: tuple[Workbench, httpx.AsyncClient],
) -> None:
    """A person at a shared machine had no way to end a sign-in but to wait out its 12 hours or clear the
    browser's cookies: the pages now offer Sign out, a change like any other (so another site cannot sign
    a person out either)."""
    _, client = guarded
    await client.post("/login", data={"token": TOKEN}, headers={"Origin": ORIGIN})
    page = (await client.get("/")).text
    assert '<form method="post" action="/logout"' in page
    foreign = await client.post("/logout", headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert (await client.get("/")).status_code == 200
    kept = client.cookies.get(PANEL_COOKIE)
    out = await client.post("/logout", headers={"Origin": ORIGIN})
    assert out.status_code == 303 and out.headers["location"].startswith("/login")
    cleared = out.headers["set-cookie"].lower()
    assert cleared.startswith(f"{PANEL_COOKIE}=") and "max-age=0" in cleared
    assert "httponly" in cleared and "samesite=strict" in cleared
    assert not client.cookies.get(PANEL_COOKIE)
    after = await client.get("/")
    assert after.status_code == 303 and after.headers["location"] == "/login"
    # A copy of the pass kept elsewhere is signed out too (the panel alone, without the server's guard).
    assert kept
    client.cookies.set(PANEL_COOKIE, kept)
    assert (await client.get("/")).status_code == 303
    client.cookies.delete(PANEL_COOKIE)
    assert "Signed out." in (await client.get(out.headers["location"])).text
    assert "/logout" not in (await client.get("/login")).text


async def test_without_a_token_the_pages_offer_no_sign_out(client: httpx.AsyncClient) -> None:
    assert "/logout" not in (await client.get("/")).text


async def test_a_cookie_holding_the_token_itself_or_an_expired_pass_does_not_sign_in(
    guarded: tuple[Workbench, httpx.AsyncClient],
) -> None:
    workbench, client = guarded
    await workbench.craft(add_tool("adder"))
    stale = issue_pass(TOKEN, now=time.time() - PASS_SECONDS - 1)
    for value in (TOKEN, stale, issue_pass("another-token-another-token")):
        client.cookies.set(PANEL_COOKIE, value)
        assert (await client.get("/tools/adder")).status_code == 303
        assert (await client.post("/tools/adder/equip", headers={"Origin": ORIGIN})).status_code == 303
    assert not workbench.resolve("adder").equipped
    client.cookies.set(PANEL_COOKIE, issue_pass(TOKEN))
    assert (await client.get("/tools/adder")).status_code == 200


async def test_a_bearer_token_works_as_for_the_api(guarded: tuple[Workbench, httpx.AsyncClient]) -> None:
    workbench, client = guarded
    await workbench.craft(add_tool("adder"))
    bearer = {"Authorization": f"Bearer {TOKEN}", "Origin": ORIGIN}
    assert (await client.post("/tools/adder/equip", headers=bearer)).status_code == 303
    assert workbench.resolve("adder").equipped


async def test_two_servers_on_one_machine_keep_their_own_sign_in(tmp_path: Path, clock: ManualClock) -> None:
    """A browser sends a cookie to every port of its host name, and keeps one cookie per name: with one
    name for every server, signing in to one server replaced the other's pass and signed the person out
    there. Each server's cookie is named for its port; a pass still opens only the server that gave it."""
    from awb.server.http_guard import guard_http

    servers: dict[int, str] = {7777: TOKEN, 7778: "another-long-panel-token-4567"}
    configs = {
        port: Config(inventory_path=tmp_path / f"{port}.db", port=port, auth_token=token)
        for port, token in servers.items()
    }
    async with Workbench(configs[7777], clock=clock) as first, Workbench(configs[7778], clock=clock) as second:
        panels = {7777: create_panel(first), 7778: create_panel(second)}
        mounts = {
            f"http://127.0.0.1:{port}": httpx.ASGITransport(app=guard_http(panels[port], configs[port]))
            for port in servers
        }
        try:
            async with httpx.AsyncClient(mounts=mounts) as browser:
                for port, token in servers.items():
                    base = f"http://127.0.0.1:{port}"
                    signed = await browser.post(f"{base}/login", data={"token": token}, headers={"Origin": base})
                    assert signed.status_code == 303, port
                    cookie = signed.headers["set-cookie"]
                    assert cookie.startswith(f"awb_panel_{port}="), cookie
                    assert all(part in cookie.lower() for part in ("httponly", "samesite=strict", "path=/")), cookie
                # Both still signed in, with one cookie jar for the host name, as a browser keeps it.
                assert {cookie.name for cookie in browser.cookies.jar} == {"awb_panel_7777", "awb_panel_7778"}
                for port in servers:
                    assert (await browser.get(f"http://127.0.0.1:{port}/")).status_code == 200, port
                # One server's pass under the other's name is a forged pass there, not a sign-in.
                browser.cookies.set("awb_panel_7778", browser.cookies.get("awb_panel_7777"))
                assert (await browser.get("http://127.0.0.1:7778/")).status_code == 303
        finally:
            for panel in panels.values():
                panel.close()


async def test_signing_in_refuses_another_origin_and_an_outside_next(
    guarded: tuple[Workbench, httpx.AsyncClient],
) -> None:
    _, client = guarded
    foreign = await client.post("/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403
    outside = await client.post(
        "/login", data={"token": TOKEN, "next": "https://evil.example/"}, headers={"Origin": ORIGIN}
    )
    assert outside.headers["location"] == "/"


async def test_an_oversized_sign_in_form_is_refused_with_the_sign_in_page_not_a_500(
    guarded: tuple[Workbench, httpx.AsyncClient],
) -> None:
    """/login is open to anyone, and a form over the panel's 16 KB raised out of it: a 500 and a traceback
    in the server log for every such post, no token needed. It is refused as a change's oversized form is."""
    workbench, client = guarded
    huge = {"token": "x" * 20_000}
    refused = await client.post("/login", data=huge, headers={"Origin": ORIGIN})
    assert refused.status_code == 413
    assert "text/html" in refused.headers["content-type"] and "over 16384 bytes" in refused.text
    assert PANEL_COOKIE not in refused.cookies
    signed = await client.post("/login", data={"token": TOKEN}, headers={"Origin": ORIGIN})
    assert signed.status_code == 303
    await workbench.craft(add_tool("adder"))
    change = await client.post("/tools/adder/rollback", data={"version": "1" * 20_000}, headers={"Origin": ORIGIN})
    assert change.status_code == 413 and "over 16384 bytes" in change.text


SPOOF = "hello\u001b[31mred\u202eevil\u2066"


def staged_diff(page: str) -> str:
    """What a person reads of the first staged write's diff: tags left out, entities decoded."""
    start = page.index("<code>", page.index('aria-label="Diff of '))
    return html_entities.unescape(re.sub(r"<[^>]*>", "", page[start : page.index("</code>", start)]))


async def test_the_staged_write_review_shows_the_content_as_written_with_hidden_characters_marked(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "re\u202eport.txt"
    await workbench.craft(note_writer)
    await workbench.call("note_writer", {"path": str(target), "text": f"{SPOOF}\nC:\\temp\\new été\n"})
    html = (await client.get("/staged")).text
    for raw in ("\u001b", "\u202e", "\u2066"):
        assert raw not in html
    # Marked as tool code is (and as `awb staged show` prints it); backslashes and letters as written.
    assert shown(SPOOF) == "hello⟨U+001B⟩[31mred⟨U+202E⟩evil⟨U+2066⟩"
    diff = staged_diff(html)
    assert "+hello⟨U+001B⟩[31mred⟨U+202E⟩evil⟨U+2066⟩\n" in diff
    assert "+C:\\temp\\new été\n" in diff
    assert '<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>' in html
    assert (
        '<p class="hidden-warning" role="note"><strong>Hidden characters.</strong> 3 invisible or control '
        "characters, shown as ⟨U+…⟩ marks: U+001B control, U+202E RIGHT-TO-LEFT OVERRIDE, "
        "U+2066 LEFT-TO-RIGHT ISOLATE.</p>"
    ) in html
    # The path is one line of text: escaped, so it cannot forge a line of the diff.
    assert f"<code>{notes}/re\\u202eport.txt</code>" in html
    [write] = workbench.store.staged_writes("pending")
    done = await client.post(f"/staged/{write['id']}/apply", headers={"Origin": ORIGIN})
    assert target.read_text() == f"{SPOOF}\nC:\\temp\\new été\n"  # marked on the page, written as it is
    notice = (await client.get(done.headers["location"])).text
    assert "\u202e" not in notice and "re\\u202eport.txt" in notice


async def test_the_staged_diff_against_an_existing_file_marks_both_sides(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "todo.txt"
    target.write_text("keep\u202e me\nold \\n\n")
    await workbench.craft(note_writer)
    await workbench.call("note_writer", {"path": str(target), "text": f"keep\u202e me\n{SPOOF}\n"})
    html = (await client.get("/staged")).text
    assert "\u202e" not in html and "\u001b" not in html
    diff = staged_diff(html)
    assert " keep⟨U+202E⟩ me\n-old \\n\n+hello⟨U+001B⟩[31mred" in diff
    assert "3 invisible or control characters" not in html and "4 invisible or control characters" in html


async def test_a_staged_path_with_a_newline_cannot_forge_a_line_of_the_diff(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    await workbench.craft(note_writer)
    await workbench.call("note_writer", {"path": str(notes / "a\n+++ b"), "text": "x\n"})
    diff = staged_diff((await client.get("/staged")).text)
    assert diff.splitlines()[:2] == ["--- /dev/null", f"+++ {notes}/a\\x0a+++ b"]


async def test_tool_written_text_on_other_pages_is_shown_escaped(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    tool = await workbench.craft(add_tool("adder", description=f"Add numbers {SPOOF}", tags=["math"]))
    # A craft refuses such a tag now; an inventory from before may hold one.
    workbench.store.update(tool.tool_id, metadata=tool.metadata.model_copy(update={"tags": ["ma\u202eth"]}))
    assert workbench.store.get(tool.tool_id).metadata.tags == ["ma\u202eth"]  # type: ignore[union-attr]
    for path in ("/", "/tools/adder", "/tools/adder/delete", "/?done=applied&what=%E2%80%AEtxt.exe"):
        # What the page shows, tags and their attributes left out: a filter's value is the tag as it is.
        shown = re.sub(r"<[^>]*>", " ", (await client.get(path)).text)
        assert "\u202e" not in shown and "\u001b" not in shown, path
    assert "Add numbers hello\\x1b[31mred\\u202eevil" in (await client.get("/tools/adder")).text
    assert "Applied: wrote \\u202etxt.exe." in (await client.get("/?done=applied&what=%E2%80%AEtxt.exe")).text


def hidden_next(html: str) -> str:
    [found] = re.findall(r'<input type="hidden" name="next" value="([^"]*)">', html)
    return found.replace("&amp;", "&")


async def sign_in_from(client: httpx.AsyncClient, path: str) -> httpx.Response:
    """Open `path` signed out, follow the panel to its sign-in page, sign in there: the last answer."""
    sent = await client.get(path)
    assert sent.status_code == 303, path
    form = await client.get(sent.headers["location"])
    assert form.status_code == 200
    return await client.post(
        "/login", data={"token": TOKEN, "next": hidden_next(form.text)}, headers={"Origin": ORIGIN}
    )


@pytest.mark.parametrize("behind_the_server_guard", [True, False])
async def test_signing_in_returns_to_the_page_that_asked_for_it(
    tmp_path: Path, clock: ManualClock, behind_the_server_guard: bool
) -> None:
    from awb.server.http_guard import guard_http

    config = Config(inventory_path=tmp_path / "inventory.db", pid_file=tmp_path / "pid", auth_token=TOKEN)
    async with Workbench(config, clock=clock) as workbench:
        await workbench.craft(add_tool("adder"))
        await workbench.update("adder", description="Add two numbers, second edition")
        panel = create_panel(workbench)
        # `awb start` serves the panel inside the HTTP guard, which sends a browser to /login first.
        app = guard_http(panel, config) if behind_the_server_guard else panel
        try:
            for path in ("/runs", "/tools/adder?version=1", "/staged?status=all"):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                    signed = await sign_in_from(client, path)
                    assert signed.status_code == 303 and signed.headers["location"] == path
                    assert (await client.get(path)).status_code == 200
            # Never another site, and never a change's URL (it is no page to come back to).
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
                if behind_the_server_guard:  # the panel's own routes never match such a path
                    offsite = await client.get(f"{ORIGIN}//evil.example/x")
                    assert offsite.status_code == 303 and offsite.headers["location"] == "/login"
                posted = await client.post("/tools/adder/equip", headers={"Origin": ORIGIN})
                assert posted.status_code == 303 and posted.headers["location"] == "/login"
        finally:
            panel.close()


async def test_panel_pages_run_only_their_own_script_and_may_not_be_framed(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    for path in ("/", "/tools/adder", "/staged", "/runs", "/login", "/static/panel.js", "/tools/missing"):
        page = await client.get(path)
        policy = page.headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'", path
        assert directives["frame-ancestors"] == "'none'" and directives["form-action"] == "'self'"
        assert "unsafe" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
    # Nothing inline for the policy to block: no <script> bodies, no style or event-handler attributes.
    html = (await client.get("/tools/adder")).text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>|\sstyle=|\son[a-z]+=", html)
