"""Moving an inventory between stores: JSON Lines of everything a store holds that a person would miss.

`awb inventory export` writes a header line, then for each tool (live, archived and soft-deleted) one line
with the full record (counters, tier, status, equipped flag, metadata, examples), followed by one line per
version with its own counters, one per call of its history (oldest first) and one per staged write
(pending, applied or discarded); then for each blueprint session a line naming it, followed by one line
per exchange and one per run-log entry. Every line is thus bounded by the caps on one record (a few
megabytes at most), and an import reads no line longer than `MAX_LINE_BYTES`.
`import` writes them into any store unchanged (tags apart: trimmed and each once, as a craft keeps
them), so SQLite -> PostgreSQL -> SQLite gives back the same records. Vectors stay behind (`awb
reindex` recomputes them), as does the panel's event journal (a feed of the last few thousand
moments, not a record).

The file is read twice: once to check every line (nothing is written if one is bad), once to write. A
tool is written with its versions, calls and staged writes in one transaction; a tool whose id is
already there is skipped with all of them, and so is a session that already has records, so an import
can be re-run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ValidationError

from awb.errors import InvalidParams, NameConflict
from awb.inventory.models import CallRecord, Tool, ToolVersion, check_tags, normal_tags
from awb.inventory.names import RULE
from awb.inventory.store import Store
from awb.safe_text import visible
from awb.text import NOT_A_JSON_NUMBER, NOT_UNICODE, unencodable_path

FORMAT = "awb-inventory"
#: 2 adds call history, staged writes and blueprint sessions; 3 gives each version, exchange and run-log
#: entry a line of its own (a session's line held all of its, without bound). Files of 1 and 2 still import.
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: Longest line an import reads. A record of the current format, at the craft caps' worst (64 KiB of code,
#: 16,000 characters of description, two 64 KiB schemas, 256 KiB of examples, all escaped), is a few
#: megabytes; a line past this bound (a file with no newlines: `/dev/zero`) was read whole into memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: More than any inventory holds (max_tools caps live tools far below it).
ALL = 1_000_000_000
#: Calls read from the store per query while exporting.
CALL_PAGE = 1000


@runtime_checkable
class ImportingStore(Protocol):
    def import_tool(
        self,
        tool: Tool,
        versions: list[ToolVersion],
        *,
        calls: Iterable[CallRecord] = (),
        staged: Iterable[dict[str, Any]] = (),
    ) -> None:
        """Insert a tool, its versions, calls and staged writes exactly as given, in one transaction.
        `calls` is read to its end before `staged` is read (both follow the tool in an export)."""
        ...


class RecordingStore(Protocol):
    """What an export reads beside the `Store` protocol (both stores have it)."""

    def call_history(self, tool_id: str, *, after: int = 0, limit: int = 1000) -> list[tuple[int, CallRecord]]: ...

    def staged_writes(self, status: str | None = None, *, tool_id: str | None = None) -> list[dict[str, Any]]: ...


class Sessions(Protocol):
    """The part of `awb.blueprints.sessions.SessionStore` an export and an import use."""

    def session_ids(self) -> list[str]: ...

    def exchange_page(self, session_id: str, *, after: int = 0, limit: int = ...) -> list[tuple[int, Any]]: ...

    def log_page(self, session_id: str, *, after: int = 0, limit: int = ...) -> list[tuple[int, Any]]: ...

    def import_session(self, session_id: str, exchanges: Any, logs: Any) -> bool: ...


class StagedRecord(BaseModel):
    tool_id: str
    call_id: str
    path: str
    content: str
    created_at: str
    status: Literal["pending", "applied", "discarded"]


@dataclass
class ImportReport:
    imported: int = 0
    skipped: int = 0
    calls: int = 0
    staged: int = 0
    sessions: int = 0
    sessions_skipped: int = 0


# --- export ---------------------------------------------------------------------------------------------


def export_lines(store: Store, sessions: Sessions | None = None) -> Iterator[str]:
    """The header, then every tool (live first, then deleted) with its versions, calls and staged writes,
    then every blueprint session: one JSON object a line."""
    records = cast(RecordingStore, store)
    live = store.list_tools(limit=ALL)
    deleted = store.purge_candidates(archived_before=None, deleted=True)
    session_ids = sessions.session_ids() if sessions is not None else []
    header = {"format": FORMAT, "version": FORMAT_VERSION, "tools": len(live) + len(deleted)}
    yield json.dumps({**header, "sessions": len(session_ids)})
    for tool in [*live, *deleted]:
        yield _line({"tool": tool.model_dump(mode="json")})
        for version in store.versions(tool.tool_id):
            yield _line({"version": version.model_dump(mode="json")})
        after = 0
        while page := records.call_history(tool.tool_id, after=after, limit=CALL_PAGE):
            for _, call in page:
                yield _line({"call": call.model_dump(mode="json")})
            after = page[-1][0]
        for write in records.staged_writes(tool_id=tool.tool_id):
            yield _line({"staged": StagedRecord.model_validate(write).model_dump()})
    for session_id in session_ids:
        assert sessions is not None
        yield _line({"session": session_id})
        after = 0
        while exchanges := sessions.exchange_page(session_id, after=after, limit=CALL_PAGE):
            for _, exchange in exchanges:
                yield _line({"exchange": exchange.model_dump(mode="json")})
            after = exchanges[-1][0]
        after = 0
        while entries := sessions.log_page(session_id, after=after, limit=CALL_PAGE):
            for _, entry in entries:
                yield _line({"log": entry.model_dump(mode="json")})
            after = entries[-1][0]


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


# --- reading --------------------------------------------------------------------------------------------


def file_lines(path: Path) -> Callable[[], Iterator[str]]:
    """The lines of the file at `path`, read afresh on each call (what `import_lines` takes): each checked
    to be UTF-8 and at most `MAX_LINE_BYTES` long, or `invalid_params` naming its number."""

    def lines() -> Iterator[str]:
        bound = MAX_LINE_BYTES  # read once: a test lowers it
        with path.open("rb") as file:
            number = 0
            while raw := file.readline(bound + 1):
                number += 1
                if len(raw) > bound and not (len(raw) == bound + 1 and raw.endswith(b"\n")):
                    raise InvalidParams(
                        f"line {number} of {path} is longer than {bound} bytes (an export's lines are far shorter)",
                        line=number,
                        limit=bound,
                    )
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InvalidParams(
                        f"line {number} of {path} is not UTF-8 text ({exc.reason} at byte {exc.start})", line=number
                    ) from None

    return lines


@dataclass
class _Record:
    line: int
    kind: Literal["tool", "version", "call", "staged", "session", "exchange", "log"]
    value: Any


def _parse(lines: Iterable[str]) -> Iterator[_Record]:
    """Every record after the header, checked: shape, and calls and staged writes under their tool."""
    header_seen = False
    tool_id: str | None = None
    in_session = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidParams(f"line {number} is not JSON: {exc.msg}", line=number) from None
        except RecursionError:  # nested past the decoder's stack: was internal_error
            raise InvalidParams(f"line {number} is JSON nested too deeply to read", line=number) from None
        if not header_seen:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise InvalidParams("not an awb inventory export (no header line)", line=number)
            if data.get("version") not in READABLE_VERSIONS:
                raise InvalidParams(f"export format {data.get('version')} is not supported", line=number)
            header_seen = True
            continue
        # `NaN` and `Infinity` too, which `json.loads` takes: a schema holding one was stored so, and
        # listed with null in its place.
        bad = unencodable_path(data, numbers=True)
        if bad is not None:
            where = "/".join(str(step) for step in bad)
            found: Any = data
            for step in bad:
                found = found[step]
            what = NOT_A_JSON_NUMBER if isinstance(found, float) else NOT_UNICODE
            raise InvalidParams(f"line {number}: {visible(where)} holds {what}", line=number)
        record = _record(number, data)
        if record.kind == "tool":
            tool_id = record.value[0].tool_id
        elif record.kind == "version" and tool_id is None:
            raise InvalidParams(f"line {number}: a version record is not under a tool's line", line=number)
        elif record.kind in ("call", "staged") and record.value.tool_id != tool_id:
            raise InvalidParams(
                f"line {number}: a {record.kind} record of {record.value.tool_id!r} is not under its tool's line",
                line=number,
            )
        elif record.kind == "session":
            tool_id, in_session = None, True  # sessions come after every tool
        elif record.kind in ("exchange", "log") and not in_session:
            raise InvalidParams(
                f"line {number}: a{'n' * (record.kind == 'exchange')} {record.kind} record is not under a session's line",
                line=number,
            )
        yield record
    if not header_seen:
        raise InvalidParams("the export is empty")


def _record(number: int, data: Any) -> _Record:
    try:
        if not isinstance(data, dict):
            raise TypeError("not an object")
        if "tool" in data:
            tool = Tool.model_validate(data["tool"])
            # Tags come in as a craft takes them (an export from before tags were normalised may repeat one).
            tool.metadata.tags = normal_tags(tool.metadata.tags)
            try:
                check_tags(tool.metadata.tags)
            except InvalidParams as exc:  # as a craft refuses it: no `tag` filter would find it
                raise InvalidParams(f"line {number}: {exc.message}", line=number, **exc.details) from None
            versions = [ToolVersion.model_validate(v) for v in data.get("versions", [])]  # format 1 and 2
            return _Record(number, "tool", (tool, versions))
        if "version" in data:
            return _Record(number, "version", ToolVersion.model_validate(data["version"]))
        if "call" in data:
            return _Record(number, "call", CallRecord.model_validate(data["call"]))
        if "staged" in data:
            return _Record(number, "staged", StagedRecord.model_validate(data["staged"]))
        if "session" in data:
            from awb.blueprints.journal import LogEntry
            from awb.blueprints.sessions import Exchange

            session_id = data["session"]
            if not isinstance(session_id, str) or not session_id:
                raise TypeError("a session id must be a non-empty string")
            # Format 2 held them on this line; 3 gives them lines of their own, after it.
            exchanges = [Exchange.model_validate(e) for e in data.get("exchanges", [])]
            logs = [LogEntry.model_validate(e) for e in data.get("logs", [])]
            return _Record(number, "session", (session_id, exchanges, logs))
        if "exchange" in data:
            from awb.blueprints.sessions import Exchange

            return _Record(number, "exchange", Exchange.model_validate(data["exchange"]))
        if "log" in data:
            from awb.blueprints.journal import LogEntry

            return _Record(number, "log", LogEntry.model_validate(data["log"]))
        raise KeyError("tool, version, call, staged, session, exchange or log")
    except ValidationError as exc:
        # One line: pydantic's own message spans a dozen.
        said = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(record)'}: {e['msg']}" for e in exc.errors()[:3])
        raise InvalidParams(f"line {number} is not a valid record: {said}", line=number) from None
    except (KeyError, TypeError) as exc:
        raise InvalidParams(f"line {number} is not a valid record: {exc}", line=number) from None


class _Lookahead:
    """Records one at a time, with a look at the next: a tool's calls and staged writes are the records
    of those kinds that follow it."""

    def __init__(self, records: Iterator[_Record]) -> None:
        self._records = records
        self._next: _Record | None = next(records, None)

    def pop(self) -> _Record | None:
        record, self._next = self._next, next(self._records, None)
        return record

    def following(self, kind: str) -> Iterator[Any]:
        while self._next is not None and self._next.kind == kind:
            record = self.pop()
            assert record is not None
            yield record.value


# --- import ---------------------------------------------------------------------------------------------


def check_lines(lines: Iterable[str]) -> None:
    """Read a whole export and raise `invalid_params` at its first bad line, writing nothing anywhere (the
    CLI checks a file before it opens, or creates, the inventory it imports into)."""
    for _ in _parse(lines):
        pass


def import_lines(
    store: Store, open_lines: Callable[[], Iterable[str]], sessions: Sessions | None = None
) -> ImportReport:
    """Write everything in an export into `store` (and its sessions into `sessions`). `open_lines` gives
    the file's lines afresh on each call: every line is checked before anything is written."""
    if not isinstance(store, ImportingStore):
        raise InvalidParams(f"{type(store).__name__} cannot import")
    _check(store, _parse(open_lines()), sessions)
    report = ImportReport()
    records = _Lookahead(_parse(open_lines()))
    while (record := records.pop()) is not None:
        if record.kind == "tool":
            _import_tool(store, record.value, records, report)
        elif record.kind == "session" and sessions is not None:
            session_id, exchanges, logs = record.value
            # Written in one transaction as the file is read (format 3 gives each record a line after it).
            exchanges, logs = chain(exchanges, records.following("exchange")), chain(logs, records.following("log"))
            if sessions.import_session(session_id, exchanges, logs):
                report.sessions += 1
            else:
                report.sessions_skipped += 1
            for _ in chain(exchanges, logs):  # a skipped session's records go with it
                pass
    announce = getattr(store, "announce", None)
    if callable(announce) and report.imported:
        announce("resync", [], equipped=True)  # other servers reload rather than follow one by one
    return report


def _check(store: Store, records: Iterator[_Record], sessions: Sessions | None) -> None:
    """Refuse, before any write, a live tool whose name another live tool holds ignoring case, and sessions
    with no session store to take them. A holder the export itself holds is no clash: an import run again,
    or case-variants an older inventory kept (imported beside each other, as its migration kept them)."""
    exported: set[str] = set()
    clashes: list[tuple[int, Tool, Tool]] = []
    for record in records:
        if record.kind == "session" and sessions is None:
            raise InvalidParams(f"line {record.line}: the export holds blueprint sessions; give a session store")
        if record.kind != "tool":
            continue
        tool: Tool = record.value[0]
        exported.add(tool.tool_id)
        if tool.status == "deleted" or store.get(tool.tool_id) is not None:
            continue
        holder = store.name_holder(tool.name)
        if holder is not None:
            clashes.append((record.line, tool, holder))
    for line, tool, holder in clashes:
        if holder.tool_id not in exported:
            message = f"line {line}: a live tool named {holder.name!r} already exists ({holder.tool_id})"
            if holder.name != tool.name:
                message += f"; {RULE}, so {tool.name!r} is taken"
            raise NameConflict(message, name=tool.name, existing=holder.name, tool_id=holder.tool_id, line=line)


def _import_tool(store: Store, value: Any, records: _Lookahead, report: ImportReport) -> None:
    tool, versions = value
    versions = [*versions, *records.following("version")]
    calls, staged = records.following("call"), records.following("staged")
    if store.get(tool.tool_id) is not None:
        report.skipped += 1
        for _ in chain(calls, staged):  # the tool's records go with it
            pass
        return
    importing: Any = store
    importing.import_tool(
        tool,
        versions,
        calls=_counting(calls, report, "calls"),
        staged=_counting((s.model_dump() for s in staged), report, "staged"),
    )
    report.imported += 1


def _counting(items: Iterable[Any], report: ImportReport, field: str) -> Iterator[Any]:
    for item in items:
        setattr(report, field, getattr(report, field) + 1)
        yield item


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_LINE_BYTES",
    "ImportReport",
    "ImportingStore",
    "export_lines",
    "file_lines",
    "import_lines",
]
