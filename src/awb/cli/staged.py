"""`awb staged list|show|apply|discard`: a person reviews what tools asked to write, one write, several, or
every pending one (`--all`, listed and confirmed first).

Mounted by the main CLI as `awb staged`; a thin layer over `awb.sandbox.staging`. Paths and contents
come from tool code: paths are printed as plain text with control characters escaped (`safe_text`), a
content as written with each hidden character a `⟨U+202E⟩` mark after a warning line (`safe_code`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from awb.cli.common import ConfigOption, JsonOption, absent_inventory, config_for, inventory_missing, open_store
from awb.cli.output import (
    confirm,
    counted,
    fail,
    note,
    print_code,
    print_json,
    print_text,
    report_error,
    say,
    table,
    these,
)
from awb.errors import AwbError, InvalidParams, UsageError
from awb.safe_text import visible
from awb.sandbox import staging

if TYPE_CHECKING:
    from rich.text import Text

    from awb.inventory.sqlite import SQLiteStore

staged_app = typer.Typer(
    help="Review, apply or discard the writes tools staged: list, show, apply, discard.", no_args_is_help=True
)


StagedId = Annotated[int, typer.Argument(metavar="id", help="The staged write's id, as `awb staged list` shows it.")]


def _store(config_path: Path | None, as_json: bool, *, read_only: bool = False) -> SQLiteStore | None:
    """The inventory; None for a read-only command when there is none yet (a check creates nothing)."""
    config = config_for(config_path, as_json)
    if read_only and inventory_missing(config, config_path):
        return None
    try:
        return open_store(config)
    except AwbError as exc:
        raise _fail(exc, as_json) from None


def plain(text: str, *, multiline: bool = False, style: str = "") -> Text:
    """Tool-written text shown literally (`safe_text`); rich is imported when something is shown."""
    from awb.cli.safe_text import plain as literal

    return literal(text, multiline=multiline, style=style)


def _fail(exc: AwbError, as_json: bool) -> typer.Exit:
    report_error(exc, as_json)
    return typer.Exit(exc.exit_code)


def _tool_names(store: SQLiteStore, writes: list[staging.StagedWrite]) -> dict[str, str]:
    names = {}
    for tool_id in {w.tool_id for w in writes}:
        tool = store.get(tool_id)
        names[tool_id] = tool.name if tool is not None else tool_id
    return names


@staged_app.command("list")
def list_command(
    status: Annotated[str, typer.Option(help="pending, applied, discarded or all.")] = "pending",
    limit: Annotated[int, typer.Option(help=f"At most this many (1 to {staging.MAX_PAGE}).")] = staging.PAGE,
    after: Annotated[int | None, typer.Option(help="Only writes with an id past this one (the next page).")] = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List staged writes (pending ones by default), oldest first, a page at a time."""
    if not 1 <= limit <= staging.MAX_PAGE:
        raise _fail(InvalidParams(f"--limit is 1 to {staging.MAX_PAGE}, not {limit}", field="limit"), as_json)
    if status != "all" and status not in staging.LISTED_STATUSES:  # said before looking for an inventory
        raise _fail(InvalidParams(f"no staged-write status {status!r}: pending, applied, discarded or all"), as_json)
    store = _store(config, as_json, read_only=True)
    writes: list[staging.StagedWrite] = []
    names: dict[str, str] = {}
    next_after = None
    if store is not None:
        writes, next_after, names = _listed(store, status, limit, after)
    if as_json:
        listed = [{**w.to_dict(content=False), "tool": names[w.tool_id]} for w in writes]
        print_json({"writes": listed, "count": len(listed), "next_after": next_after})
        return
    if not writes:
        say(f"no {'' if status == 'all' else status + ' '}staged writes")
        return
    table(
        "staged writes",
        ("id", "tool", "call", "path", "bytes", "staged at", "status"),
        [
            (w.id, plain(names[w.tool_id]), plain(w.call_id or "-"), plain(w.path), w.size, w.created_at, w.status)
            for w in writes
        ],
    )
    if next_after is not None:
        again = ["awb staged list", *([f"--status {status}"] if status != "pending" else [])]
        again += [*([f"--limit {limit}"] if limit != staging.PAGE else []), f"--after {next_after}"]
        note(f"more staged writes: {' '.join(again)}" + (f" {_config_flag(config)}" if config is not None else ""))


def _config_flag(config: Path) -> str:
    import shlex

    return f"--config {shlex.quote(str(config))}"


def _listed(
    store: SQLiteStore, status: str, limit: int, after: int | None
) -> tuple[list[staging.StagedWrite], int | None, dict[str, str]]:
    try:
        writes, next_after = staging.staged_page(store, None if status == "all" else status, after=after, limit=limit)
        names = _tool_names(store, writes)
    finally:
        store.close()
    return writes, next_after, names


def _store_holding(staged_id: int, config_path: Path | None, as_json: bool) -> SQLiteStore:
    """The inventory for a command on one staged write. Where there is none there is no such write: one
    error line, and no inventory (nor its folders) created by a mistyped `--config` or path."""
    missing = absent_inventory(config_for(config_path, as_json))
    if missing is not None:
        raise _fail(InvalidParams(f"no staged write #{staged_id}: there is no inventory at {missing}"), as_json)
    store = _store(config_path, as_json)
    assert store is not None
    return store


@staged_app.command("show")
def show_command(staged_id: StagedId, config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Show one staged write with its content."""
    store = _store_holding(staged_id, config, as_json)
    try:
        write = staging.get_staged(store, staged_id)
        name = _tool_names(store, [write])[write.tool_id]
    except AwbError as exc:
        raise _fail(exc, as_json) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({**write.to_dict(), "tool": name}, indent=2))
        return
    print_text(
        plain(f"#{write.id} ", style="bold")
        + plain(f"{write.path}  ({write.size} bytes, {write.status}, by {name}, call {write.call_id or '-'})")
    )
    say("-" * 40)
    # The content as written, hidden characters as marks after a line that counts them: as a tool's code.
    print_code(write.content)


#: What each action makes of a write, as said to the person.
_DONE = {"apply": "applied", "discard": "discarded"}


def _change(
    action: str, ids: list[int], every: bool, yes: bool, config_path: Path | None, as_json: bool, force: bool = False
) -> None:
    """Apply or discard the writes `ids` (or, with `every`, every pending write, once confirmed), each on
    its own: one that fails is reported and the rest go on; the exit code is the first failure's."""
    if every == bool(ids):
        said = "give staged write ids or --all, not both" if every else "say which: staged write ids, or --all"
        fail(UsageError(said), as_json)
    ids = list(dict.fromkeys(ids))  # an id given twice is done once
    config = config_for(config_path, as_json)
    missing = absent_inventory(config)
    if missing is not None:
        if every:  # nothing is pending where there is no inventory, and none is created to find that out
            return _report(action, [], as_json, bulk=True)
        named = ", ".join(f"#{staged_id}" for staged_id in ids)
        raise _fail(
            InvalidParams(f"no staged write{'s' if len(ids) > 1 else ''} {named}: there is no inventory at {missing}"),
            as_json,
        )
    store = _store(config_path, as_json)
    assert store is not None
    from awb.config import find_config_file

    config_file = find_config_file(config_path)
    protected = staging.protected_paths(config, *([config_file] if config_file is not None else []))
    outcomes: list[tuple[int, staging.StagedWrite | AwbError]] = []
    try:
        if every:
            ids = _confirmed_pending(store, action, yes, as_json)
        for staged_id in ids:
            try:
                if action == "apply":
                    outcomes.append(
                        (
                            staged_id,
                            staging.apply_staged(
                                store, staged_id, grants=config.sandbox.grants, protected=protected, force=force
                            ),
                        )
                    )
                else:
                    outcomes.append((staged_id, staging.discard_staged(store, staged_id)))
            except AwbError as exc:
                outcomes.append((staged_id, exc))
    finally:
        store.close()
    _report(action, outcomes, as_json, bulk=every or len(ids) > 1)


def _confirmed_pending(store: SQLiteStore, action: str, yes: bool, as_json: bool) -> list[int]:
    """Every pending write's id, once the person has seen the list and said yes (or gave --yes). Only these
    are done: a write staged while the person reads waits for the next command."""
    pending: list[staging.StagedWrite] = []
    after = None
    while True:  # a page at a time: each write's content is read, and dropped once listed
        page, after = staging.staged_page(store, staging.PENDING, after=after, limit=staging.MAX_PAGE)
        pending += [replace(write, content="") for write in page]
        if after is None:
            break
    if not pending or (yes and as_json):
        return [write.id for write in pending]

    def listing() -> None:
        names = _tool_names(store, pending)
        table(
            f"{counted(len(pending), 'pending staged write')} to {action}",
            ("id", "tool", "path"),
            [(w.id, plain(names[w.tool_id]), plain(w.path)) for w in pending],
            stderr=as_json,
        )

    if not as_json:
        listing()
    if not yes:
        if not sys.stdin.isatty():
            fail(
                UsageError(
                    f"refusing to {action} every staged write without confirmation: no terminal to ask on; pass --yes"
                ),
                as_json,
            )
        if as_json:
            listing()  # on stderr, with the question: stdout is the JSON result's alone
        if not confirm(f"{action} {these(len(pending), 'staged write')}?"):
            note(f"nothing {_DONE[action]}")
            raise typer.Exit(1)
    return [write.id for write in pending]


def _report(
    action: str, outcomes: list[tuple[int, staging.StagedWrite | AwbError]], as_json: bool, *, bulk: bool
) -> None:
    """What happened to each write. One id alone is said as before (the write, or one error); several, or
    --all, a line (or a JSON result) each and a count. Exits with the first failure's code."""
    failures = [outcome for _, outcome in outcomes if isinstance(outcome, AwbError)]
    if not bulk:
        ((_, outcome),) = outcomes
        if isinstance(outcome, AwbError):
            raise _fail(outcome, as_json)
        if as_json:
            typer.echo(json.dumps(outcome.to_dict(content=False)))
        else:
            print_text(plain(f"{outcome.status} #{outcome.id}: ") + plain(outcome.path))
        return
    if as_json:
        results = [
            {"id": staged_id, "ok": False, "error": outcome.to_dict()}
            if isinstance(outcome, AwbError)
            else {"id": staged_id, "ok": True, "write": outcome.to_dict(content=False)}
            for staged_id, outcome in outcomes
        ]
        print_json({"results": results, "count": len(results), "failed": len(failures)})
    elif not outcomes:
        say("no pending staged writes")
    else:
        for staged_id, outcome in outcomes:
            if isinstance(outcome, AwbError):
                typer.echo(visible(f"error ({outcome.code}): #{staged_id}: {outcome.message}"), err=True)
            else:
                print_text(plain(f"{outcome.status} #{outcome.id}: ") + plain(outcome.path))
        done = len(outcomes) - len(failures)
        summary = f"{_DONE[action]} {done} of {counted(len(outcomes), 'staged write')}"
        (note if failures else say)(summary + (f"; {len(failures)} failed" if failures else ""))
    if failures:
        raise typer.Exit(failures[0].exit_code)


# Said in each command's own help instead of an Arguments section: typer would show the type there as
# `<list[int]>`, a Python type where a person wants the form they type (`ID...`, in the usage line).
StagedIds = Annotated[list[int] | None, typer.Argument(metavar="ID", show_default=False, hidden=True)]
AllOption = Annotated[bool, typer.Option("--all", help="Every pending staged write (listed, then asked).")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="With --all: do not ask.")]


@staged_app.command("apply")
def apply_command(
    staged_ids: StagedIds = None,
    every: AllOption = False,
    yes: YesOption = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Apply even outside the tool's granted directories (never onto awb's files)."),
    ] = False,
) -> None:
    """Write staged writes' content to their paths for real.

    ID...: staged write ids, as `awb staged list` shows them (or --all)."""
    _change("apply", staged_ids or [], every, yes, config, as_json, force)


@staged_app.command("discard")
def discard_command(
    staged_ids: StagedIds = None,
    every: AllOption = False,
    yes: YesOption = False,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Drop staged writes without writing anything.

    ID...: staged write ids, as `awb staged list` shows them (or --all)."""
    _change("discard", staged_ids or [], every, yes, config, as_json)
