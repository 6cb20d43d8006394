"""The README's command lines hold: its Command line table lists every command with the options it takes, and
its `awb start` lines that bind off loopback come with what such a server refuses to start without (a token),
and the names its clients use."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main

from awb.cli.main import app
from clitools import assert_one_error_line, clean_env, run_awb
from support import REPO

BLOCK = re.compile(r"^```(?:sh|bash|ini)\n(.*?)^```", re.MULTILINE | re.DOTALL)
OFF_LOOPBACK = re.compile(r"awb start .*--host (?!127\.0\.0\.1|localhost|::1)\S+")


def _blocks_binding_off_loopback() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return [block for block in BLOCK.findall(readme) if OFF_LOOPBACK.search(block)]


def test_every_readme_block_that_binds_off_loopback_sets_a_token_and_the_client_host_names() -> None:
    blocks = _blocks_binding_off_loopback()
    assert len(blocks) >= 2  # the PostgreSQL set-up and the replicas' unit file
    for block in blocks:
        assert "AWB_AUTH_TOKEN" in block, block
        assert "AWB_ALLOWED_HOSTS" in block, block


def test_the_bind_those_blocks_guard_against_is_refused_in_one_line(tmp_path: Path) -> None:
    # What a copy of the README's command without the token gets: the reason the blocks above carry one.
    result = run_awb(tmp_path, "start", "--transport", "http", "--host", "0.0.0.0", "--port", "0", env=clean_env())
    assert "without auth_token" in assert_one_error_line(result, "config_invalid")


#: A row of the Command line table: `awb COMMAND [ARGS and options]`, then what it does.
ROW = re.compile(r"^\| `(awb [^`]+)` \|", re.MULTILINE)
#: Said once above the table for every command that reads a workspace, not on each row.
SAID_FOR_ALL = {"--config", "-c", "--help", "-h"}


def _options(param: Any) -> set[str]:
    """A parameter's option spellings (an argument has none), less those said for every command."""
    return {opt for opt in getattr(param, "opts", []) if opt.startswith("-")} - SAID_FOR_ALL


def _command_line_section(readme: str) -> str:
    return readme[readme.index("\n## Command line") : readme.index("\n## Agent runtime")]


def _real_commands() -> dict[str, set[str]]:
    def walk(command: Any, path: str) -> Iterator[tuple[str, set[str]]]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, {opt for param in command.params for opt in _options(param)}

    return dict(walk(typer.main.get_command(app), "awb"))


def _table_problems(readme: str) -> list[str]:
    """What the Command line table gets wrong against the real command tree: a command without a row, an
    option a row leaves out (either of its spellings will do), a row or option that does not exist."""
    real = _real_commands()
    rows: dict[str, set[str]] = {}
    for signature in ROW.findall(_command_line_section(readme)):
        words = signature.replace("\\|", "|").split()
        path = " ".join(["awb", *itertools.takewhile(lambda word: re.fullmatch("[a-z]+", word), words[1:])])
        rows[path] = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", signature))
    problems = [f"no row for `{path}`" for path in real if path not in rows]
    problems += [f"a row for `{path}`, which is no command" for path in rows if path not in real]
    for path, documented in rows.items():
        command = typer.main.get_command(app)
        for name in path.split()[1:]:
            command = command.commands[name] if hasattr(command, "commands") and name in command.commands else None
        if command is None:
            continue
        for param in command.params:
            spellings = _options(param)
            if spellings and not spellings & documented:
                problems.append(f"`{path}` row leaves out {'/'.join(sorted(spellings))}")
        problems += [
            f"`{path}` row names {opt}, which it does not take"
            for opt in sorted(documented - real[path] - SAID_FOR_ALL)
        ]
    return problems


def test_the_command_line_table_has_a_row_for_every_command_listing_every_option_it_takes() -> None:
    assert _table_problems((REPO / "README.md").read_text(encoding="utf-8")) == []


def _documented_arguments(signature: str) -> list[str]:
    """A row's positional placeholders in order (`TOOL`, `VERSION`, `FILE-or-ID`, `ID` of `ID...`): its
    upper-case words that are not an option's value (`--limit N`, `-o FILE`)."""
    words = [w.strip("[]") for w in signature.replace("\\|", " ").split()]
    return [
        word.removesuffix("...")
        for before, word in itertools.pairwise(["", *words])
        if re.fullmatch(r"[A-Z][A-Za-z-]*(\.\.\.)?", word) and not before.startswith("-")
    ]


def test_each_commands_arguments_are_named_in_its_usage_and_errors_as_the_table_names_them() -> None:
    """`awb inventory rollback TOOL VERSION` answered `Missing argument 'to_version'` and showed
    `{tool} {to_version}`; `awb staged show ID`, `'staged_id'`: a person looks for the README's word."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    mismatched = []
    for signature in ROW.findall(_command_line_section(readme)):
        words = signature.split()
        path = list(itertools.takewhile(lambda word: re.fullmatch("[a-z]+", word), words[1:]))
        command: Any = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]
        shown = [(p.metavar or p.name).upper() for p in command.params if p.param_type_name == "argument"]
        documented = [word.upper() for word in _documented_arguments(signature)]
        if shown != documented:
            mismatched.append(f"awb {' '.join(path)}: usage says {shown}, the README {documented}")
    assert mismatched == []


def test_the_table_check_notices_a_missing_option_a_missing_row_and_an_option_that_does_not_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    broken = (
        readme.replace(
            "`awb staged apply ID... \\| --all [--yes] [--force] [--json]`",
            "`awb staged apply ID... \\| --all [--yes] [--json]`",
        )
        .replace("| `awb maintain [--json]` |", "| `awb maintain [--json] [--dry-run]` |")
        .replace("| `awb reindex [--json]` |", "| reindex |")
    )
    assert _table_problems(broken) == [
        "no row for `awb reindex`",
        "`awb maintain` row names --dry-run, which it does not take",
        "`awb staged apply` row leaves out --force",
    ]
