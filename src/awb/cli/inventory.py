"""`awb inventory ...`: look into the inventory and change what is equipped, current or kept.

Listing commands (`list`, `search`, `inspect`, `versions`) only read: without an inventory they say so
and create nothing; neither do the commands on one tool (`equip`, `delete`, ...), which find no tool there. Ids are printed whole: tables never wrap an id column, and a pipe gets full lines.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from awb.cli.common import (
    ConfigOption,
    JsonOption,
    ToolArgument,
    absent_inventory,
    cli_names,
    config_for,
    inventory_missing,
    with_store,
    with_workbench,
)
from awb.cli.output import confirm, counted, fail, note, print_code, print_json, say, table, these
from awb.cli.transfer import register as register_transfer
from awb.errors import AwbError, ToolNotFound, UsageError

if TYPE_CHECKING:
    from awb.browse import SearchResult, ToolPage
    from awb.config import Config
    from awb.inventory.models import ToolSummary
    from awb.inventory.store import Store
    from awb.workbench import Inspection, Workbench

inventory_app = typer.Typer(
    help="Look into and look after the inventory: list, search, inspect, versions, equip, unequip, delete, rollback, purge, export, import.",
    no_args_is_help=True,
)

MEMORY_LEVELS = ("short_term", "medium_term", "long_term", "archived")
SUMMARY_COLUMNS = ["name", "tool_id", "memory", "uses", "score", "description"]
#: Calls shown by `inspect` in table form (the JSON has every recent call the workbench returns).
RECENT_CALLS_SHOWN = 10
#: Tools `awb inventory list` shows without --limit.
LIST_PAGE = 50
#: Results of `awb inventory search` without --limit, as `awb_search`'s default.
DEFAULT_SEARCH_LIMIT = 10


def _summary_rows(tools: list[ToolSummary]) -> list[tuple[Any, ...]]:
    # Descriptions and tags are written by tools' authors (language models): shown literally, never as
    # console markup, their controls and bidi overrides escaped. Rich is imported only for a table.
    from awb.cli.safe_text import plain

    return [
        (
            t.name,
            t.tool_id,
            t.memory_level,
            t.usage_count,
            "" if t.score is None else f"{t.score:.3f}",
            plain(t.description[:60]),
        )
        for t in tools
    ]


def _read(config_path: Path | None, as_json: bool, tool: str | None = None) -> Any:
    """The config for a command, or None (said on stderr) when there is no inventory to read. With `tool`
    (a look at or a change to one tool), no inventory is no such tool: one line, and none is created."""
    config = config_for(config_path, as_json)
    if tool is not None:
        missing = absent_inventory(config)
        if missing is not None:
            fail(ToolNotFound(f"no tool {tool!r}: there is no inventory at {missing}"), as_json)
        return config
    return None if inventory_missing(config, config_path) else config


@inventory_app.command("list")
def inventory_list(
    config_path: ConfigOption = None,
    memory_level: Annotated[str | None, typer.Option(help="short_term, medium_term, long_term or archived.")] = None,
    tag: Annotated[str | None, typer.Option(help="Only tools with this tag.")] = None,
    query: Annotated[str | None, typer.Option(help="Only tools matching this search.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = LIST_PAGE,
    offset: Annotated[int, typer.Option(help="Skip this many (a previous page's next_offset).")] = 0,
    as_json: JsonOption = False,
) -> None:
    """List tools, hot ones first."""
    if memory_level is not None and memory_level not in MEMORY_LEVELS:
        fail(UsageError(f"unknown memory level {memory_level!r}: use {', '.join(MEMORY_LEVELS)}"), as_json)
    config = _read(config_path, as_json)
    if config is None:
        if as_json:
            # The shape of every page (`ToolPage` and its count), so a script reads the same keys.
            print_json({"tools": [], "total": 0, "offset": offset, "next_offset": None, "count": 0})
        else:
            table("0 tools", SUMMARY_COLUMNS, [])
        return

    def read(store: Store) -> ToolPage:
        from awb import browse

        return browse.list_page(
            store,
            lambda q, n: _search(store, config, q, n, matches_only=True),
            memory_level=memory_level,  # type: ignore[arg-type]
            tag=tag,
            query=query,
            limit=limit,
            offset=offset,
        )

    page = with_store(config, as_json, read)
    if as_json:
        print_json({**page.model_dump(mode="json"), "count": len(page.tools)})
        return
    table(f"{len(page.tools)} of {page.total} tools", SUMMARY_COLUMNS, _summary_rows(page.tools))
    if page.next_offset is not None:
        import shlex

        given = {"--memory-level": memory_level, "--tag": tag, "--query": query, "--config": config_path}
        again = [f"{flag} {shlex.quote(str(value))}" for flag, value in given.items() if value is not None]
        again += [f"--limit {limit}"] if limit != LIST_PAGE else []
        note(f"more tools: awb inventory list {' '.join([*again, f'--offset {page.next_offset}'])}")


@inventory_app.command("search")
def inventory_search(
    query: Annotated[str, typer.Argument(help="Words describing the tool.")],
    config_path: ConfigOption = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many (default 10).")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="The same as --limit (the spec's name).")] = None,
    text: Annotated[
        bool, typer.Option("--text", help="Full-text ranking (BM25) only: never loads the embedding model.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Search tools by what they do (hybrid, as the server ranks them, when the inventory has vectors)."""
    if limit is not None and top_k is not None and limit != top_k:
        # As awb_search refuses them: the one setting given two values is a mistake, not a choice to guess.
        fail(UsageError(f"--limit {limit} and --top-k {top_k} are the same setting; give one"), as_json)
    limit = next((n for n in (limit, top_k) if n is not None), DEFAULT_SEARCH_LIMIT)
    config = _read(config_path, as_json)
    if config is not None and text:
        config = config.model_copy(update={"search": config.search.model_copy(update={"mode": "text"})})
    if config is None:
        empty = {"query": query, "mode": "text", "results": []}
        if as_json:
            print_json(empty)
        else:
            table(f"search {query!r}", SUMMARY_COLUMNS, [])
        return
    # A running server of this workspace has its model loaded: ask it, rather than load the model here
    # (~0.5 s); a text search, or no reachable server, searches the store from this process.
    served = None if text else _served_search(config, query, limit)
    result = served or with_store(config, as_json, lambda store: _search(store, config, query, limit))
    if as_json:
        print_json(result.model_dump(mode="json"))
    else:
        table(f"search {query!r} ({result.mode})", SUMMARY_COLUMNS, _summary_rows(result.results))


def _served_search(config: Config, query: str, limit: int) -> SearchResult | None:
    """The search of this workspace's running HTTP server (`GET /api/tools/search`), or None when no
    server of this workspace and inventory answers it (then the caller searches the store itself)."""
    from awb.cli.pidfile import inspect_pid_file

    try:
        found = inspect_pid_file(config.pid_file)
    except AwbError:  # a pid file that cannot be read names no server to ask
        return None
    server = found.record if found is not None and found.alive else None
    if server is None or server.transport != "http" or server.inventory != str(config.inventory_path):
        return None
    # Only with a server to ask: urllib's request module (with http.client and ssl) costs ~0.01 s.
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    from awb.browse import SearchResult
    from awb.server.address import http_url

    host = "127.0.0.1" if server.host in ("", "0.0.0.0") else "::1" if server.host == "::" else server.host
    url = http_url(host, server.port, "/api/tools/search?") + urllib.parse.urlencode({"q": query, "limit": limit})
    headers = {"Authorization": f"Bearer {config.auth_token.get_secret_value()}"} if config.auth_token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as reply:
            data = json.load(reply)
    except (OSError, ValueError):  # refused, timed out, an error status, not JSON: search here instead
        return None
    try:
        return SearchResult.model_validate(data)
    except ValueError:
        return None


def _search(store: Store, config: Config, query: str, limit: int, *, matches_only: bool = False) -> SearchResult:
    """The workbench's search on the store alone; hybrid loads the model only for an inventory with vectors."""
    from awb import browse
    from awb.cli import output
    from awb.search.hybrid import search_engine

    engine = search_engine(store, config.search, few_queries=True)
    found = browse.search(store, engine, query, limit=limit, matches_only=matches_only)
    # The model loaded here: nothing else of this process needs taking apart at its end (awb.cli.main).
    output.NOTHING_TO_TEAR_DOWN = bool(getattr(engine.embedder, "ready", False))
    return found


@inventory_app.command("inspect")
def inventory_inspect(tool: ToolArgument, config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show a tool's full record, code, versions and recent calls."""
    config = _read(config_path, as_json, tool)
    found: Inspection = with_workbench(config, as_json, lambda wb: wb.inspect(tool))
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    from awb.cli.safe_text import code, plain

    record = found.tool
    table(
        f"{record.name} ({record.tool_id})",
        ["field", "value"],
        [
            ("tool_id", record.tool_id),
            ("description", plain(record.description)),
            ("language / runtime", f"{record.language} / {record.runtime}"),
            ("version", record.version),
            ("status", record.status),
            ("memory level", record.memory_level),
            ("equipped", "yes" if record.equipped else "no"),
            # A use is a successful call (what moves the tool between tiers); failed calls apart.
            ("uses / failed calls", f"{record.usage_count} / {record.failure_count}"),
            ("last used", record.last_used_at),
            ("tags", plain(", ".join(record.metadata.tags))),
            # JSON, whose backslashes are its own escapes: shown as code is.
            ("input schema", code(json.dumps(record.input_schema, ensure_ascii=False))),
        ],
    )
    _versions_table(found, title="versions")
    calls = found.recent_calls[:RECENT_CALLS_SHOWN]
    table(
        f"recent calls ({len(calls)} of {len(found.recent_calls)})",
        ["call_id", "at", "version", "ms", "result"],
        [
            (c.call_id or "-", c.at, c.version, f"{c.duration_ms:.1f}", "ok" if c.ok else c.error_code or "failed")
            for c in calls
        ],
    )
    print_code(record.code, record.language)


def _versions_table(found: Inspection, title: str) -> None:
    from awb.cli.safe_text import plain

    table(
        title,
        # A version counts every call made with it, failed ones included (the tool counts successes).
        ["version", "created", "calls", "failed", "description"],
        [
            (
                f"{'*' if v.version == found.tool.version else ' '}{v.version}",
                v.created_at,
                v.usage_count,
                v.failure_count,
                plain(v.description[:60]),
            )
            for v in found.versions
        ],
    )
    if found.versions and found.versions[0].version > 1:
        # Numbers start at 1 and only pruning removes versions: a gap at the start is what it removed.
        say(f"versions before {found.versions[0].version} were removed (max_versions_per_tool)")


@inventory_app.command("versions")
def inventory_versions(tool: ToolArgument, config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show a tool's versions with the calls made with each and how many failed (* marks the current one)."""
    config = _read(config_path, as_json, tool)
    found: Inspection = with_workbench(config, as_json, lambda wb: wb.inspect(tool))
    if as_json:
        print_json(
            {
                "tool_id": found.tool.tool_id,
                "current": found.tool.version,
                "versions": [v.model_dump(mode="json", exclude={"code"}) for v in found.versions],
            }
        )
        return
    _versions_table(found, title=f"{found.tool.name} ({found.tool.tool_id})")


@inventory_app.command("equip")
def inventory_equip(tool: ToolArgument, config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Equip a tool: running servers list it as its own MCP tool and notify their clients."""
    config = _read(config_path, as_json, tool)
    _print_equip(
        with_workbench(config, as_json, lambda wb: (wb.equip(tool, names=cli_names(config)), wb.equipped_tools())),
        as_json,
    )


@inventory_app.command("unequip")
def inventory_unequip(tool: ToolArgument, config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Unequip a tool: it leaves the servers' tool lists but stays in the inventory."""
    config = _read(config_path, as_json, tool)
    _print_equip(with_workbench(config, as_json, lambda wb: (wb.unequip(tool), wb.equipped_tools())), as_json)


def _print_equip(outcome: Any, as_json: bool) -> None:
    record, equipped = outcome
    names = [t.name for t in equipped]
    if as_json:
        print_json(
            {"tool_id": record.tool_id, "name": record.name, "equipped": record.equipped, "equipped_tools": names}
        )
    else:
        state = "equipped" if record.equipped else "not equipped"
        say(f"{record.name} is {state}; equipped now: {', '.join(names) or '(none)'}")


@inventory_app.command("delete")
def inventory_delete(tool: ToolArgument, config_path: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Delete a tool (as awb_delete does): it can no longer be called; its record stays until purged."""
    config = _read(config_path, as_json, tool)
    record = with_workbench(config, as_json, lambda wb: wb.delete(tool))
    if as_json:
        print_json({"tool_id": record.tool_id, "name": record.name, "status": record.status})
    else:
        say(f"deleted {record.name} ({record.tool_id}); `awb inventory purge --deleted` removes it for good")


@inventory_app.command("rollback")
def inventory_rollback(
    tool: ToolArgument,
    to_version: Annotated[int, typer.Argument(metavar="version", help="The version to make current.")],
    config_path: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make an earlier version of a tool current again."""
    config = _read(config_path, as_json, tool)
    record = with_workbench(config, as_json, lambda wb: wb.rollback(tool, to_version))
    if as_json:
        print_json({"tool_id": record.tool_id, "name": record.name, "version": record.version})
    else:
        now = "was already" if record.parent_version == record.version else "is now"
        say(f"{record.name} {now} at version {record.version}")


@inventory_app.command("purge")
def inventory_purge(
    config_path: ConfigOption = None,
    archived_before: Annotated[
        float | None,
        typer.Option(
            "--archived-before", help="Remove tools archived (and given no new version since) more than DAYS days ago."
        ),
    ] = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Remove soft-deleted tools too.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove archived and/or deleted tools for good, with their versions and call records."""
    if archived_before is None and not deleted:
        fail(UsageError("say what to purge: --archived-before DAYS, --deleted, or both"), as_json)
    from awb.forget import MAX_PURGE_DAYS

    if archived_before is not None and not 0 <= archived_before <= MAX_PURGE_DAYS:  # NaN too; named as typed
        days = f"from 0 to {MAX_PURGE_DAYS} (got {archived_before:g})"
        fail(UsageError(f"--archived-before takes a number of days {days}"), as_json)
    config = config_for(config_path, as_json)

    def plan(wb: Workbench) -> Any:
        return wb.purge(archived_before_days=archived_before, deleted=deleted, dry_run=True)

    # No inventory, nothing to purge: none is created to find that out.
    doomed = [] if absent_inventory(config) is not None else with_workbench(config, as_json, plan)
    if not doomed:
        if as_json:
            print_json({"purged": [], "count": 0})
        else:
            say("nothing to purge")
        return

    def listing() -> None:
        table(
            f"{counted(len(doomed), 'tool')} to remove for good",
            [*SUMMARY_COLUMNS, "status"],
            [(*row, t.status) for row, t in zip(_summary_rows(doomed), doomed, strict=True)],
            stderr=as_json,
        )

    if not as_json:
        listing()
    if not yes:
        if not sys.stdin.isatty():
            fail(UsageError("refusing to purge without confirmation: no terminal to ask on; pass --yes"), as_json)
        if as_json:
            listing()  # on stderr, with the question: stdout is the JSON result's alone
        if not confirm(f"remove {these(len(doomed), 'tool')} for good?"):
            note("nothing removed")
            raise typer.Exit(1)
    ids = {t.tool_id for t in doomed}

    # Only what was shown: anything archived or deleted since then waits for the next purge.
    removed = with_workbench(
        config, as_json, lambda wb: wb.purge(archived_before_days=archived_before, deleted=deleted, only=ids)
    )
    if as_json:
        print_json({"purged": [t.model_dump(mode="json") for t in removed], "count": len(removed)})
    else:
        say(f"removed {counted(len(removed), 'tool')} for good")


register_transfer(inventory_app)  # `export` and `import` (awb.cli.transfer), listed after the others
