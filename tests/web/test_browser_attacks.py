"""The panel attacked in a real browser (Debian's Chromium, headless, through Playwright) against a real
`awb start --transport http`: hostile tool text stays text and its Content-Security-Policy stops what
might slip through; a page of another loopback port can neither frame the panel, nor post to it, nor
learn the API token from the sign-in cookie (browsers send cookies to every port of a host name)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from journey import call
from support import add_tool, awb_env, awb_http, loopback_http

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("dev_shm")]  # as tests/web/test_browser.py

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
STEP_MS = 15_000
TOKEN = "browser-attack-token-0123456789"
#: Each marks what it would inject with `data-pwn`, and what it would run counts in `window.__pwn`.
RUN = "window.__pwn=(window.__pwn||0)+1"
PAYLOADS = [
    f'<img src=x data-pwn onerror="{RUN}">',
    f"</script><script data-pwn>{RUN}</script>",
    f'<svg data-pwn onload="{RUN}"><circle r=1 /></svg>',
    f'"><a data-pwn href="javascript:{RUN}">x</a>',
    f'\'><iframe data-pwn srcdoc="<script>parent.{RUN}</script>"></iframe>',
    "<style data-pwn>body{display:none}</style>",
    "\u202egnp.exe\u202c <b data-pwn>b</b>",
]
HOSTILE = " ".join(PAYLOADS)
TAGS = ["<b data-pwn>t</b>", '"><i data-pwn>', f"<svg data-pwn onload={RUN}>"]
WRITER: dict[str, Any] = {
    "name": "note_writer",
    "description": f"Write a note {HOSTILE}",
    "code": "def run(params):\n    write_file(params['path'], params['text'])\n    return 'staged'\n",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
    },
}


@contextmanager
def awb_server(tmp_path: Path, **env: str) -> Iterator[tuple[str, Path]]:
    """`awb start --transport http` on port 0 (support.awb_http): its base URL and the directory `note_writer`
    may stage writes under."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is missing: `make test` installs it (make chromium)")
        pytest.skip("Debian's chromium is not installed (make chromium)")
    notes = tmp_path / "notes"
    notes.mkdir()
    grants = json.dumps({"note_writer": [str(notes)]})
    with awb_http(tmp_path, awb_env(tmp_path, AWB_SANDBOX__GRANTS=grants, **env)) as base:
        yield base, notes


@asynccontextmanager
async def browser_page() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = await browser.new_context()
        context.set_default_timeout(STEP_MS)
        try:
            yield await context.new_page()
        finally:
            await context.close()
            await browser.close()


@asynccontextmanager
async def mcp_client(base: str, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(base + "/mcp", http_client=http)) as client:
        yield client


async def injected(page: Any) -> tuple[int, int]:
    """Elements a payload put in the page, and scripts a payload ran."""
    found = await page.evaluate("[document.querySelectorAll('[data-pwn]').length, window.__pwn || 0]")
    return found[0], found[1]


async def test_hostile_tool_text_stays_text_on_every_page_and_in_live_toasts(tmp_path: Path) -> None:
    with awb_server(tmp_path) as (base, notes):
        (notes / "plain.txt").write_text(f"before {HOSTILE}\n")
        with anyio.fail_after(60):
            async with mcp_client(base) as client:
                hostile = add_tool(
                    "hostile",
                    description=f"Adds {HOSTILE}",
                    tags=TAGS,
                    code=f"def run(params):\n    # {HOSTILE}\n    return params['a'] + params['b']\n",
                    input_schema={"type": "object", "properties": {"a": {"type": "number", "description": HOSTILE}}},
                    examples=[{"params": {"a": 1, "b": 2}, "expected": 3}],
                )
                for request in (hostile, WRITER):
                    assert "is_error" not in await call(client, "awb_craft", request)
                for name in (f'<img src=x data-pwn onerror="{RUN}">.txt', "plain.txt"):
                    params = {"path": str(notes / name), "text": f"{HOSTILE}\n"}
                    assert "is_error" not in await call(client, "awb_call", {"name": "note_writer", "params": params})
        async with browser_page() as page:
            await page.goto(base + "/")
            await page.locator("body[data-stream='open']").wait_for(state="attached")
            with anyio.fail_after(60):
                async with mcp_client(base) as client:
                    await call(client, "awb_craft", add_tool("live_one", description=HOSTILE))
                    bad = add_tool("live_bad", examples=[{"params": {"a": 1, "b": 2}, "expected": HOSTILE}])
                    assert (await call(client, "awb_craft", bad)).get("is_error")
            await page.locator(".toast", has_text="live_bad rejected").wait_for()
            assert await injected(page) == (0, 0)
            tag = quote(TAGS[0])
            for path in (
                "/",
                f"/?q={quote(HOSTILE)}",
                f"/?tag={tag}",
                "/tools/hostile",
                "/tools/hostile/delete",
                "/staged",
                f"/runs/{quote(PAYLOADS[0])}",
                f"/tools/{quote(PAYLOADS[0])}",
                f"/tools/hostile?version={quote(PAYLOADS[0])}",
                f"/?done=applied&what={quote(PAYLOADS[0])}",
                f"/login?next=/{quote(PAYLOADS[3])}",
            ):
                await page.goto(base + path)
                assert await injected(page) == (0, 0), path
            await page.goto(base + "/tools/hostile")
            lead = await page.locator("p.lead").inner_text()
            assert PAYLOADS[0] in lead and "\\u202egnp.exe\\u202c" in lead  # shown as text, bidi marked
            await page.goto(base + "/staged")
            assert (
                f'<img src=x data-pwn onerror="{RUN}">.txt'
                in await page.locator("article.staged h2").first.inner_text()
            )

            # Were markup ever to slip past escaping, the policy would still run none of it.
            violation = await page.evaluate(
                """() => new Promise((resolve) => {
                    document.addEventListener('securitypolicyviolation', (e) => resolve(e.violatedDirective));
                    document.body.insertAdjacentHTML('beforeend', '<img src=x onerror="window.__pwn=1">');
                })"""
            )
            assert violation.startswith("script-src")
            assert await page.evaluate("window.__pwn || 0") == 0


class Attacker(BaseHTTPRequestHandler):
    """Another site on another loopback port: serves `pages` and keeps the cookies browsers sent it."""

    pages: ClassVar[dict[str, str]] = {}
    cookies: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.cookies.append(self.headers.get("Cookie") or "")
        body = self.pages.get(self.path, "").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def attacker_site(pages: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    handler = type("Site", (Attacker,), {"pages": pages, "cookies": []})
    with loopback_http(handler) as site:
        yield f"http://127.0.0.1:{site.server_address[1]}", handler.cookies


async def test_another_loopback_port_cannot_frame_post_or_learn_the_token(tmp_path: Path) -> None:
    with awb_server(tmp_path, AWB_AUTH_TOKEN=TOKEN) as (base, notes):
        with anyio.fail_after(60):
            async with mcp_client(base, TOKEN) as client:
                for request in (add_tool("adder"), WRITER):
                    assert "is_error" not in await call(client, "awb_craft", request)
                params = {"path": str(notes / "planted.txt"), "text": "planted\n"}
                assert "is_error" not in await call(client, "awb_call", {"name": "note_writer", "params": params})
        pages = {
            "/frame": f'<iframe id="panel" src="{base}/"></iframe>',
            "/delete": f'<form id="f" method="post" action="{base}/tools/adder/delete"></form>',
            "/apply": f'<form id="f" method="post" action="{base}/staged/1/apply"></form>',
        }
        with attacker_site(pages) as (site, cookies_seen):
            async with browser_page() as page:
                await page.goto(base + "/tools/adder")
                await page.fill("#token", TOKEN)
                await page.get_by_role("button", name="Sign in").click()
                await page.wait_for_url(base + "/tools/adder")

                await page.goto(site + "/frame")
                frame = await (await page.wait_for_selector("#panel")).content_frame()
                await frame.wait_for_load_state()
                assert not frame.url.startswith(base)  # the browser refused to show it (chrome-error://)
                for form in ("/delete", "/apply"):
                    await page.goto(site + form)
                    async with page.expect_navigation():
                        await page.evaluate("document.getElementById('f').submit()")
                    assert "cross_origin" in await page.title(), form
        assert not (notes / "planted.txt").exists()

        # The cookie went to the other port too: it must open neither /mcp nor /api, and hold no token.
        name = f"awb_panel_{urlsplit(base).port}="
        sent = [cookie for cookie in cookies_seen if name in cookie]
        assert sent, cookies_seen
        assert all(TOKEN not in cookie for cookie in sent)
        panel_pass = sent[0].split(name)[1].split(";")[0]
        async with httpx.AsyncClient(base_url=base, cookies={name[:-1]: panel_pass}) as http:
            assert (await http.get("/api/blueprints")).status_code == 401
            assert (await http.get("/")).status_code == 200
            bearer = {"Authorization": f"Bearer {panel_pass}"}
            assert (await http.get("/api/blueprints", headers=bearer)).status_code == 401
        async with mcp_client(base, TOKEN) as client:
            inspected = await call(client, "awb_inspect", {"name": "adder"})
        assert inspected["tool"]["status"] == "active", inspected
