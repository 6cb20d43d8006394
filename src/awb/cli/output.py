"""How the CLI talks to people (rich tables on stderr/stdout) and to scripts (`--json`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from awb.errors import AwbError

console = Console()
errors = Console(stderr=True)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    view = Table(title=title, title_justify="left")
    for column in columns:
        view.add_column(column)
    for row in rows:
        view.add_row(*("" if cell is None else str(cell) for cell in row))
    console.print(view)


def fail(error: AwbError, as_json: bool = False) -> NoReturn:
    if as_json:
        print_json({"error": error.to_dict()})
    else:
        errors.print(f"[bold red]error[/] ({error.code}): {error.message}")
        for key, value in error.details.items():
            errors.print(f"  {key}: {value}")
    raise typer.Exit(error.exit_code)
