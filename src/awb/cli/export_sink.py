"""Where `awb inventory export -o FILE` writes: never over a file that is not an export, never half.

An export names its output by hand, and a slip (the inventory's own path, the config file, a file of
the user's) would otherwise truncate that file before anything is read: `-o .awb/inventory.db` emptied
the inventory. So an existing regular file is replaced only when it is itself an export (its first
line is an export's header), and never when it is one of the inventory's files or the config. The
export goes to a temporary file beside the output and takes its place when complete, so a failed or
interrupted export leaves the previous file as it was.

Streams are written in place, never replaced: a character device (`/dev/null`, a terminal) or a FIFO
is opened and written; a path that names an open descriptor of this process (`/dev/stdout`,
`/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`) is written through that descriptor, whatever it holds
(a pipe, a socket, a terminal, or a file the shell opened with `>` or `>>`). Resolving such a path
would name `pipe:[…]`, which is no file, or the file behind the descriptor, which the shell still holds
open: replacing it would lose what `>>` appended to. A block device (a disk) is refused.
"""

from __future__ import annotations

import os
import re
import stat
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
#: A process's descriptor table, once resolved (`/dev/fd` is one on systems where it is not a link).
DESCRIPTOR_TABLE = re.compile(r"/proc/(?P<pid>\d+)(?:/task/\d+)?/fd|/dev/fd")
#: Links followed before a path is taken for an ordinary one (the kernel's own limit).
MAX_LINKS = 40


class ExportSink:
    """`with ExportSink(output, inventory, config_file) as file:` a text file to write the export to
    (stdout when `output` is None). Raises `UsageError` at construction for an output it must not
    replace: `inventory` (a SQLite file, or None) and `config_file` are the workspace's own."""

    def __init__(self, output: Path | None, inventory: Path | None, config_file: Path | None) -> None:
        self._target: Path | None = None
        self._stream: Path | None = None  # a device, a FIFO or another process's descriptor: opened as given
        self._descriptor: int | None = None  # one of this process's descriptors: written through a copy
        self._temporary: Path | None = None
        self._file: IO[str] | None = None
        if output is None:
            return
        own = _own_files(inventory, config_file)
        entry = _descriptor_entry(output)
        if entry is None:
            self._target = _checked(output, own)
            return
        pid, descriptor = entry
        _refuse_own(output, Path(f"/proc/{pid}/fd/{descriptor}") if pid else output, own)
        if pid is None or pid == os.getpid():
            try:
                os.fstat(descriptor)
            except OSError:
                raise UsageError(f"cannot write {output}: descriptor {descriptor} is not open") from None
            self._descriptor = descriptor
        else:
            self._stream = output

    def __enter__(self) -> IO[str]:
        if self._descriptor is not None:
            # A copy of the descriptor shares its open file (offset, append mode): `>> log` appends.
            self._file = os.fdopen(os.dup(self._descriptor), "w", encoding="utf-8")
            return self._file
        if self._stream is not None:
            self._file = self._stream.open("w", encoding="utf-8")
            return self._file
        target = self._target
        if target is None:
            return sys.stdout
        if target.exists() and not target.is_file():
            self._file = target.open("w", encoding="utf-8")  # a character device or a FIFO (`_checked`)
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


def _descriptor_entry(output: Path) -> tuple[int | None, int] | None:
    """`(pid, descriptor)` when `output`, through any links, is an entry of a descriptor table
    (`/dev/stdout` -> `/proc/self/fd/1`); pid None for `/dev/fd` where it is no link (this process)."""
    path = Path(os.path.abspath(output))
    for _ in range(MAX_LINKS):
        parent = path.parent.resolve()
        table = DESCRIPTOR_TABLE.fullmatch(str(parent))
        if table is not None and path.name.isdigit():
            pid = table.group("pid")
            return (int(pid) if pid else None), int(path.name)
        entry = parent / path.name
        if not entry.is_symlink():
            return None
        path = parent / os.readlink(entry)  # the next parent's resolve() settles its `..` and links
    return None


def _own_files(inventory: Path | None, config_file: Path | None) -> set[Path]:
    own = {Path(f"{inventory.resolve()}{suffix}") for suffix in SQLITE_SIDECARS} if inventory is not None else set()
    if config_file is not None:
        own.add(config_file.resolve())
    return own


def _refuse_own(output: Path, target: Path, own: Iterable[Path]) -> None:
    if target in own or any(_same_file(target, path) for path in own):
        raise UsageError(f"{output} is one of the workspace's own files (inventory or config): choose another path")


def _checked(output: Path, own: Iterable[Path]) -> Path:
    target = output.resolve()
    if target.is_dir():
        raise UsageError(f"cannot write {output}: it is a directory")
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {output}: {target.parent} is not a directory")
    _refuse_own(output, target, own)
    mode = _mode(target)
    if mode is not None and stat.S_ISBLK(mode):
        raise UsageError(f"cannot write {output}: it is a block device (a disk), not a file or a stream")
    if mode is not None and stat.S_ISSOCK(mode):
        raise UsageError(f"cannot write {output}: it is a socket, which a path cannot open")
    if target.is_file() and target.stat().st_size > 0 and not _is_export(target):
        raise UsageError(
            f"{output} exists and is not an awb export: an export replaces only an earlier export "
            "(remove the file first, or choose another path)"
        )
    return target


def _mode(path: Path) -> int | None:
    try:
        return path.stat().st_mode
    except OSError:
        return None


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
