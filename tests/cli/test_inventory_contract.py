"""The spec's names on the command line too: `--top-k` for search, `total` and paging for list."""

from __future__ import annotations

from pathlib import Path

import pytest

from awb.config import load_config
from awb.workbench import Workbench
from clitools import assert_one_error_line, run_awb
from support import add_tool, awb_env, awb_json

pytestmark = pytest.mark.anyio


async def test_inventory_list_pages_and_search_takes_top_k(tmp_path: Path) -> None:
    async with Workbench(load_config(None, environ=awb_env(tmp_path))) as workbench:
        for name in ("one", "two", "three"):
            await workbench.craft(add_tool(name, description=f"Add numbers, variant {name}"))
    first = awb_json(tmp_path, "inventory", "list", "--limit", "2")
    assert (first["count"], first["total"], first["next_offset"]) == (2, 3, 2)
    rest = awb_json(tmp_path, "inventory", "list", "--limit", "2", "--offset", "2")
    assert (rest["count"], rest["total"], rest["next_offset"]) == (1, 3, None)
    # A person is told how to see the next page; the last page says nothing more.
    shown = run_awb(tmp_path, "inventory", "list", "--limit", "2", "--tag", "math", env=awb_env(tmp_path))
    assert shown.stderr.strip() == "more tools: awb inventory list --tag math --limit 2 --offset 2"
    last = run_awb(tmp_path, "inventory", "list", "--limit", "2", "--offset", "2", env=awb_env(tmp_path))
    assert last.returncode == 0 and last.stderr == ""
    found = awb_json(tmp_path, "inventory", "search", "add numbers", "--top-k", "2")
    assert isinstance(found["results"], list) and len(found["results"]) == 2
    same = awb_json(tmp_path, "inventory", "search", "add numbers", "--top-k", "1", "--limit", "1")
    assert isinstance(same["results"], list) and len(same["results"]) == 1


def test_search_refuses_a_limit_and_a_top_k_that_differ_as_awb_search_does(tmp_path: Path) -> None:
    done = run_awb(tmp_path, "inventory", "search", "x", "--limit", "2", "--top-k", "3", env=awb_env(tmp_path))
    assert "--limit 2 and --top-k 3 are the same setting" in assert_one_error_line(done, "usage_error")
