"""The README's `awb start` command lines work as written: one that binds off loopback comes with what such
a server refuses to start without (a token), and the names its clients use."""

from __future__ import annotations

import re
from pathlib import Path

from clitools import assert_one_error_line, clean_env, run_awb
from support import REPO

BLOCK = re.compile(r"^```(?:sh|bash|ini)\n(.*?)^```", re.MULTILINE | re.DOTALL)
OFF_LOOPBACK = re.compile(r"awb start .*--host (?!127\.0\.0\.1|localhost|::1)\S+")


def _blocks_binding_off_loopback() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [block for block in BLOCK.findall(readme) if OFF_LOOPBACK.search(block)]


def test_every_readme_block_that_binds_off_loopback_sets_a_token_and_the_client_host_names() -> None:
    blocks = _blocks_binding_off_loopback()
    assert len(blocks) >= 2  # the PostgreSQL set-up and the replicas' unit file
    for block in blocks:
        assert "AWB_AUTH_TOKEN" in block, block
        assert "AWB_ALLOWED_HOSTS" in block, block


def test_the_bind_those_blocks_guard_against_is_refused_in_one_line(tmp_path: Path) -> None:
    # What a copy of the README's command without the token gets: the reason the blocks above carry one.
    result = run_awb(tmp_path, "start", "--transport", "http", "--host", "0.0.0.0", "--port", "0", env=clean_env())
    assert "without auth_token" in assert_one_error_line(result, "config_invalid")
