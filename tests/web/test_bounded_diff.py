"""The panel's diffs cost the server a bounded amount whatever a tool wrote: two versions of a tool's code,
or a staged write and the file it replaces, arranged so that difflib's matcher goes quadratic (lines
repeated just under its 1% "popular" share, in two different orders) took ~10 s of a server CPU for
60 KB, with the interpreter's lock held, every time the page was opened."""

from __future__ import annotations

import difflib
import random
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from awb.web import bounded_diff
from awb.workbench import Workbench

#: Lines that each occur 99 times in 20,000 (under difflib's 1% popular share, so every one is looked up).
REPEATS = 99
LINES = 16_000


def quadratic_pair() -> tuple[list[str], list[str]]:
    """Two texts of the same ~64 KB of lines, in an order difflib matches in quadratic time."""
    pool = [f"#{i:x}\n" for i in range(LINES // REPEATS)]
    cycled = [pool[i % len(pool)] for i in range(LINES)]
    return sorted(cycled), cycled


def test_a_bounded_diff_is_difflibs_unified_diff() -> None:
    chooser = random.Random(7)
    for _ in range(200):
        pool = [f"line {i}\n" for i in range(chooser.randint(1, 20))]
        before = [chooser.choice(pool) for _ in range(chooser.randint(0, 200))]
        after = list(before)
        for _ in range(chooser.randint(0, 15)):
            at = chooser.randint(0, len(after))
            if chooser.random() < 0.5 and after:
                del after[min(at, len(after) - 1)]
            else:
                after.insert(at, chooser.choice(pool))
        assert bounded_diff.unified_diff(before, after, "a", "b") == list(
            difflib.unified_diff(before, after, "a", "b", n=3)
        )


def test_a_diff_that_would_take_too_many_steps_is_refused() -> None:
    before, after = quadratic_pair()
    assert bounded_diff.unified_diff(before, after, "a", "b") is None


def test_an_ordinary_edit_of_a_large_file_is_well_within_the_steps() -> None:
    before = [f"value_{i} = compute({i}, {i * 7})\n" for i in range(20_000)]
    after = [*before[:100], "changed\n", *before[110:9000], "added\n", *before[9000:]]
    lines = bounded_diff.unified_diff(before, after, "a", "b", steps=bounded_diff.DIFF_STEPS // 20)
    assert lines is not None and "+changed\n" in lines and "+added\n" in lines


@pytest.mark.anyio
async def test_the_page_of_a_tool_whose_versions_diff_quadratically_says_the_diff_was_left_out(
    workbench: Workbench, client: httpx.AsyncClient
) -> None:
    before, after = quadratic_pair()
    run = "def run(params):\n    return 1\n"
    await workbench.craft(
        {"name": "slow_diff", "description": "has two hostile versions", "code": run + "".join(before)}
    )
    await workbench.update("slow_diff", code=run + "".join(after))
    with anyio.fail_after(60):
        page = await client.get("/tools/slow_diff")
    assert page.status_code == 200
    assert "Too costly to compare with slow_diff v1" in page.text


@pytest.mark.anyio
async def test_a_staged_write_that_diffs_quadratically_is_shown_whole(
    workbench: Workbench, client: httpx.AsyncClient, note_writer: dict[str, Any], notes: Path
) -> None:
    current, staged = quadratic_pair()
    target = notes / "data.txt"
    target.write_text("".join(current))
    await workbench.craft(note_writer)
    await workbench.call("note_writer", {"path": str(target), "text": "".join(staged)})
    [write] = workbench.store.staged_writes("pending")
    with anyio.fail_after(60):
        listed = await client.get("/staged")  # a preview: the first lines, not compared
        page = await client.get(f"/staged/{write['id']}")
    assert listed.status_code == 200 and "open the write to see all of it" in listed.text
    assert page.status_code == 200
    assert "Too costly to compare with" in page.text
    # Every staged line, as added: highlighted, or plain past the highlighter's CPU budget (which a loaded
    # machine can reach: 7,466 lines were highlighted in one CI run).
    assert page.text.count("+#") == LINES
