"""The test folders run in any combination: no module of the suite depends on which folder's conftest
pytest imported last, and no two of them are imported under the same name.

pytest imports each folder's `conftest.py` (outside a package) as the module `conftest`, replacing the one
before; a test that says `from conftest import X` gets whichever folder came last on the command line
(`pytest tests/web tests/inventory` failed to collect the panel tests). Modules outside a package are
imported by their file name alone, so two of them with one name clash the same way.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _sources() -> list[Path]:
    return [path for path in TESTS.rglob("*.py") if "snapshots" not in path.parts]


def _import_name(path: Path) -> str:
    """The name pytest's default (`prepend`) import mode gives the module: dotted from the first folder
    up that is not a package."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(part for part in parts if part != "__init__")


def test_no_test_module_imports_a_conftest_by_its_bare_name() -> None:
    offenders = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if "conftest" in names:
                offenders.append(str(path.relative_to(TESTS)))
    assert offenders == [], "shared names belong in a helper module (support.py), not a conftest"


def test_every_module_of_the_suite_has_a_name_of_its_own() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in _sources():
        if path.name != "conftest.py":  # pytest registers each conftest under its own path
            by_name[_import_name(path)].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
