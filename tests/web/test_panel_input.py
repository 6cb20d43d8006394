"""Numbers a person or a browser types into the panel (paths, queries, forms, Last-Event-ID): a number the
inventory cannot hold is a clear 4xx, never a 500 or a dead event stream."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from awb.config import Config
from awb.feed import SQLiteEventFeed
from awb.inventory.sqlite import SQLiteStore
from awb.inventory.stored_int import MAX_STORED_INT
from awb.sign_outs import StreamSignIn
from awb.web import stream
from awb.web.numbers import whole_number
from awb.workbench import Workbench
from support import ORIGIN, add_tool

pytestmark = pytest.mark.anyio

POST = {"Origin": ORIGIN}
#: Digits `str.isdigit` accepts and `int` refuses, a number past SQLite's 64 bits, one past `int`'s limit.
NOT_NUMBERS = ["²", "٣", "1²", " 1", "-1", "1e3", "99999999999999999999999", "9" * 5000]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0", 0), ("7", 7), ("007", 7), (str(MAX_STORED_INT), MAX_STORED_INT), ("0" * 50 + "12", 12)],
)
def test_whole_number_reads_ascii_digits_within_64_bits(raw: str, expected: int) -> None:
    assert whole_number(raw) == expected


@pytest.mark.parametrize("raw", ["", None, str(MAX_STORED_INT + 1), *NOT_NUMBERS])
def test_whole_number_is_none_for_anything_else(raw: str | None) -> None:
    assert whole_number(raw) is None


@pytest.fixture
async def strict_client(panel: Any) -> Any:
    # Exceptions inside the app fail the test instead of becoming a 500 page it could not tell apart.
    transport = httpx.ASGITransport(app=panel, raise_app_exceptions=True)
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as http:
        yield http


@pytest.mark.parametrize("raw", NOT_NUMBERS)
async def test_a_version_that_is_no_number_is_a_clear_error_on_inspect(
    workbench: Workbench, strict_client: httpx.AsyncClient, raw: str
) -> None:
    await workbench.craft(add_tool("adder"))
    page = await strict_client.get("/tools/adder", params={"version": raw})
    assert page.status_code == 422
    assert "invalid_params" in page.text and "no version" in page.text
    assert "9" * 100 not in page.text  # a long number is shortened on the error page


@pytest.mark.parametrize("raw", NOT_NUMBERS)
async def test_a_rollback_to_a_version_that_is_no_number_is_refused(
    workbench: Workbench, strict_client: httpx.AsyncClient, raw: str
) -> None:
    await workbench.craft(add_tool("adder"))
    await workbench.update("adder", description="Add two numbers, second edition")
    answer = await strict_client.post("/tools/adder/rollback", data={"version": raw}, headers=POST)
    assert answer.status_code == 422 and "choose a version" in answer.text
    assert workbench.resolve("adder").version == 2


@pytest.mark.parametrize("action", ["apply", "discard"])
@pytest.mark.parametrize("raw", ["99999999999999999999999", "9" * 5000, "x1", str(MAX_STORED_INT)])
async def test_a_staged_write_id_that_names_no_write_is_a_clear_error(
    strict_client: httpx.AsyncClient, action: str, raw: str
) -> None:
    answer = await strict_client.post(f"/staged/{raw}/{action}", headers=POST)
    assert answer.status_code == 422
    assert "no staged write with id" in answer.text


async def test_an_unusable_last_event_id_starts_the_stream_at_the_newest_event(
    config: Config, workbench: Workbench
) -> None:
    store = SQLiteStore(config.inventory_path)
    feed = SQLiteEventFeed(config.inventory_path)
    now = workbench.clock.now()
    store.append_event("deleted", None, {"name": "before"}, now)
    try:
        for raw in ["99999999999999999999999999", "²", str(MAX_STORED_INT)]:
            request = FakeRequest({"last-event-id": raw})
            chunks = stream.event_stream(request, feed, stream.start_cursor(request, feed), StreamSignIn(None, None))  # type: ignore[arg-type]
            try:
                assert await anext(chunks) == "retry: 1000\n\n"
                # Past the newest event (or no number at all): what comes next still arrives.
                store.append_event("deleted", None, {"name": f"after {raw[:5]}"}, now)
                with anyio.fail_after(10):
                    frame = await next_frame(chunks)
                assert frame["data"]["name"] == f"after {raw[:5]}"
            finally:
                await chunks.aclose()
    finally:
        store.close()
        feed.close()


class FakeRequest:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    async def is_disconnected(self) -> bool:
        return False


async def next_frame(chunks: Any) -> dict[str, Any]:
    async for chunk in chunks:
        if chunk.startswith("id: "):
            found: dict[str, Any] = json.loads(chunk.split("data: ", 1)[1])
            return found
    raise AssertionError("the stream ended early")


async def test_a_version_that_does_not_exist_is_not_found_not_the_current_one(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    await workbench.craft(add_tool("adder"))
    await workbench.update("adder", description="Add two numbers, second edition")
    for version in ("99", "0", str(MAX_STORED_INT)):
        page = await client.get("/tools/adder", params={"version": version})
        assert page.status_code == 404, version
        assert "version_not_found" in page.text
        assert f"adder has no version {version} (its versions: v2, v1)" in page.text
    assert (await client.get("/tools/adder", params={"version": "1"})).status_code == 200
    assert (await client.get("/tools/adder", params={"version": ""})).status_code == 200  # the current one


async def test_an_unknown_page_or_a_method_a_page_does_not_take_is_an_error_page_saying_so(
    client: httpx.AsyncClient,
) -> None:
    """Every other refusal of the panel is a page that says what went wrong and links back; these two were a
    bare 'Not Found' / 'Method Not Allowed' in plain text (a stale bookmark, a reloaded change's URL)."""
    missing = await client.get("/no/such/page")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    assert "not_found" in missing.text and 'href="/"' in missing.text
    wrong = await client.get("/tools/adder/equip")
    assert wrong.status_code == 405 and "text/html" in wrong.headers["content-type"]
    assert "method_not_allowed" in wrong.text and wrong.headers["allow"] == "POST"
    assert "content-security-policy" in wrong.headers
