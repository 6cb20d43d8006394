"""A tool's next version, added and made current in one step (`Store.add_current_version`): the parts
every store shares.

The number is chosen inside the write, one past every version the tool holds (and its current one):
numbered outside it, two servers could both pick N+1 after a rollback moved the tool back between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from awb.inventory.models import ToolVersion


@dataclass(frozen=True)
class NewVersion:
    """What `Store.add_current_version` did: `added` it (`number` is the new version's, `removed` the
    versions pruned past `keep`), or refused it because the tool was `deleted`, is `gone` (purged), or
    `changed` (`number` is the version current now, no longer the one the update was based on)."""

    outcome: Literal["added", "changed", "deleted", "gone"]
    number: int
    removed: tuple[int, ...] = ()


def refusal(row: tuple[str, int] | None, based_on: int) -> NewVersion | None:
    """Why the tool's (status, current version) `row`, read under the write's lock, takes no new version
    based on `based_on`; None when it does."""
    if row is None:
        return NewVersion("gone", based_on)
    status, current = row
    if status == "deleted":
        return NewVersion("deleted", current)
    if current != based_on:
        return NewVersion("changed", current)
    return None


def next_number(stored: list[int], current: int) -> int:
    return max([*stored, current]) + 1


def current_fields(version: ToolVersion, based_on: int) -> dict[str, Any]:
    """The tool's columns once `version` is current (the fields of a version live on the tool too)."""
    return {
        "version": version.version,
        "parent_version": based_on,
        "code": version.code,
        "description": version.description,
        "input_schema": version.input_schema,
        "output_schema": version.output_schema,
        "examples": version.examples,
        "runtime": version.runtime,
        "updated_at": version.created_at,
    }


__all__ = ["NewVersion", "current_fields", "next_number", "refusal"]
