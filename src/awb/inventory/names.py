"""Tool names are unique ignoring case: the rule's SQL, shared by both stores, and its refusal.

Two live tools named `Fetch_Page` and `fetch_page` read as one to a person or a model scanning a list, and
`sandbox.grants` (keyed by name) would then seem to cover the other. The database enforces the rule with
a unique index on `(lower(name), case_variant)` over live tools: every tool written since carries
`case_variant` 0, so two of one name in any case cannot both commit, from any server. Names are ASCII
(letters, digits, `_`, `-`), where SQLite's and PostgreSQL's `lower()` agree.

An inventory from before the rule may hold case-variants already. Its migration keeps every one of them
(a tool is never lost): the first crafted keeps 0, each later one gets 1, 2, ... so the index can be
built, and `awb doctor` names them until a person deletes all but one. An export holding such variants
imports them numbered the same way; the search indexes of other MCP servers' tools, whose names are
case-sensitive, keep such names too (`keep_case_variants`). Lookup by name stays exact.

Each store also checks the name in its inserting transaction (SQLite's write lock, PostgreSQL's insert
lock), which names the holder in the refusal and covers the one case the index cannot: once the kept
variant numbered 0 is deleted, its namesakes numbered 1, 2, ... still hold the name, and only an older
awb, which does not check, could then write another variant of it.
"""

from __future__ import annotations

from awb.errors import NameConflict

RULE = "names are unique ignoring case"


def holder_query(select: str, mark: str) -> str:
    """`select` (`SELECT ... FROM tools t`) narrowed to the live tool holding a name ignoring case: that
    very name first, then the one the index keys it by; its two parameters are the name, marked `mark`."""
    return (
        f"{select} WHERE lower(t.name) = lower({mark}) AND t.status != 'deleted' "
        f"ORDER BY t.name = {mark} DESC, t.case_variant LIMIT 1"
    )


#: The `case_variant` a kept case-variant takes: one past its live namesakes' (one parameter).
NEXT_VARIANT = (
    "SELECT coalesce(max(case_variant) + 1, 0) FROM tools WHERE lower(name) = lower({mark}) AND status != 'deleted'"
)

#: Names of live tools that equal another's ignoring case, grouped, each group in the order crafted.
VARIANT_NAMES = (
    "SELECT lower(name), name FROM tools WHERE status != 'deleted' AND lower(name) IN ("
    "SELECT lower(name) FROM tools WHERE status != 'deleted' GROUP BY lower(name) HAVING count(*) > 1"
    ") ORDER BY lower(name), {order}"
)


def name_taken(requested: str, holder_name: str, holder_id: str) -> NameConflict:
    """`name_conflict` for a new tool named `requested`, which the live tool `holder_name` holds."""
    message = f"a tool named {holder_name!r} already exists"
    if holder_name != requested:
        message += f"; {RULE}, so {requested!r} is taken"
    return NameConflict(message, name=requested, existing=holder_name, tool_id=holder_id)


def grouped(rows: list[tuple[str, str]]) -> list[list[str]]:
    """`VARIANT_NAMES`' rows as one list of names per lower-cased name (folded by the database, as the
    index folds them)."""
    groups: dict[str, list[str]] = {}
    for folded, name in rows:
        groups.setdefault(folded, []).append(name)
    return list(groups.values())


def variants_warning(groups: list[list[str]]) -> str:
    """`awb doctor`'s words for the case-variants an older inventory holds."""
    pairs = "; ".join(" and ".join(repr(name) for name in group) for group in groups[:20])
    more = f" (and {len(groups) - 20} more)" if len(groups) > 20 else ""
    return (
        f"tools whose names differ only in case, kept from before {RULE}: {pairs}{more}; "
        "a person or model may take one for the other: delete all but one of each"
    )


__all__ = ["NEXT_VARIANT", "RULE", "VARIANT_NAMES", "grouped", "holder_query", "name_taken", "variants_warning"]
