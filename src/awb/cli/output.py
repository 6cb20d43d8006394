"""How the CLI talks to people (tables, one-line errors on stderr) and to scripts (`--json`).

Rich is imported on first use: `awb --help` and a JSON listing never pay for it. Errors have one shape
for every command: `error (<code>): <message>` on stderr, or `{"error": {...}}` on stderr with `--json`.
"""

from __future__ import annotations

import errno
import io
import json
import os
import select
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from awb.errors import AwbError, OutputFailed, UsageError
from awb.safe_text import visible

if TYPE_CHECKING:
    from rich.console import Console

#: Set by `awb --debug`: errors keep their details and unexpected ones their traceback.
DEBUG = False
#: Set by a command that only read and whose process holds something slow to take apart (the embedding
#: model), or by a server that has stopped and closed what it opened while threads still warm up what
#: no one will use: the `awb` process then ends without the interpreter's teardown (which would join
#: those threads), its output and log flushed.
NOTHING_TO_TEAR_DOWN = False
#: Columns whose values are identifiers: never wrapped or cut, whatever the terminal's width.
ID_COLUMNS = frozenset({"tool_id", "id", "call_id", "call"})
#: Width of tables written to a pipe or a file: wide enough that no row is wrapped or cut.
PIPE_WIDTH = 10_000

_consoles: dict[bool, Console] = {}


def _console(stderr: bool) -> Console:
    if stderr not in _consoles:
        from rich.console import Console

        class QuietConsole(Console):
            def on_broken_pipe(self) -> None:
                # rich's own exits 1; `awb` ends every command whose reader left (`| head -1`) the same way.
                self.quiet = True
                raise BrokenPipeError

        stream = sys.stderr if stderr else sys.stdout
        # A pipe gets full lines: rich would fold them at 80 columns and cut ids in half.
        width = None if stream.isatty() else PIPE_WIDTH
        _consoles[stderr] = QuietConsole(stderr=stderr, width=width, soft_wrap=not stream.isatty())
    return _consoles[stderr]


def progress_console() -> Console:
    """Where progress bars go: stderr, so stdout carries only the command's result."""
    return _console(stderr=True)


#: What a write to a full or failing output raises (a pipe whose reader went away is `BrokenPipeError`).
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EBADF})


class _ClosedOutput(io.TextIOBase):
    """sys.stdout when the caller closed it (`awb ... >&-`): every write fails as a write to a closed
    descriptor does, so a command that has output says it could not write it (`output_failed`)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def fileno(self) -> int:
        return 1  # held on /dev/null (hold_standard_streams)

    @property
    def buffer(self) -> Any:  # the stdio transport writes bytes
        raise OSError(errno.EBADF, "standard output is closed")

    def isatty(self) -> bool:
        return False


def stdout_held_closed() -> bool:
    """Whether the caller closed stdout (`>&-`): nothing written to it reaches anyone."""
    return isinstance(sys.stdout, _ClosedOutput)


def hold_standard_streams() -> None:
    """Hold each standard descriptor the caller closed (`>&-`, `2>&-`, `<&-`) on /dev/null before anything
    is opened: the next file opened would otherwise take its number, and the inventory database opened as
    descriptor 1 would get whatever is meant for stdout, a sandbox worker's included. Output to a closed
    stdout then fails with `output_failed`; with stderr closed there is nowhere to say anything."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
    for fd in closed:
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    if 0 in closed:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own stdin
    if 1 in closed:
        sys.stdout = _ClosedOutput()
    if 2 in closed:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's own stderr


def output_failure(error: OSError) -> OutputFailed | None:
    """The `OutputFailed` an error that reached the top of a command stands for, or None: a write that
    failed on a full disk or a failing device and names no file is a write to stdout (`> /dev/full`),
    since every file a command writes by name reports its own errors. What is still buffered for stdout
    then goes to /dev/null, so that it does not fail again at exit."""
    if error.filename is not None or error.errno not in _OUTPUT_ERRNOS:
        return None
    drop_stdout()
    return OutputFailed(f"cannot write the output: {error.strerror or error}")


def stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader went away (`| head -1` has what it wanted)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's capture), no poll here
        return False
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in events)


def drop_stdout() -> None:
    """Send whatever is left for stdout to /dev/null: nothing can reach the reader any more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout with no descriptor (a test's capture): nothing to redirect
        pass


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 tool`, `3 tools`: a count with its noun, for the lines and questions people read."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def these(count: int, noun: str, plural: str | None = None) -> str:
    """`this tool`, `these 3 tools`: what a question is about."""
    return f"this {noun}" if count == 1 else f"these {counted(count, noun, plural)}"


def say(message: str) -> None:
    """A line for people on stdout, shown literally: messages quote paths, names and text that may
    hold `[` (console markup) or control characters."""
    from awb.cli.safe_text import plain

    _console(False).print(plain(message, multiline=True))


def note(message: str) -> None:
    """A line for people on stderr: progress, warnings, what a command did not do (literally, as `say`)."""
    from awb.cli.safe_text import plain

    _console(True).print(plain(message, multiline=True))


def confirm(question: str) -> bool:
    """Ask a yes/no question on stderr and read the answer (a line) from stdin; anything but `y` or `yes`
    (an empty line, end of input) is no. Not `typer.confirm`: even told `err=True`, it writes a space to
    stdout, which is a `--json` result's."""
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, stderr: bool = False) -> None:
    """A table on stdout (on stderr with `stderr`: stdout is a `--json` result's). Every cell and the title are shown literally (`safe_text.plain`): no console
    markup (`pip install 'agent-workbench[javascript]'` keeps its `[javascript]`), controls escaped. A
    rich `Text` cell (a styled `plain(...)`) is shown as it is."""
    from rich.table import Table

    from awb.cli.safe_text import plain

    view = Table(title=plain(title), title_justify="left")
    for column in columns:
        view.add_column(plain(column), no_wrap=column in ID_COLUMNS)
    for row in rows:
        view.add_row(*("" if cell is None else cell if hasattr(cell, "spans") else plain(str(cell)) for cell in row))
    _console(stderr).print(view)


def print_text(text: Any) -> None:
    """A rich renderable (e.g. `safe_text.plain(...)`) on stdout, with no markup or highlighting applied."""
    _console(False).print(text, highlight=False)


def print_code(code: str, language: str = "") -> None:
    """A tool's code as written, each hidden character (bidi override, control, ...) a styled mark, after
    a warning line that counts them (`awb.safe_code`): a person reads what will run."""
    from awb import safe_code
    from awb.cli import safe_text

    warning = safe_code.warning(code)
    if warning is not None:
        print_text(safe_text.plain(f"Hidden characters. {warning}", style="bold red"))
    print_text(safe_text.code(code, language))


def error_line(error: AwbError) -> str:
    # Messages quote what tools, agents and files hold: an escape sequence in one must not reach the terminal.
    return visible(f"error ({error.code}): {error.message}")


def report_error(error: AwbError, as_json: bool = False) -> None:
    """Write an error in the one CLI format: a line on stderr, or `{"error": ...}` on stderr."""
    if as_json:
        typer.echo(json.dumps({"error": error.to_dict()}, default=str), err=True)
        return
    typer.echo(error_line(error), err=True)
    if DEBUG:
        for key, value in error.details.items():
            typer.echo(visible(f"  {key}: {value}"), err=True)


def options_error(error: Exception, options: dict[str, str]) -> UsageError:
    """A pydantic `ValidationError` of a model built from command-line options, as one usage error that
    names the options (`options`: field name -> option): `--timeout: Input should be greater than 0 (got
    -1.0)`, not a multi-line dump reported as an internal error."""
    problems = []
    for item in getattr(error, "errors", list)():
        field = ".".join(str(part) for part in item.get("loc", ()))
        problems.append(f"{options.get(field, field)}: {item.get('msg')} (got {item.get('input')!r})")
    return UsageError("; ".join(problems) or str(error))


def fail(error: AwbError, as_json: bool = False) -> NoReturn:
    report_error(error, as_json)
    raise typer.Exit(error.exit_code)
