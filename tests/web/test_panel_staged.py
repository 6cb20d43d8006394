"""The staged-writes pages: the list's cost is bounded whatever tools staged (each write a bounded preview),
and each write has a page of its own that shows all of it and applies or discards it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from awb.web.views import MAX_DIFF_FILE_BYTES, PREVIEW_BYTES, STAGED_PAGE
from awb.workbench import Workbench
from support import ORIGIN

pytestmark = pytest.mark.anyio

POST = {"Origin": ORIGIN}
LINE = "value = compute(alpha, beta) + 12345  # a line of a staged file\n"


async def _stage(workbench: Workbench, note_writer: dict[str, Any], path: Path, text: str) -> int:
    """Stage `text` for `path` straight into the store (a tool's caps are tested elsewhere); its id."""
    tool = workbench.store.get_by_name("note_writer") or await workbench.craft(note_writer)
    return workbench.store.stage_write(tool.tool_id, str(path), text, datetime.now(UTC), call_id="call_1")


def _large(last: str, size: int = 4 * 1024 * 1024) -> str:
    return LINE * (size // len(LINE)) + last + "\n"


async def test_the_list_stays_small_with_a_full_page_of_the_largest_writes_pending(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    text = _large("the very last line")
    for n in range(STAGED_PAGE):
        path = notes / f"f{n:02}.py"
        if n % 2:  # half of them change an existing file the panel can diff
            path.write_text(LINE * 2000)
        await _stage(workbench, note_writer, path, text)
    page = await client.get("/staged")
    assert page.status_code == 200
    assert len(page.content) < 2 * 1024 * 1024  # was ~150 MB: every write rendered whole, diffed
    html = page.text
    assert len(re.findall(r'<article class="staged"', html)) == STAGED_PAGE
    assert "the very last line" not in html
    size = len(text.encode())
    shown = re.findall(rf"showing the first ([\d,]+) of {size:,} bytes", html)
    assert len(shown) == STAGED_PAGE and all(int(n.replace(",", "")) <= PREVIEW_BYTES for n in shown)
    assert html.count("open the write to see all of it") == STAGED_PAGE
    assert f"{size:,} bytes" in html and "note_writer" in html
    assert html.count("not compared here with the current file") == STAGED_PAGE // 2


async def test_the_page_of_one_write_shows_all_of_it_and_the_list_a_marked_preview(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    text = _large("the very last line", 256 * 1024)
    staged_id = await _stage(workbench, note_writer, notes / "new.py", text)
    listed = (await client.get("/staged")).text
    assert "the very last line" not in listed
    assert "showing the first" in listed and f'href="/staged/{staged_id}"' in listed
    one = await client.get(f"/staged/{staged_id}")
    assert one.status_code == 200
    assert "+the very last line" in one.text  # a new file: its diff holds every line
    assert "showing the first" not in one.text
    assert f"#{staged_id}" in one.text and "a new file" in one.text and "note_writer" in one.text


async def test_the_page_of_one_write_shows_its_content_when_the_file_on_disk_is_too_large_to_diff(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "big.txt"
    target.write_text("x" * (MAX_DIFF_FILE_BYTES + 1))
    staged_id = await _stage(workbench, note_writer, target, "first line\nthe replacement last line\n")
    one = (await client.get(f"/staged/{staged_id}")).text
    assert "too large to diff here" in one
    assert "the replacement last line" in one  # what Apply would write, shown though not diffed


async def test_a_write_is_applied_from_its_own_page_and_never_from_another_site(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    target = notes / "todo.txt"
    staged_id = await _stage(workbench, note_writer, target, "buy bread\n")
    one = (await client.get(f"/staged/{staged_id}")).text
    assert f'<form method="post" action="/staged/{staged_id}/apply">' in one
    assert f'<form method="post" action="/staged/{staged_id}/discard">' in one
    refused = await client.post(f"/staged/{staged_id}/apply", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403 and "cross_origin" in refused.text
    assert not target.exists()
    done = await client.post(f"/staged/{staged_id}/apply", headers={**POST, "Referer": f"{ORIGIN}/staged/{staged_id}"})
    assert done.status_code == 303
    assert target.read_text() == "buy bread\n"
    after = (await client.get(f"/staged/{staged_id}")).text
    assert "applied" in after and f'action="/staged/{staged_id}/apply"' not in after


async def test_a_write_that_does_not_exist_has_no_page(client: httpx.AsyncClient) -> None:
    missing = await client.get("/staged/999")
    assert missing.status_code in (404, 422) and "no staged write with id 999" in missing.text
    garbage = await client.get("/staged/abc")
    assert garbage.status_code in (404, 422) and "no staged write with id" in garbage.text
