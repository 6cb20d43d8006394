"""numpy is imported by one thread at a time (`awb.search.numpy_once`): a server just started answered
its first searches 500 ("cannot load module more than once per process") while the embedding model
loaded beside them, both importing numpy for the first time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "awb"
# Importing these runs numpy's import (ONNX Runtime's extension imports it).
IMPORTS_NUMPY = {"numpy", "onnxruntime"}


def _unguarded_imports(path: Path) -> list[str]:
    """Imports of numpy (or of what imports it) in a function body not preceded, in that body, by a call of
    `ensure_numpy()`: where two threads could start numpy's import at once."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        nodes = list(ast.walk(function))
        guards = [n.lineno for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "ensure_numpy"]
        for node in nodes:
            if not isinstance(node, ast.Import) or any(line < node.lineno for line in guards):
                continue
            if {alias.name.split(".")[0] for alias in node.names} & IMPORTS_NUMPY:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_every_lazy_import_of_numpy_waits_for_the_one_import() -> None:
    # The module that does the one import is the one place it is not waited for.
    paths = [path for path in sorted(SRC.rglob("*.py")) if path.name != "numpy_once.py"]
    unguarded = [place for path in paths for place in _unguarded_imports(path)]
    assert unguarded == []


def test_the_check_finds_an_unguarded_import(tmp_path: Path) -> None:
    module = tmp_path / "awb_sample.py"
    module.write_text(
        "def f():\n    import numpy as np\n    return np\n\ndef g():\n    ensure_numpy()\n    import numpy\n"
    )
    global SRC
    saved, SRC = SRC, tmp_path
    try:
        assert _unguarded_imports(module) == ["awb_sample.py:2"]
    finally:
        SRC = saved


RACE = """
import threading
from awb.search.embeddings import LocalEmbedder
from awb.search.vector_index import VectorIndex
errors = []
def run(fn):
    try:
        fn()
    except BaseException as exc:
        errors.append(repr(exc))
embedder = LocalEmbedder(few_queries=True)
jobs = [lambda: (embedder.start_loading(), embedder.wait_loaded())]
jobs += [lambda: VectorIndex.from_rows(4, [("t", 4, bytes(16))]) for _ in range(4)]
threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(errors)
"""


def test_threads_importing_numpy_at_once_all_succeed() -> None:
    pytest.importorskip("onnxruntime")
    for _ in range(3):  # a fresh process each time: the first import is what races
        done = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"
