"""Knowledge bases: directories of text and Markdown files that a blueprint's heart names, cut into passages
and searched with the workbench's own engine: BM25 over FTS5, fused with embeddings when
`blueprints.knowledge_search` is `hybrid` (off by default: embedding every passage is slow on small machines).

Each passage is a record of an in-memory inventory, so it is ranked exactly as `awb_search` ranks tools.
A base is indexed on its first search and brought up to date on each later one: only files whose size or
modification time changed are read again. Reading is bounded (files, bytes per file, bytes in all) and
never leaves the directory: symbolic links that point outside it, and anything but regular files, are
skipped.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from awb.agents.toolbox import Handler, ToolOutcome, ToolSpec
from awb.blueprints.passages import Passage, passages_of
from awb.config import Config, SearchConfig
from awb.errors import AwbError, InvalidParams, Unavailable
from awb.inventory.models import Tool, ToolMetadata
from awb.inventory.sqlite import SQLiteStore
from awb.search.hybrid import HybridSearch, search_engine

log = logging.getLogger("awb.blueprints")

SUFFIXES = {".md": True, ".markdown": True, ".txt": False}
MAX_FILES = 2000
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_TOTAL_BYTES = 32 * 1024 * 1024
MAX_QUERY_CHARS = 1000
DEFAULT_RESULTS = 4
MAX_RESULTS = 10
#: Passages embedded per batch (three texts each) when search is hybrid.
_EMBED_BATCH = 16
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass
class _Indexed:
    """What the index holds of one file: its size and mtime when read, and its passages' ids."""

    signature: tuple[int, int]
    ids: list[str]


@dataclass
class _Scan:
    files: dict[str, tuple[Path, tuple[int, int]]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root)
    except (OSError, ValueError):
        return False
    return True


def _scan(root: Path) -> _Scan:
    """The readable text files under `root`, sorted, within the file-count and byte caps."""
    scan = _Scan()
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder) / name
            relative = path.relative_to(root).as_posix()
            if name.startswith(".") or path.suffix.lower() not in SUFFIXES:
                continue
            try:
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    if not _inside(path, root):
                        scan.skipped.append(f"{relative}: a link that leaves the directory")
                        continue
                    info = path.stat()
            except OSError as err:
                scan.skipped.append(f"{relative}: {err.strerror}")
                continue
            if not stat.S_ISREG(info.st_mode):
                scan.skipped.append(f"{relative}: not a regular file")
            elif info.st_size > MAX_FILE_BYTES:
                scan.skipped.append(f"{relative}: over {MAX_FILE_BYTES} bytes")
            elif len(scan.files) >= MAX_FILES or total + info.st_size > MAX_TOTAL_BYTES:
                scan.skipped.append(
                    f"{relative}: past the base's limit of {MAX_FILES} files or {MAX_TOTAL_BYTES} bytes"
                )
            else:
                total += info.st_size
                scan.files[relative] = (path, (info.st_size, info.st_mtime_ns))
    return scan


def _read(path: Path, root: Path) -> str:
    """A file's text; it must still be a regular file inside `root` when opened (not a swapped-in link or FIFO)."""
    target = path.resolve(strict=True) if path.is_symlink() else path
    if not _inside(target, root):
        raise OSError("the file now leaves the directory")
    fd = os.open(target, _OPEN_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(f"over {MAX_FILE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def _record(passage: Passage, tool_id: str, now: datetime) -> Tool:
    return Tool(
        tool_id=tool_id,
        # The name is what BM25 weighs most: the heading trail and the file name say what the passage is
        # about. Names are unique in an inventory, and a long section gives several passages one title.
        name=f"{passage.title} [{tool_id}]",
        description=passage.text,
        language="python",
        runtime="monty",
        code="",
        input_schema={},
        metadata=ToolMetadata(tags=[passage.source]),
        created_at=now,
        updated_at=now,
    )


class KnowledgeBase:
    """One configured directory, indexed on first use and kept in step with its files."""

    def __init__(self, name: str, directory: Path, search: SearchConfig) -> None:
        self.name = name
        self.directory = directory
        self._config = search
        self._lock = threading.Lock()
        self._store: SQLiteStore | None = None
        self._engine: HybridSearch | None = None
        self._files: dict[str, _Indexed] = {}
        self._passages: dict[str, Passage] = {}
        self.skipped: list[str] = []

    def _open(self) -> tuple[SQLiteStore, HybridSearch]:
        if self._store is None or self._engine is None:
            self._store = SQLiteStore(":memory:")
            self._engine = search_engine(self._store, self._config)
        return self._store, self._engine

    def refresh(self) -> int:
        """Bring the index in step with the directory; returns how many passages it holds."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> int:
        root = self.directory.resolve()
        if not root.is_dir():
            raise Unavailable(f"knowledge base {self.name!r} has no directory to read", knowledge_base=self.name)
        store, engine = self._open()
        scan = _scan(root)
        skipped = list(scan.skipped)
        stale = [s for s, seen in self._files.items() if s not in scan.files or scan.files[s][1] != seen.signature]
        for source in stale:
            gone = self._files.pop(source).ids
            store.delete_forever(gone)
            for passage_id in gone:
                engine.remove_tool(passage_id)
                self._passages.pop(passage_id, None)
        now = datetime.now(UTC)
        added: list[Tool] = []
        for source, (path, signature) in scan.files.items():
            if source in self._files:
                continue
            try:
                text = _read(path, root)
            except OSError as err:
                skipped.append(f"{source}: {err}")
                continue
            ids: list[str] = []
            for index, passage in enumerate(passages_of(text, source, markdown=SUFFIXES[path.suffix.lower()])):
                passage_id = f"{source}#{index}"
                record = _record(passage, passage_id, now)
                # Titles from files whose names differ only in case are two passages.
                store.add_tool(record, keep_case_variants=True)
                added.append(record)
                ids.append(passage_id)
                self._passages[passage_id] = passage
            self._files[source] = _Indexed(signature, ids)
        for start in range(0, len(added), _EMBED_BATCH):
            engine.index_tools(added[start : start + _EMBED_BATCH])
        if skipped != self.skipped:
            for note in skipped:
                log.warning("knowledge base %r skips %s", self.name, note)
        self.skipped = skipped
        return len(self._passages)

    def search(self, query: str, limit: int = DEFAULT_RESULTS) -> dict[str, Any]:
        """The passages that best answer `query`, best first."""
        query = query.strip()
        if not query:
            raise InvalidParams("search_knowledge needs a non-empty query", field="query")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidParams(f"the query is over {MAX_QUERY_CHARS} characters", field="query")
        limit = max(1, min(limit, MAX_RESULTS))
        with self._lock:
            self._refresh()
            _, engine = self._open()
            mode, hits = engine.search(query, limit)
            found = [(self._passages[tool.tool_id], score) for tool, score in hits if tool.tool_id in self._passages]
        passages = [
            {"source": p.source, "title": p.title, "text": p.text, "score": round(score, 4)} for p, score in found
        ]
        reply: dict[str, Any] = {"knowledge_base": self.name, "query": query, "mode": mode, "passages": passages}
        if not passages:
            reply["note"] = "no passage matches; try other words"
        return reply

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
            self._store = self._engine = None
            self._files.clear()
            self._passages.clear()


class KnowledgeLibrary:
    """The configured knowledge bases by name (`blueprints.knowledge`)."""

    def __init__(self, bases: Mapping[str, Path], search: SearchConfig | None = None) -> None:
        config = search or SearchConfig(mode="text")
        self._bases = {name: KnowledgeBase(name, Path(path), config) for name, path in sorted(bases.items())}

    @classmethod
    def from_config(cls, config: Config) -> KnowledgeLibrary:
        search = SearchConfig(
            mode=config.blueprints.knowledge_search, embedding_provider=config.search.embedding_provider
        )
        return cls(config.blueprints.knowledge, search)

    def names(self) -> tuple[str, ...]:
        return tuple(self._bases)

    def __contains__(self, name: object) -> bool:
        return name in self._bases

    def base(self, name: str) -> KnowledgeBase:
        try:
            return self._bases[name]
        except KeyError:
            configured = ", ".join(self._bases) or "(none)"
            raise Unavailable(f"no knowledge base {name!r}; configured: {configured}", knowledge_base=name) from None

    async def search(self, name: str, query: str, limit: int = DEFAULT_RESULTS) -> dict[str, Any]:
        """`KnowledgeBase.search` in a worker thread: reading files and ranking stay off the event loop."""
        base = self.base(name)
        return await anyio.to_thread.run_sync(base.search, query, limit)

    def close(self) -> None:
        for base in self._bases.values():
            base.close()


# --- the agent's tool ---------------------------------------------------------------------------

TOOL_NAME = "search_knowledge"
TOOL_NAMESPACE = "knowledge"


def tool_description(name: str) -> str:
    return (
        f"Search the knowledge base {name!r} for passages that answer a question. Returns the best passages, "
        "each with its source file, title and text. Use it before answering anything the knowledge base may cover, "
        "and cite the sources you used."
    )


def knowledge_spec(name: str) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "What to look up.",
            },
            "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    return ToolSpec(TOOL_NAME, tool_description(name), schema, TOOL_NAMESPACE)


def knowledge_handler(library: KnowledgeLibrary, name: str) -> Handler:
    async def search(arguments: dict[str, Any]) -> ToolOutcome:
        query = arguments.get("query")
        wanted = arguments.get("max_results", DEFAULT_RESULTS)
        if not isinstance(query, str):
            return ToolOutcome(ok=False, payload=f"{TOOL_NAME} needs a string `query`", error_code="invalid_params")
        limit = wanted if isinstance(wanted, int) and not isinstance(wanted, bool) else DEFAULT_RESULTS
        try:
            return ToolOutcome(ok=True, payload=await library.search(name, query, limit))
        except AwbError as err:
            return ToolOutcome(ok=False, payload=err.message, error_code=err.code)

    return search
