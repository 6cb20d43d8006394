"""An export in the format an older awb reads, for going back to it.

Export format 3 gives each version, blueprint exchange and run-log entry a line of its own (a line of format
2 held a tool with all its versions, or a session with all its exchanges and logs, which nothing bounds).
An awb from before format 3 reads formats 1 and 2 only: `as_format_2` regroups a format-3 export's lines
as format 2 wrote them, one tool or session at a time (a session's lines are held until it ends)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

#: The formats `awb inventory export --format` writes.
WRITABLE_FORMATS = (2, 3)


def as_format_2(lines: Iterable[str]) -> Iterator[str]:
    """The lines of a format-3 export (`transfer.export_lines`), as format 2."""
    held: dict[str, Any] | None = None
    for number, line in enumerate(lines):
        record = json.loads(line)
        if number == 0:
            yield _line({**record, "version": 2})
            continue
        if held is not None and "tool" in held and "version" in record:
            held["versions"].append(record["version"])
            continue
        if held is not None and "session" in held and ("exchange" in record or "log" in record):
            if "exchange" in record:
                held["exchanges"].append(record["exchange"])
            else:
                held["logs"].append(record["log"])
            continue
        if held is not None:
            yield _line(held)
            held = None
        if "tool" in record:
            held = {**record, "versions": []}
        elif "session" in record:
            held = {**record, "exchanges": [], "logs": []}
        else:
            yield line
    if held is not None:
        yield _line(held)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


__all__ = ["WRITABLE_FORMATS", "as_format_2"]
