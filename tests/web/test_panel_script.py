"""The panel's script (static/panel.js) run by Node against a stand-in EventSource and page: what it does when
the server ends its stream because the sign-in ended. The real browser tests need Chromium; this needs Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from awb.web.app import HERE

SCRIPT = HERE / "static" / "panel.js"
#: A page at /tools/adder?version=2 whose stream the script opens; `steps` is what the stream then does.
HARNESS = """
const fs = require("fs");
const seen = { closed: 0, assigned: [] };
class FakeSource {
  constructor(url) { this.url = url; this.readyState = 1; this.listeners = {}; FakeSource.opened.push(this); }
  addEventListener(kind, listener) { this.listeners[kind] = listener; }
  close() { seen.closed += 1; this.readyState = FakeSource.CLOSED; }
}
FakeSource.CLOSED = 2;
FakeSource.opened = [];
const body = { dataset: { live: "/events" } };
let ready = null;
globalThis.EventSource = FakeSource;
globalThis.window = {
  EventSource: FakeSource,
  location: { pathname: "/tools/adder", search: "?version=2", assign: (url) => seen.assigned.push(url) },
};
globalThis.document = {
  body,
  getElementById: () => null,
  querySelector: () => null,
  addEventListener: (kind, listener) => { if (kind === "DOMContentLoaded") ready = listener; },
};
new Function(fs.readFileSync(process.argv[1], "utf8"))();
ready();
const source = FakeSource.opened[0];
for (const [kind, data, state] of JSON.parse(process.argv[2])) {
  if (state !== null) source.readyState = state;
  if (source.listeners[kind]) source.listeners[kind]({ data });  // an event the page does not listen for is dropped
}
console.log(JSON.stringify({ ...seen, opened: FakeSource.opened.length, stream: body.dataset.stream }));
"""


def run_script(steps: list[tuple[str, str, int | None]]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node is not installed")
    done = subprocess.run(
        [node, "-e", HARNESS, str(SCRIPT), json.dumps(steps)], capture_output=True, text=True, timeout=30, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_stream_ended_by_sign_out_closes_and_sends_the_page_to_sign_in_with_its_way_back() -> None:
    """EventSource reconnects by itself after a stream ends; a page signed out elsewhere kept trying."""
    seen = run_script([("open", "", None), ("signed_out", '{"sign_in": "/login"}', None)])
    assert seen["closed"] == 1 and seen["opened"] == 1
    assert seen["assigned"] == ["/login?next=%2Ftools%2Fadder%3Fversion%3D2"]
    assert seen["stream"] == "signed_out"


def test_a_stream_the_browser_gave_up_on_shows_live_updates_off() -> None:
    seen = run_script([("open", "", None), ("error", "", 2)])
    assert seen["stream"] == "closed" and seen["assigned"] == []
