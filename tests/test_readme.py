"""The README holds together: its links lead somewhere (each `#anchor` to one of its headings, each relative
link to a file of the repository, none to a package registry: the project points at projects' own pages),
every error code a face can answer with is named in it, and every module or name it points at in `awb.`
exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any, get_args

import awb.api.app
import awb.blueprints.improve
import awb.cli.main
from awb.agents.result import RunResult, TerminationReason
from awb.agents.telemetry import ESTIMATED_ATTRIBUTE
from awb.errors import AwbError
from awb.meta_tools import RESERVED_NAMES
from support import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")
REGISTRIES = ("pypi.org", "pythonhosted.org", "npmjs.com", "npmjs.org", "crates.io")


#: Error codes that never leave the process: a malformed model reply is fed back to the model to correct.
INTERNAL_CODES = {"malformed_action"}


def _anchor(heading: str) -> str:
    """The anchor a Markdown host makes of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def link_problems(readme: str, root: Path) -> list[str]:
    prose = re.sub(r"^```.*?^```", "", readme, flags=re.MULTILINE | re.DOTALL)
    anchors = {_anchor(heading) for heading in re.findall(r"^#+ (.+)$", prose, re.MULTILINE)}
    problems = []
    for target in LINK.findall(prose):
        if any(host in target for host in REGISTRIES):
            problems.append(f"{target}: a package registry")
        elif target.startswith("#"):
            if target[1:] not in anchors:
                problems.append(f"{target}: no such heading")
        elif "://" not in target and not target.startswith("mailto:"):
            path = (root / target.split("#")[0]).resolve()
            if not path.is_relative_to(root.resolve()) or not path.exists():
                problems.append(f"{target}: no such file in the repository")
    return problems


def test_every_readme_link_resolves_inside_the_repository_or_to_a_heading() -> None:
    assert link_problems((REPO / "README.md").read_text(encoding="utf-8"), REPO) == []


def test_the_link_check_notices_a_lost_heading_a_missing_file_and_a_registry() -> None:
    broken = (
        "## Several servers\n[a](#several-servers) [b](#several-servers-on-one-postgresql) [c](docs/nothing.md)"
        " [d](../outside.md) [e](docs/clients.md) [f](https://pypi.org/project/agno/)"
    )
    assert link_problems(broken, REPO) == [
        "#several-servers-on-one-postgresql: no such heading",
        "docs/nothing.md: no such file in the repository",
        "../outside.md: no such file in the repository",
        "https://pypi.org/project/agno/: a package registry",
    ]


def _error_codes() -> set[str]:
    # Every face is imported above, so every error class it can raise is defined by now.
    found, waiting = set(), [AwbError]
    while waiting:
        error = waiting.pop()
        found.add(error.code)
        waiting.extend(error.__subclasses__())
    return found - INTERNAL_CODES


def test_every_error_code_a_face_can_answer_with_is_named_in_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert awb.api.app and awb.cli.main and awb.blueprints.improve  # imported for their error classes
    assert sorted(code for code in _error_codes() if f"`{code}`" not in readme and f"({code})" not in readme) == []


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_every_awb_module_and_name_the_readme_points_at_exists() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    # `awb.craft` and the like are the meta-tools' dotted names, and `awb.usage.estimated` a span attribute,
    # not modules.
    pointed = set(re.findall(r"`(awb(?:\.[A-Za-z_]\w*)+)`", readme)) - RESERVED_NAMES - {ESTIMATED_ATTRIBUTE}
    assert len(pointed) >= 10
    assert sorted(name for name in pointed if not _resolves(name)) == []
    assert not _resolves("awb.search.relevance.NO_SUCH_FLOOR")


def test_the_run_result_table_names_every_field_and_every_termination_reason() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("returns a\n`RunResult`:", 1)[1].strip().split("\n\n", 1)[0]
    rows = {name for line in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", line.split(" | ")[0])}
    assert sorted(set(RunResult.model_fields) - rows) == []
    reasons = next(line for line in table.splitlines() if line.startswith("| `termination_reason`"))
    assert [reason for reason in get_args(TerminationReason) if f"`{reason}`" not in reasons] == []


def _modules_the_architecture_leaves_out(doc: str) -> list[str]:
    names = set(re.findall(r"[a-z_0-9]+", doc))
    modules = sorted((REPO / "src" / "awb").rglob("*.py"))
    return [
        str(path.relative_to(REPO / "src" / "awb"))
        for path in modules
        if path.stem not in ("__init__", "__main__") and path.stem not in names
    ]


def test_the_architecture_layout_names_every_module() -> None:
    """docs/architecture.md says it describes the code as it is; its layout had fallen 45 modules behind
    (`shares.py`, `meta_tools.py`, the capped MCP transports, the cpython sandbox's parts...)."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert _modules_the_architecture_leaves_out(doc) == []
    assert _modules_the_architecture_leaves_out(doc.replace("sign_in_limit", "")) == ["sign_in_limit.py"]
