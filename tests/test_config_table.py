"""The README's configuration table is the config model's: every field has a row, no row names a field
that does not exist, and each row gives the field's real default and the range the model accepts; and a
default the prose states again beside a field's name (`http.max_sessions` (10,000)) agrees with it."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from awb.config import Config
from support import REPO


def _fields(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    found: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            found |= _fields(info.annotation, f"{prefix}{name}.")
        else:
            found[prefix + name] = info
    return found


def _default(name: str) -> Any:
    value: Any = Config().model_dump(mode="json")
    for part in name.split("."):
        value = value[part]
    return value


def range_of(info: FieldInfo) -> str:
    """The values a field accepts, as the table's range column says them ("" when any value of its type)."""
    bounds = {type(item).__name__: item for item in info.metadata}
    if "MaxLen" in bounds:
        return f"≤ {bounds['MaxLen'].max_length} entries"
    low = f"{bounds['Ge'].ge}" if "Ge" in bounds else f"> {bounds['Gt'].gt}" if "Gt" in bounds else None
    high = bounds["Le"].le if "Le" in bounds else None
    if low is None:
        return "" if high is None else f"≤ {high}"
    if high is None:
        return low if low.startswith(">") else f"≥ {low}"
    return f"{low}–{high}" if "Ge" in bounds else f"{low}, ≤ {high}"


def _rows(readme: str) -> dict[str, tuple[str, str]]:
    """Each field the table names, with its default cell and range cell. A row may name two fields
    (`host` / `port`, `memory.promotion_threshold_medium` / `_long`): its cells then say ` / ` between them."""
    section = readme[readme.index("\n## Configuration") : readme.index("\n## Several servers")]
    rows: dict[str, tuple[str, str]] = {}
    known = _fields(Config)
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("| ").split(" | ")]
        names: list[str] = []
        for name in re.findall(r"`([^`]+)`", cells[0]):
            if name.startswith("_"):  # `_long` after `memory.promotion_threshold_medium`
                stems = [names[0][:at] for at, char in enumerate(names[0]) if char == "_"]
                name = next((stem + name for stem in stems if stem + name in known), "?" + name)
            names.append(name)
        defaults = cells[1].split(" / ")
        ranges = cells[2].split(" / ") if " / " in cells[2] else [cells[2]] * len(names)
        for name, default, accepted in zip(names, defaults, ranges, strict=True):
            rows[name] = (default, accepted)
    return rows


def table_problems(readme: str) -> list[str]:
    known = _fields(Config)
    rows = _rows(readme)
    problems = [f"no row for {name}" for name in known if name not in rows]
    problems += [f"a row for {name}, which is no field" for name in rows if name not in known]
    for name, (default, accepted) in rows.items():
        if name not in known:
            continue
        quoted = re.fullmatch(r"`(.*)`", default)
        said = None if default.startswith("none") else quoted and quoted.group(1)
        if said is not None:
            try:
                said = json.loads(said)
            except json.JSONDecodeError:
                pass  # a bare string: `auto`, `127.0.0.1`
        if said != _default(name):
            problems.append(f"{name}: default {default}, the model's is {_default(name)!r}")
        if accepted.strip("–") != range_of(known[name]):
            problems.append(f"{name}: range {accepted!r}, the model's is {range_of(known[name])!r}")
    return problems


def test_the_configuration_table_gives_every_field_with_its_real_default_and_range() -> None:
    assert table_problems((REPO / "README.md").read_text(encoding="utf-8")) == []


def test_the_table_check_notices_a_missing_row_a_wrong_default_and_a_wrong_range() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `sandbox.pool_size` |"))
    broken = readme.replace(row, row.replace("`2`", "`4`").replace("1–64", "1–32"))
    broken = re.sub(r"^\| `http.keep_alive_seconds` \|.*\n", "", broken, flags=re.MULTILINE)
    assert table_problems(broken) == [
        "no row for http.keep_alive_seconds",
        "sandbox.pool_size: default `4`, the model's is 2",
        "sandbox.pool_size: range '1–32', the model's is '1–64'",
    ]


#: A field's name followed by a number, as the prose states a default: "`http.max_sessions` (10,000)",
#: "`sandbox.max_staged_bytes_total`, 64 MiB", "`max_versions_per_tool` (default 100)".
STATED = re.compile(
    r"`([a-z_.]+)`,?\s+\(?(?:default\s)?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\d,]*\d)(?:\s?(MiB|KiB))?"
)
UNITS = {"MiB": 2**20, "KiB": 2**10, None: 1}


def stated_default_problems(readme: str) -> list[str]:
    known = _fields(Config)
    problems = []
    for found in STATED.finditer(readme):
        name, number, unit = found.groups()
        if name in known and float(number.replace(",", "")) * UNITS[unit] != _default(name):
            problems.append(f"{name}: said {number}{unit or ''}, the default is {_default(name)}")
    return problems


def test_a_default_the_prose_states_beside_a_field_is_the_fields_default() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    stated = [name for name, _, _ in STATED.findall(readme) if name in _fields(Config)]
    assert len(stated) >= 10, stated  # the HTTP limits, the staged-write caps, ...
    assert stated_default_problems(readme) == []
    broken = readme.replace("`http.max_sessions` (10,000", "`http.max_sessions` (1,000", 1)
    assert stated_default_problems(broken) == ["http.max_sessions: said 1,000, the default is 10000"]
