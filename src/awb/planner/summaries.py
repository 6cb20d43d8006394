"""Large tool results and plan outputs enter the model's context as summaries, never as raw dumps.

`summarize_payload` keeps what a planner needs to decide the next step: the shape of the data, a few
redacted items, aggregates over every item, and where the whole payload was stored.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from awb.redaction import redact_payload
from awb.safe_copy import safe_dumps

Purpose = Literal["for_planning", "for_user", "for_debug"]
#: Results serialised above this many bytes are summarised before they reach the model.
SUMMARY_THRESHOLD_BYTES = 24 * 1024
_SAMPLE_SIZES: dict[str, int] = {"for_planning": 3, "for_user": 5, "for_debug": 8}
#: A string field with at most this many distinct values gets a top-values count.
_CATEGORY_LIMIT = 20
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def payload_size(payload: Any) -> int:
    return len(_dumps(payload).encode("utf-8"))


def needs_summary(payload: Any, threshold: int = SUMMARY_THRESHOLD_BYTES) -> bool:
    return payload_size(payload) > threshold


def summarize_payload(
    label: str,
    payload: Any,
    *,
    purpose: Purpose = "for_planning",
    max_chars: int = 4000,
    storage_dir: Path | None = None,
) -> dict[str, Any]:
    """A JSON-ready summary of `payload` that serialises to at most `max_chars` characters.

    With `storage_dir`, the whole (redacted) payload is written to `<storage_dir>/<label>.json` and the
    summary's `storage_ref` names that file.
    """
    redacted = redact_payload(payload)
    text = _dumps(redacted)
    rows = _rows(redacted)
    summary: dict[str, Any] = {
        "label": label,
        "original_size": {"bytes": len(text.encode("utf-8")), **({"items": len(rows)} if rows is not None else {})},
        "truncated": False,
        "schema": _schema(redacted, rows),
        "sample": [],
        "aggregates": _aggregates(rows) if rows is not None else {},
        "notes": [],
        "storage_ref": None,
    }
    if storage_dir is not None:
        summary["storage_ref"] = str(_store(storage_dir, label, text))
    sample: list[Any] = list(rows[: _SAMPLE_SIZES[purpose]]) if rows is not None else [redacted]
    summary["sample"] = sample
    if rows is not None and len(rows) > len(sample):
        summary["truncated"] = True
        summary["notes"].append(f"showing {len(sample)} of {len(rows)} items; aggregates cover all of them")
    if purpose == "for_debug":
        summary["notes"].append(f"payload type: {type(payload).__name__}")
    return _fit(summary, max_chars)


def _dumps(value: Any) -> str:
    return safe_dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _rows(payload: Any) -> list[Any] | None:
    """The list that makes a payload "wide": the payload itself, or its one longest list field."""
    if isinstance(payload, list):
        return payload
    if isinstance(payload, dict):
        lists = [v for v in payload.values() if isinstance(v, list)]
        if lists:
            return max(lists, key=len)
    return None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _schema(payload: Any, rows: list[Any] | None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": _type_name(payload)}
    if isinstance(payload, dict):
        schema["fields"] = {k: _type_name(v) for k, v in list(payload.items())[:50]}
    if rows:
        fields: dict[str, set[str]] = {}
        for row in rows:
            if isinstance(row, dict):
                for key, value in row.items():
                    fields.setdefault(str(key), set()).add(_type_name(value))
        schema["items"] = {k: "|".join(sorted(v)) for k, v in list(fields.items())[:50]} or _type_name(rows[0])
    return schema


def _aggregates(rows: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"count": len(rows)}
    columns: dict[str, list[Any]] = {}
    for row in rows:
        if isinstance(row, dict):
            for key, value in row.items():
                columns.setdefault(str(key), []).append(value)
    if not columns:
        numbers = [v for v in rows if _is_number(v)]
        if numbers and len(numbers) == len(rows):
            out["values"] = _numeric(numbers)
        return out
    fields: dict[str, Any] = {}
    for key, values in list(columns.items())[:30]:
        numbers = [v for v in values if _is_number(v)]
        strings = [v for v in values if isinstance(v, str)]
        if numbers and len(numbers) == len(values):
            fields[key] = _numeric(numbers)
        elif strings and len(strings) == len(values):
            counts = Counter(strings)
            stats: dict[str, Any] = {"distinct": len(counts)}
            if len(counts) <= _CATEGORY_LIMIT:
                stats["top"] = dict(counts.most_common(5))
            if all(_looks_like_date(s) for s in strings[:20]):
                stats["min"], stats["max"] = min(strings), max(strings)
            fields[key] = stats
    out["fields"] = fields
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _numeric(values: list[Any]) -> dict[str, Any]:
    total = sum(values)
    return {"sum": total, "min": min(values), "max": max(values), "mean": round(total / len(values), 4)}


def _looks_like_date(text: str) -> bool:
    return len(text) >= 10 and text[4] == "-" and text[7] == "-" and text[:4].isdigit()


def _store(storage_dir: Path, label: str, text: str) -> Path:
    storage_dir.mkdir(parents=True, exist_ok=True)
    name = _LABEL_CHARS.sub("_", label).strip("._") or "payload"
    path = storage_dir / f"{name}.json"
    counter = 1
    while path.exists():
        counter += 1
        path = storage_dir / f"{name}-{counter}.json"
    path.write_text(text, encoding="utf-8")
    return path


def _fit(summary: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """Shrink the summary until it fits: fewer sample items, then shorter strings, then fewer fields."""
    while len(_dumps(summary)) > max_chars and len(summary["sample"]) > 1:
        summary["sample"].pop()
        summary["truncated"] = True
    if len(_dumps(summary)) > max_chars:
        summary["sample"] = [_clip(item, 200) for item in summary["sample"]]
        summary["truncated"] = True
    for key in ("aggregates", "schema", "sample"):
        if len(_dumps(summary)) > max_chars:
            summary[key] = {} if key != "sample" else []
            summary["notes"].append(f"{key} left out to stay within {max_chars} characters")
    if len(_dumps(summary)) > max_chars:
        summary["notes"] = summary["notes"][-1:]
    return summary


def _clip(value: Any, chars: int, depth: int = 0) -> Any:
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + "…"
    if depth > 6:
        return "…"
    if isinstance(value, dict):
        return {k: _clip(v, chars, depth + 1) for k, v in list(value.items())[:20]}
    if isinstance(value, list):
        return [_clip(v, chars, depth + 1) for v in value[:5]]
    return value
