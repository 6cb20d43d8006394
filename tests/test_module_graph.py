"""The shape of the package: no two modules of `awb` import each other, directly or round a loop.

Imports are read from the source (nothing is imported), at module level, including those under
`if TYPE_CHECKING:`: a loop that only the type checker follows still ties the modules together. An
import inside a function is left out: that is how a module reaches a heavy or optional part late.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "awb").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements run on import: the module's own, and those in its `if` and `try` blocks."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            for handler in node.handlers:
                todo += handler.body


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The `awb` modules that `name` imports at module level (a `from package import module` counts as
    the module; an import of a name from a module as that module)."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _module_level(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            module = known(target)
            if module is not None and module != name:
                found.add(module)
    return found


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    loops.append(sorted(group))
    return loops


def test_the_loop_finder_finds_a_loop_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _loops(graph) == [["a", "b", "c"]]


def test_the_reader_follows_type_checking_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "awb"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from awb.two import Thing\n"
        "def late():\n    import awb.three\n"
    )
    (package / "two.py").write_text("from . import three\n")
    (package / "three.py").write_text("")
    modules = {"awb": package / "__init__.py"} | {f"awb.{n}": package / f"{n}.py" for n in ("one", "two", "three")}
    assert _imports("awb.one", modules["awb.one"], modules) == {"awb.two"}
    assert _imports("awb.two", modules["awb.two"], modules) == {"awb.three"}


def test_no_awb_modules_import_each_other_round_a_loop() -> None:
    modules = _modules()
    assert "awb.workbench" in modules and "awb.sandbox.cpython.runtime" in modules
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "awb.calling" in graph["awb.workbench"]  # the reader sees the imports it should
    assert _loops(graph) == []
