"""Blueprints as YAML files in one directory: unique names (agent name + timestamp), listing by scan,
loading with validation. Written files load back to the same blueprint (and the same id).

A scan reads again only the files that changed since the last one: listing, and every lookup of an id
that is not cached, scan the whole directory, and parsing hundreds of saved files on each such request
took seconds of CPU per request (and held the GIL from the event loop meanwhile).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from awb.blueprints.errors import BlueprintInvalid, BlueprintNotFound
from awb.blueprints.schema import Blueprint, validate_blueprint
from awb.errors import AwbError

MAX_FILE_BYTES = 1024 * 1024
#: Files one page of a listing holds unless asked for fewer, and at most (every save adds one).
LIST_PAGE_DEFAULT = 1000
LIST_PAGE_MAX = 10_000
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}\.ya?ml$")


class BlueprintFile(BaseModel):
    file: str
    blueprint_id: str | None = None
    name: str | None = None
    mode: str | None = None
    saved_at: datetime
    #: Set when the file no longer validates (edited by hand, or rules changed).
    error: dict[str, Any] | None = None


class _Dumper(yaml.SafeDumper):
    """Multi-line text (a system prompt) as a `|` block, so saved files stay readable and editable."""


#: Characters YAML reads as line breaks besides "\n": in a block or a plain or single-quoted scalar they
#: come back as "\n" or folded away (a saved blueprint then loaded with another id); only a
#: double-quoted scalar, which escapes them, keeps them.
_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = '"' if any(c in value for c in _OTHER_BREAKS) else "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def to_yaml(blueprint: Blueprint) -> str:
    return yaml.dump(blueprint.model_dump(mode="json"), Dumper=_Dumper, sort_keys=False, allow_unicode=True)


class _Loader(yaml.SafeLoader):
    """Safe YAML without anchors and aliases: a few hundred bytes of aliases can stand for billions of nodes."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in blueprints")
        return super().compose_node(parent, index)


#: libyaml's parser, where PyYAML was built with it (its wheels are): ~4x faster than the pure-Python
#: one (a 1 MB body took 5.5 s there, 1.6 s here), and it caps nesting at 1,000 levels itself.
_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)


def load_yaml(text: str | bytes) -> object:
    """Safe YAML without anchors and aliases; `yaml.YAMLError` for what is not such YAML, nesting too
    deep for the parser included. Seconds of CPU for a large document: call it off the event loop."""
    try:
        if _FAST_LOADER is None:
            return yaml.load(text, Loader=_Loader)
        # libyaml composes in C, where `_Loader`'s check cannot go: the events say whether there is an alias.
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=_FAST_LOADER)):
            raise yaml.YAMLError("YAML aliases are not allowed in blueprints")
        return yaml.load(text, Loader=_FAST_LOADER)
    except RecursionError:
        raise yaml.YAMLError("the YAML nests too deeply") from None


def parse_yaml(text: str, *, source: str = "blueprint", knowledge_bases: tuple[str, ...] = ()) -> Blueprint:
    """YAML (or JSON, which is YAML) text to a validated blueprint; `heart.knowledge` may name `knowledge_bases`."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        # PyYAML's message spans lines (problem, then where); an error is one line.
        said = " ".join(str(err).split())
        raise BlueprintInvalid(
            f"{source} is not valid YAML: {said}", errors=[{"path": "(root)", "message": said, "type": "yaml"}]
        ) from None
    return validate_blueprint(data, knowledge_bases=knowledge_bases)


def read_blueprint_text(path: Path, source: str) -> str:
    """A blueprint file's text: at most `MAX_FILE_BYTES`, UTF-8. One file that is not (a Latin-1 file
    dropped in the directory) is `blueprint_invalid` on its own, not a failure of every listing."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise BlueprintInvalid(f"{source} is larger than {MAX_FILE_BYTES} bytes", file=source, errors=[])
        raw = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BlueprintInvalid(f"cannot read {source}: {exc.strerror or exc}", file=source, errors=[]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"{source} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise BlueprintInvalid(
            message, file=source, errors=[{"path": "(root)", "message": message, "type": "encoding"}]
        ) from None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "agent"


@dataclass(frozen=True)
class _Read:
    """One file as the last scan read it; `stamp` says whether it is still that file."""

    stamp: tuple[int, int, int]
    entry: BlueprintFile
    blueprint: Blueprint | None


class BlueprintFiles:
    def __init__(self, directory: Path, *, knowledge_bases: tuple[str, ...] = ()) -> None:
        self.directory = directory
        self.knowledge_bases = knowledge_bases
        self._reads: dict[str, _Read] = {}
        # Scans run on worker threads, several at once.
        self._lock = threading.Lock()

    def save(self, blueprint: Blueprint) -> Path:
        """Write a new file `<name>-<UTC timestamp>.yaml`; never overwrites one."""
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        text = to_yaml(blueprint)
        for attempt in range(100):
            suffix = f"-{attempt}" if attempt else ""
            path = self.directory / f"{_slug(blueprint.name)}-{stamp}{suffix}.yaml"
            try:
                with path.open("x", encoding="utf-8") as handle:
                    handle.write(text)
            except FileExistsError:
                continue
            return path
        raise AwbError(f"cannot find a free file name for {blueprint.name!r} in {self.directory}")

    def path_of(self, file: str) -> Path:
        if not _FILE_NAME.match(file):
            raise BlueprintNotFound(f"no blueprint file {file!r}", file=file)
        return self.directory / file

    def load(self, file: str) -> Blueprint:
        path = self.path_of(file)
        try:
            text = read_blueprint_text(path, file)
        except FileNotFoundError:
            raise BlueprintNotFound(f"no blueprint file {file!r}", file=file) from None
        return parse_yaml(text, source=file, knowledge_bases=self.knowledge_bases)

    def _read(self, path: Path) -> _Read | None:
        """The file's entry (and blueprint, when it validates): the last scan's while the file is unchanged."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None  # removed since the directory was listed
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        with self._lock:
            known = self._reads.get(path.name)
        if known is not None and known.stamp == stamp:
            return known
        saved_at = datetime.fromtimestamp(stat.st_mtime, UTC)
        try:
            blueprint = self.load(path.name)
        except AwbError as err:
            read = _Read(stamp, BlueprintFile(file=path.name, saved_at=saved_at, error=err.to_dict()), None)
        else:
            entry = BlueprintFile(
                file=path.name,
                blueprint_id=blueprint.blueprint_id(),
                name=blueprint.name,
                mode=blueprint.legs.mode,
                saved_at=saved_at,
            )
            read = _Read(stamp, entry, blueprint)
        with self._lock:
            self._reads[path.name] = read
        return read

    def _scan(self) -> list[_Read]:
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            if not _FILE_NAME.match(path.name) or not path.is_file():
                continue
            read = self._read(path)
            if read is not None:
                found.append(read)
        names = {read.entry.file for read in found}
        with self._lock:
            for gone in [name for name in self._reads if name not in names]:
                del self._reads[gone]
        found.sort(key=lambda r: (r.entry.saved_at, r.entry.file), reverse=True)
        return found

    def scan(self) -> list[BlueprintFile]:
        """Every YAML file in the directory, newest first, each loaded (or with its error)."""
        return [read.entry for read in self._scan()]

    def page(
        self, *, after: str | None = None, limit: int = LIST_PAGE_DEFAULT
    ) -> tuple[list[BlueprintFile], str | None]:
        """At most `limit` files of `scan`, those listed after the file `after` (None: from the newest), and
        the file to give as `after` for the next page (None when these are the last)."""
        entries = self.scan()
        start = 0
        if after is not None:
            start = next((i + 1 for i, e in enumerate(entries) if e.file == after), -1)
            if start < 0:
                raise BlueprintNotFound(
                    f"no blueprint file {after[:210]!r} to list after (list from the start)", file=after
                )
        page = entries[start : start + limit]
        return page, (page[-1].file if start + limit < len(entries) else None)

    def find(self, blueprint_id: str) -> Blueprint | None:
        for read in self._scan():
            if read.blueprint is not None and read.entry.blueprint_id == blueprint_id:
                return read.blueprint
        return None
