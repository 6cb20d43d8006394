"""What `awb_inspect` answers: a tool's full record, its kept versions listed without their code, schemas
and examples, and its recent calls; one version whole when asked for by number.

Whole, every kept version's code, schemas and examples went out with each answer: with the default 100
versions of up to ~450 KB each, 44 MB a call, a size a tool's author chooses and any client may ask for
again and again.
"""

from __future__ import annotations

from typing import Any

from awb.errors import InvalidParams
from awb.workbench import Workbench

#: What each entry of the history leaves out (the asked-for version and the tool's record hold it whole).
WHOLE_ONLY = frozenset({"code", "input_schema", "output_schema", "examples"})


def inspection_reply(workbench: Workbench, ref: str, number: int | None = None) -> dict[str, Any]:
    """The answer to `awb_inspect` for the tool `ref`, with version `number` whole under `version`."""
    found = workbench.inspect(ref)
    reply = found.model_dump(mode="json", exclude={"versions": {"__all__": set(WHOLE_ONLY)}})
    if number is None:
        return reply
    chosen = next((v for v in found.versions if v.version == number), None)
    if chosen is None:
        kept = [v.version for v in found.versions]
        raise InvalidParams(
            f"tool {found.tool.name!r} has no version {number} (its versions: {', '.join(map(str, kept))})",
            field="version",
            tool_id=found.tool.tool_id,
            versions=kept,
        )
    reply["version"] = chosen.model_dump(mode="json")
    return reply
