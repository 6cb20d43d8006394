from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from awb.agents.toolbox import ToolSpec
from awb.planner.codegen import generate_wrappers, group_wrappers, identifier, module_source

from .planner_tools import planner_toolbox

SNAPSHOTS = Path(__file__).parent / "snapshots"


def test_generated_package_matches_its_snapshots(tmp_path: Path) -> None:
    files = generate_wrappers(planner_toolbox([]).specs("tool"), tmp_path / "pkg")
    names = sorted(str(f.relative_to(tmp_path / "pkg")) for f in files)
    assert names == ["__init__.py", "client.py", "servers/__init__.py", "servers/chat.py", "servers/mail.py"]
    for name in ("servers/mail.py", "servers/chat.py", "servers/__init__.py"):
        generated = (tmp_path / "pkg" / name).read_text()
        snapshot = SNAPSHOTS / (name.replace("/", "__") + ".txt")
        if os.environ.get("AWB_UPDATE_SNAPSHOTS"):
            snapshot.write_text(generated)
        assert generated == snapshot.read_text(), f"{name} differs from its snapshot (AWB_UPDATE_SNAPSHOTS=1 to renew)"
        ast.parse(generated)


def test_wrappers_have_typed_keyword_signatures_from_the_schema() -> None:
    mail = {w.function: w for w in group_wrappers(planner_toolbox([]).specs("tool"))["mail"]}
    search = mail["search_mail"]
    assert [(p.ident, p.annotation, p.required) for p in search.parameters] == [
        ("query", "str", True),
        ("label", "str", False),
        ("limit", "int", False),
    ]
    assert search.import_path == "servers.mail.search_mail"


@pytest.mark.parametrize(
    ("name", "ident"), [("post-message", "post_message"), ("class", "class_"), ("3d", "t_3d"), ("a.b c", "a_b_c")]
)
def test_names_become_python_identifiers(name: str, ident: str) -> None:
    assert identifier(name) == ident


def test_the_generated_package_calls_the_registered_caller_with_the_servers_names(tmp_path: Path) -> None:
    generate_wrappers(planner_toolbox([]).specs("tool"), tmp_path / "toolbox")
    sys.path.insert(0, str(tmp_path))
    try:
        from toolbox import client  # type: ignore[import-not-found]
        from toolbox.servers import chat  # type: ignore[import-not-found]

        seen: list[tuple[str, str, dict[str, object]]] = []

        async def caller(server: str, tool: str, payload: dict[str, object]) -> object:
            seen.append((server, tool, payload))
            return "ok"

        client.register_tool_caller(caller)
        assert anyio.run(lambda: chat.post_message(channel="general", text="hi")) == "ok"
        assert seen == [("chat", "post-message", {"channel": "general", "text": "hi"})]
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "toolbox" or m.startswith("toolbox.")]:
            del sys.modules[name]


@pytest.mark.parametrize(
    "description",
    [
        "ends in a backslash \\",
        "a \\N escape with no name",
        "a \\u12 short escape",
        "a NUL \x00 byte",
        "lone \ud800",
        'ends in a quote "x"',
        'three """ quotes',
        "tag \U000e0041 above the BMP",
    ],
)
def test_a_description_that_is_not_safe_in_a_literal_still_gives_a_module_that_compiles(description: str) -> None:
    bare = ToolSpec("odd.bare", description, {"type": "object"}, "odd")
    with_args = ToolSpec(
        "odd.args", description, {"type": "object", "properties": {"x": {"description": description}}}, "odd"
    )
    for spec in (bare, with_args):
        source = module_source("odd", group_wrappers([spec])["odd"])
        compile(source, "<odd>", "exec")
        namespace: dict[str, Any] = {}
        exec(compile(source.replace("from ..client import call_tool, drop_unset", ""), "<odd>", "exec"), namespace)
        documented = namespace[spec.name.partition(".")[2]].__doc__
        assert description in documented  # the escapes read back as the server's own text
