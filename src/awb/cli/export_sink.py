"""Where `awb inventory export -o FILE` writes: never over a file that is not an export, never half.

An export names its output by hand, and a slip (the inventory's own path, the config file, a file of
the user's) would otherwise truncate that file before anything is read: `-o .awb/inventory.db` emptied
the inventory. So an existing regular file is replaced only when it is itself an export (its first
line is an export's header), and never when it is one of the inventory's files or the config. The
export goes to a temporary file beside the output and takes its place when complete, so a failed or
interrupted export leaves the previous file as it was. Devices and pipes (`/dev/null`, a FIFO) are
written directly.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import IO

from awb.errors import UsageError

#: How every export begins (`awb.inventory.transfer.export_lines`'s header line).
EXPORT_START = b'{"format": "awb-inventory"'
#: The files SQLite keeps beside its database.
SQLITE_SIDECARS = ("", "-wal", "-shm", "-journal")


class ExportSink:
    """`with ExportSink(output, inventory, config_file) as file:` a text file to write the export to
    (stdout when `output` is None). Raises `UsageError` at construction for an output it must not
    replace: `inventory` (a SQLite file, or None) and `config_file` are the workspace's own."""

    def __init__(self, output: Path | None, inventory: Path | None, config_file: Path | None) -> None:
        self._target: Path | None = None
        self._temporary: Path | None = None
        self._file: IO[str] | None = None
        if output is not None:
            self._target = _checked(output, _own_files(inventory, config_file))

    def __enter__(self) -> IO[str]:
        target = self._target
        if target is None:
            return sys.stdout
        if target.exists() and not target.is_file():
            self._file = target.open("w", encoding="utf-8")  # a device or a pipe
            return self._file
        descriptor, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        self._temporary = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(descriptor, 0o666 & ~umask)  # what a plain open() would have made, not mkstemp's 0600
        self._file = os.fdopen(descriptor, "w", encoding="utf-8")
        return self._file

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._file is None:
            return
        temporary = self._temporary
        try:
            self._file.close()
        finally:
            if temporary is not None:
                if kind is None:
                    assert self._target is not None
                    os.replace(temporary, self._target)
                else:
                    temporary.unlink(missing_ok=True)


def _own_files(inventory: Path | None, config_file: Path | None) -> set[Path]:
    own = {Path(f"{inventory.resolve()}{suffix}") for suffix in SQLITE_SIDECARS} if inventory is not None else set()
    if config_file is not None:
        own.add(config_file.resolve())
    return own


def _checked(output: Path, own: Iterable[Path]) -> Path:
    target = output.resolve()
    if target.is_dir():
        raise UsageError(f"cannot write {output}: it is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {output}: {target.parent} is not a directory")
    if target in own or any(_same_file(target, path) for path in own):
        raise UsageError(f"{output} is one of the workspace's own files (inventory or config): choose another path")
    if target.is_file() and target.stat().st_size > 0 and not _is_export(target):
        raise UsageError(
            f"{output} exists and is not an awb export: an export replaces only an earlier export "
            "(remove the file first, or choose another path)"
        )
    return target


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _is_export(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(len(EXPORT_START)) == EXPORT_START
    except OSError:
        return False
