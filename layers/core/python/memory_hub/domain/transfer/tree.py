"""The ``memory-tdai`` tree (contract §15): how a memory is written out as TencentDB Agent Memory's
on-disk layout, and how such a tree — ours or one TencentDB wrote — is read back and checked.

    conversations/YYYY-MM-DD.jsonl   L0, one message per line, in time order (day of recordedAt, UTC)
    records/YYYY-MM-DD.jsonl         L1, one record per line (day of createdAt, UTC)
    scene_blocks/<path>              L2 files exactly as stored (META block included)
    persona.md                       L3 exactly as stored
    .metadata/scene_index.json       [{filename, summary, heat, created, updated}]
    .metadata/memory-hub.json        our own summary (never TencentDB's manifest.json)
    .backup/persona/…                persona backups

Reading is strict: every problem is reported as ``<file>:<line>: <problem>`` and a tree with any
problem is refused as a whole."""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import unquote

from pydantic import Field

from ...clock import MAX_SECONDS, MIN_SECONDS, day_of, format_ms, lower_bound_ms, now_ms
from .. import fields, meta
from ..fields import check
from ..rules import is_blank, path_problem

MAX_TEXT_CHARS = fields.TEXT_CHARS  # an L2 file's content, or the persona (§5, §6)
BACKUP_NAME = re.compile(r"persona_\d{8}_\d{6}_\d{1,9}\.md", re.ASCII)
TDAI_KEY = "tdai"  # what TencentDB keeps and Memory Hub has no field for, under metadata.tdai
NEUTRAL_PRIORITY = 50
SourceId = Annotated[str, Field(min_length=1, max_length=1024), fields.Storable]
# What TencentDB keeps beside a record and Memory Hub stores under metadata.tdai: room on top of
# the 4096 bytes a request may give.
RECORD_METADATA_BYTES = fields.METADATA_BYTES + 1024
RecordMetadata = Annotated[dict[str, Any], fields.rule(lambda v: fields.metadata_problem(v, RECORD_METADATA_BYTES))]
HEAT = re.compile(r"[0-9]{1,9}", re.ASCII)
META_VERSION = re.compile(r"[0-9]{1,16}", re.ASCII)
_PROFILE = re.compile(r"profiles/([^/]+)/(.+)")


class Malformed(Exception):
    """The tree cannot be imported: every problem found, as ``<file>:<line>: <problem>``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems[:20]))
        self.problems = problems


# ---------------------------------------------------------------- writing


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in lines).encode()


def l0_line(message: Any) -> dict[str, Any]:
    """A message as TencentDB's gateway writes it (timestamp in epoch ms)."""
    line: dict[str, Any] = {
        "id": message.id,
        "sessionKey": message.session_id,
        "sessionId": message.session_id,
        "userId": message.user_id,
        "taskId": message.task_id,
    }
    line.update(
        role=message.role,
        content=message.content,
        timestamp=int(message.timestamp),
        recordedAt=format_ms(int(message.recorded_at or message.timestamp)),
    )
    return line


def l1_line(record: Any) -> dict[str, Any]:
    """A record as TencentDB's MemoryRecord, plus Memory Hub's tags, version and reinforced_count."""
    stored = dict(record.meta or {})
    tdai = stored.pop(TDAI_KEY, None) if isinstance(stored.get(TDAI_KEY), dict) else None
    tdai = tdai or {}
    created = format_ms(int(record.created_at))
    line: dict[str, Any] = {
        "id": record.id,
        "content": record.content,
        "type": record.type,
        "priority": tdai.get("priority", NEUTRAL_PRIORITY),
        "scene_name": record.background or "",
        "source_message_ids": tdai.get("source_message_ids", []),
        "metadata": stored,
        "timestamps": tdai.get("timestamps", [created]),
        "createdAt": created,
        "updatedAt": format_ms(int(record.updated_at)),
        "sessionKey": record.session_id or "",
        "sessionId": record.session_id or "",
        "userId": record.user_id,
        "taskId": record.task_id,
    }
    line.update(
        tags=list(record.tags or []), version=int(record.version), reinforced_count=int(record.reinforced_count)
    )
    return line


def by_day(lines: list[dict[str, Any]], stamp: str, folder: str) -> dict[str, bytes]:
    """Lines grouped into ``folder/YYYY-MM-DD.jsonl`` by the UTC day of ``stamp`` (ISO), in order."""
    days: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        days.setdefault(line[stamp][:10], []).append(line)
    return {f"{folder}/{day}.jsonl": jsonl(rows) for day, rows in sorted(days.items())}


def scene_index(entries: list[Any], heat: dict[str, int]) -> bytes:
    """TencentDB's scene index; ``heat`` is what an imported file kept of TencentDB's (else 0)."""
    rows = [
        {
            "filename": e.path,
            "summary": e.summary or "",
            "heat": heat.get(e.path, 0),
            "created": e.created_at,
            "updated": e.updated_at,
        }
        for e in entries
    ]
    return json.dumps(rows, ensure_ascii=False, indent=2).encode()


def heat_of(text: str) -> int:
    """The ``heat`` a file imported from TencentDB keeps in its META block (0 when none)."""
    value = meta.split(text)[0].get("heat", "0")
    return int(value) if HEAT.fullmatch(value) else 0  # never int() of what only looks like digits


def tarball(files: dict[str, bytes], mtime: int) -> bytes:
    """A deterministic .tar.gz of the tree (paths in order, one modification time)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(files[path]), mtime, 0o644
            archive.addfile(info, io.BytesIO(files[path]))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=mtime)


MAX_TREE_BYTES = 192 * 1024 * 1024  # an uploaded tree, unpacked: headers, long names and PAX records count
MAX_MEMBERS = 100_000
MAX_LINE_BYTES = 4 * 1024 * 1024  # one JSONL line
MAX_LINES = 200_000  # L0 and L1 lines of one tree: bounds the memory their parsed form takes
MAX_HEADER_RECORD = 1024 * 1024  # one PAX or GNU long-name record (a name longer than any S3 key allows)
_BLOCK = 512
_CHUNK = 1024 * 1024
_PIECE = 64 * 1024
_LONG_RECORDS = (b"x", b"g", b"L", b"K")  # PAX extended/global headers, GNU long name/link


def _octal(field: bytes) -> int:
    """A tar header number: octal text, or base-256 when the first byte has its high bit set."""
    if field and field[0] & 0x80:
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip(b" \0")
    return int(text or b"0", 8)


def _stream(data: bytes) -> Iterator[bytes]:
    """The tar stream of an upload, a bounded chunk at a time: gunzipped when gzip, else as it is."""
    if data[:2] != b"\x1f\x8b":
        for start in range(0, len(data), _CHUNK):
            yield data[start : start + _CHUNK]
        return
    decoder = zlib.decompressobj(wbits=31)
    for start in range(0, len(data), _PIECE):
        pending = data[start : start + _PIECE]
        while pending:
            if decoder.eof:  # another gzip member follows (or padding)
                if not pending.strip(b"\0"):
                    break
                decoder = zlib.decompressobj(wbits=31)
            out = decoder.decompress(pending, _CHUNK)
            pending = decoder.unconsumed_tail or (decoder.unused_data if decoder.eof else b"")
            if out:
                yield out
            while len(out) == _CHUNK and not pending:
                out = decoder.decompress(b"", _CHUNK)
                if out:
                    yield out
    if not decoder.eof:
        raise Malformed(["(upload): not a tar.gz archive (the gzip stream is cut short)"])


def measure(data: bytes) -> None:
    """Refuse, before anything is unpacked into memory, an archive whose tar stream — headers, PAX
    and GNU long-name records, contents and padding — exceeds MAX_TREE_BYTES, that holds more than
    MAX_MEMBERS members, or a long-name/PAX record beyond MAX_HEADER_RECORD. Reads the stream once,
    a chunk at a time, keeping only the header in hand."""
    buffer = bytearray()
    total = 0
    skip = 0  # bytes of member data still to pass over
    members = 0
    try:
        for chunk in _stream(data):
            total += len(chunk)
            if total > MAX_TREE_BYTES + 2 * _BLOCK:
                raise Malformed([f"(upload): the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB"])
            view = memoryview(chunk)
            if skip:
                passed = min(skip, len(view))
                skip -= passed
                view = view[passed:]
            buffer += view
            while len(buffer) >= _BLOCK and not skip:
                header = bytes(buffer[:_BLOCK])
                del buffer[:_BLOCK]
                if header == b"\0" * _BLOCK:
                    continue  # end-of-archive blocks (and any padding after them)
                size = _octal(header[124:136])
                if size < 0:
                    raise Malformed(["(upload): not a tar.gz archive (a negative member size)"])
                kind = header[156:157]
                if kind in _LONG_RECORDS and size > MAX_HEADER_RECORD:
                    raise Malformed(
                        [f"(upload): a tar header record of {size} bytes (at most {MAX_HEADER_RECORD} are read)"]
                    )
                if kind not in _LONG_RECORDS:
                    members += 1
                    if members > MAX_MEMBERS:
                        raise Malformed([f"(upload): more than {MAX_MEMBERS:,} members"])
                padded = -(-size // _BLOCK) * _BLOCK
                if total - len(buffer) + padded > MAX_TREE_BYTES + 2 * _BLOCK:
                    raise Malformed([f"(upload): the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB"])
                passed = min(padded, len(buffer))
                del buffer[:passed]
                skip = padded - passed
    except zlib.error as exc:
        raise Malformed([f"(upload): not a tar.gz archive ({exc})"]) from None
    except ValueError:
        raise Malformed(["(upload): not a tar.gz archive (an unreadable header)"]) from None


def member_name(name: str) -> str:
    """A member's name as the tree holds it: ``./x`` is ``x`` (as ``tar -C dir -czf t.tgz .`` writes
    names); ``""`` for the ``./`` entry itself."""
    while name.startswith("./"):
        name = name[2:]
    return "" if name == "." else name


def _outside(name: str) -> bool:
    """A name that is absolute or whose segments leave the tree (``..``, ``.``, empty)."""
    if name.startswith("/"):
        return True
    return any(segment in ("", ".", "..") for segment in name.rstrip("/").split("/"))


def untar(data: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz (or plain .tar), sized up first (measure); names normalised
    (member_name), and refused: a name leaving the tree, a link, a device or other special file, a
    name given twice."""
    measure(data)
    problems: list[str] = []
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                name = member_name(member.name)
                if not name:
                    continue
                if _outside(name):
                    problems.append(f"{member.name}: a path outside the tree")
                    continue
                if member.isdir():
                    continue
                if not member.isfile():
                    problems.append(f"{name}: not a regular file (links, devices and fifos are refused)")
                    continue
                if name in files:
                    problems.append(f"{name}: the tree holds this name twice")
                    continue
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise Malformed([f"(upload): not a tar.gz archive ({exc})"]) from None
    if problems:
        raise Malformed(problems)
    return files


# ---------------------------------------------------------------- reading


@dataclass
class Message:
    source_id: str | None
    user_id: str
    session_id: str
    task_id: str | None
    role: str
    content: str
    timestamp: int
    recorded_at: int


@dataclass
class Record:
    source_id: str | None
    user_id: str
    session_id: str | None
    task_id: str | None
    content: str
    type: str
    background: str
    tags: list[str]
    metadata: dict[str, Any]
    version: int
    reinforced_count: int
    created_at: int
    updated_at: int


@dataclass
class Tree:
    messages: list[Message] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # scene path → text as it will be stored
    persona: str | None = None
    persona_meta: dict[str, Any] = field(default_factory=dict)
    backups: dict[str, str] = field(default_factory=dict)

    def size(self) -> int:
        """How many items and files the tree brings."""
        return sum(self.counts().values()) + len(self.backups)

    def counts(self) -> dict[str, int]:
        return {
            "l0": len(self.messages),
            "l1": len(self.records),
            "l2": len(self.files),
            "l3": int(self.persona is not None),
        }


@dataclass
class Selection:
    """Whose lines to take from a tree: the target user for lines without one (``--user``), and the
    source pair when the tree holds several (``--from-team``/``--from-agent``)."""

    user_id: str | None = None
    from_team: str | None = None
    from_agent: str | None = None


def _time(value: Any, where: str, problems: list[str], name: str) -> int | None:
    """Epoch ms (an integer) or an RFC 3339 string → ms."""
    if isinstance(value, bool):
        problems.append(f"{where}: {name} must be epoch milliseconds or an RFC 3339 time")
        return None
    if isinstance(value, int):
        if MIN_SECONDS * 1000 <= value <= MAX_SECONDS * 1000 + 999:
            return value
        problems.append(f"{where}: {name} is outside the years 0001-9999")
        return None
    if isinstance(value, str):
        try:
            return lower_bound_ms(value)
        except ValueError:
            pass
    problems.append(f"{where}: {name} must be epoch milliseconds or an RFC 3339 time")
    return None


def _user(line: dict[str, Any], where: str, selection: Selection, problems: list[str]) -> str | None:
    user = line.get("user_id", line.get("userId"))
    if user is None or user == "default":
        user = selection.user_id
    if user is None:
        problems.append(f"{where}: no user (the line names none or 'default', and no --user was given)")
        return None
    return user if check(fields.FreeId, user, where, "userId", problems) else None


def _optional_id(value: Any, where: str, name: str, problems: list[str]) -> str | None:
    """A session or task id; absent, null or blank (``""``) means none, as in requests (§3)."""
    if value is None or (isinstance(value, str) and is_blank(value)):
        return None
    if isinstance(value, str) and value != value.strip():
        problems.append(f"{where}: {name} must not have leading or trailing white space")
        return None
    return value if check(fields.FreeId, value, where, name, problems) else None


def _source(line: dict[str, Any], where: str, problems: list[str]) -> str | None:
    source = line.get("id")
    if source is None or source == "":
        return None
    return source if check(SourceId, source, where, "id", problems) else None


DEFAULT = "default"  # TencentDB's team and agent when a line names none


def _pair(line: dict[str, Any]) -> tuple[str, str] | None:
    """The (team, agent) a line names — TencentDB's "default" for the one it leaves out — or None
    when it names neither (such a line belongs to whichever pair is imported)."""
    team, agent = line.get("teamId"), line.get("agentId")
    team = team if isinstance(team, str) and team else None
    agent = agent if isinstance(agent, str) and agent else None
    if team is None and agent is None:
        return None
    return team or DEFAULT, agent or DEFAULT


def _pairs_of(files: dict[str, bytes]) -> set[tuple[str, str]]:
    """The (team, agent) pairs a tree's lines and profile folders name."""
    found: set[tuple[str, str]] = set()
    for name, data in files.items():
        if name.startswith(("conversations/", "records/")) and name.endswith(".jsonl"):
            for raw in data.decode("utf-8", "replace").splitlines():
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                pair = _pair(line) if isinstance(line, dict) else None
                if pair is not None:
                    found.add(pair)
        match = _PROFILE.fullmatch(name)
        if match:
            team, _, agent = unquote(match.group(1)).partition("|")
            found.add((team.removeprefix("team:"), agent.removeprefix("agent:")))
    return found


def _selected(line: dict[str, Any], selection: Selection) -> bool:
    pair = _pair(line)
    return selection.from_team is None or pair is None or pair == (selection.from_team, selection.from_agent)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python reads them, JSON has no such thing


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for a number")  # 1e999 would be stored as infinity
    return value


def _jsonl(name: str, data: bytes, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        problems.append(f"{name}:1: not UTF-8")
        return []
    rows = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        where = f"{name}:{number}"
        if len(raw) > MAX_LINE_BYTES // 4 and len(raw.encode("utf-8", "surrogatepass")) > MAX_LINE_BYTES:
            problems.append(f"{where}: a line longer than {MAX_LINE_BYTES // 2**20} MiB")
            continue
        try:
            line = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
        except ValueError:
            problems.append(f"{where}: not a JSON object")
            continue
        if not isinstance(line, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        rows.append((where, line))
        if len(rows) > MAX_LINES:
            problems.append(f"{where}: more than {MAX_LINES:,} lines in one tree")
            break
    return rows


def _message(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Message | None:
    count = len(problems)
    role, content = line.get("role"), line.get("content")
    if role not in ("user", "assistant"):
        problems.append(f"{where}: role must be user or assistant")
    check(fields.Content, content, where, "content", problems)
    session = _optional_id(
        line.get("sessionId") or line.get("sessionKey") or line.get("session_id"), where, "sessionId", problems
    )
    if session is None and len(problems) == count:
        problems.append(f"{where}: sessionId must be 1-256 characters without control characters")
    task = _optional_id(line.get("taskId", line.get("task_id")), where, "taskId", problems)
    user = _user(line, where, selection, problems)
    timestamp = _time(line.get("timestamp"), where, problems, "timestamp")
    recorded = (
        _time(line["recordedAt"], where, problems, "recordedAt") if line.get("recordedAt") is not None else timestamp
    )
    source = _source(line, where, problems)
    if len(problems) > count or user is None or session is None or timestamp is None or recorded is None:
        return None
    return Message(source, user, session, task, str(role), str(content), timestamp, recorded)


def _record(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Record | None:
    count = len(problems)
    content, kind = line.get("content"), line.get("type", "episodic")
    check(fields.Content, content, where, "content", problems)
    check(fields.AtomType, kind, where, "type", problems)
    background = line.get("scene_name", line.get("background", ""))
    background = "" if background is None else background
    check(fields.Background, background, where, "scene_name", problems)
    tags = line.get("tags", [])
    tags = [] if tags is None else tags
    check(fields.Tags, tags, where, "tags", problems)
    metadata = line.get("metadata", {})
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        problems.append(f"{where}: metadata must be an object")
        metadata = {}
    tdai = {k: line[k] for k in ("priority", "source_message_ids", "timestamps") if k in line}
    created = _time(line.get("createdAt", line.get("created_at", line.get("updatedAt"))), where, problems, "createdAt")
    updated = _time(line.get("updatedAt", line.get("updated_at", line.get("createdAt"))), where, problems, "updatedAt")
    if created is not None and tdai.get("timestamps") == [format_ms(created)]:
        del tdai["timestamps"]  # the neutral value export writes back anyway
    if tdai.get("priority") == NEUTRAL_PRIORITY:
        del tdai["priority"]
    if tdai.get("source_message_ids") == []:
        del tdai["source_message_ids"]
    # The record's own metadata by the API's rule (4096 bytes); what TencentDB keeps beside it
    # (metadata.tdai) has room of its own on top.
    check(fields.Metadata, {k: v for k, v in metadata.items() if k != TDAI_KEY}, where, "metadata", problems)
    stored = dict(metadata, **({TDAI_KEY: tdai} if tdai else {}))
    check(RecordMetadata, stored, where, "metadata", problems)
    version, reinforced = line.get("version", 1), line.get("reinforced_count", 1)
    check(fields.RecordVersion, version, where, "version", problems)
    check(fields.Count, reinforced, where, "reinforced_count", problems)
    session = _optional_id(
        line.get("sessionId") or line.get("sessionKey") or line.get("session_id"), where, "sessionId", problems
    )
    task = _optional_id(line.get("taskId", line.get("task_id")), where, "taskId", problems)
    user = _user(line, where, selection, problems)
    source = _source(line, where, problems)
    if len(problems) > count or user is None or created is None or updated is None:
        return None
    return Record(
        source,
        user,
        session,
        task,
        str(content),
        str(kind),
        str(background),
        list(tags),
        stored,
        int(version),
        int(reinforced),
        created,
        updated,
    )


_TDAI_META = ("created", "updated", "summary", "heat")


def _stamp(value: str | None, name: str) -> str | None:
    """A META time as Memory Hub writes it (any RFC 3339 form accepted); ValueError names it."""
    if not value:
        return None  # TencentDB writes an empty `created:` for a scene it had no META for
    try:
        return format_ms(lower_bound_ms(value))
    except ValueError:
        raise ValueError(f"META {name} must be an RFC 3339 time") from None


def _check_meta(keys: dict[str, str]) -> None:
    """A META block's keys by the rules a write would apply: the version a whole number 1-2^53 in
    ASCII digits, the summary as a request's (at most 1,024 characters, no control characters), every
    other key and value without control characters and at most 1,024 characters (they are written
    back on export). ValueError names the first problem."""
    version = keys.get("version")
    if version is not None and not (META_VERSION.fullmatch(version) and 1 <= int(version) <= fields.MAX_VERSION):
        raise ValueError("META version must be a whole number from 1 to 2^53")
    for key, value in keys.items():
        found = fields.problems_of(fields.MetaKey, key)
        if found:
            raise ValueError(f"META key {found[0]}")
        found = fields.problems_of(fields.Summary, value)
        if found:
            raise ValueError(f"META {key} {found[0]}")


def stored_scene(text: str) -> str:
    """A scene file as Memory Hub stores it: our META block kept as it is (times in another RFC
    3339 form written in ours); TencentDB's (created, updated, summary, heat) turned into ours, its
    other keys kept. ValueError (what is wrong) when a version or time cannot be read."""
    keys, content = meta.split(text)
    if not keys:
        stamp = format_ms(now_ms())
        return meta.render(version=1, created_at=stamp, updated_at=stamp, summary=None, previous={}, content=text)
    _check_meta(keys)
    if "version" in keys:
        created = _stamp(keys.get("created_at"), "created_at") or format_ms(now_ms())
        updated = _stamp(keys.get("updated_at"), "updated_at") or created
        if (created, updated) == (keys.get("created_at"), keys.get("updated_at")):
            return text  # exactly as exported
        previous = {k: v for k, v in keys.items() if k not in ("version", "created_at", "updated_at", "summary")}
        return meta.render(
            version=int(keys["version"]),
            created_at=created,
            updated_at=updated,
            summary=keys.get("summary") or None,
            previous=previous,
            content=content,
        )
    created = _stamp(keys.get("created"), "created") or format_ms(now_ms())
    previous = {k: v for k, v in keys.items() if k not in ("created", "updated", "summary")}
    return meta.render(
        version=1,
        created_at=created,
        updated_at=_stamp(keys.get("updated"), "updated") or created,
        summary=keys.get("summary") or None,
        previous=previous,
        content=content,
    )


def _profile_files(files: dict[str, bytes], selection: Selection) -> tuple[str, dict[str, bytes]]:
    """L2/L3 of the tree — at its root, or (as TencentDB's gateway writes them) under the profile
    folder of the chosen (team, agent) — and the folder they are in ("" at the root)."""
    scoped: dict[tuple[str, str], tuple[str, dict[str, bytes]]] = {}
    for name, data in files.items():
        match = _PROFILE.fullmatch(name)
        if match:
            team, _, agent = unquote(match.group(1)).partition("|")
            pair = (team.removeprefix("team:"), agent.removeprefix("agent:"))
            scoped.setdefault(pair, (f"profiles/{match.group(1)}/", {}))[1][match.group(2)] = data
    if not scoped:
        return "", files
    if selection.from_team is not None:
        return scoped.get((selection.from_team, selection.from_agent or DEFAULT), ("", {}))
    return next(iter(scoped.values())) if len(scoped) == 1 else ("", {})


def _persona_meta(data: bytes, problems: list[str]) -> dict[str, Any]:
    """The persona's version and times from ``.metadata/memory-hub.json``, checked as a write's
    would be (times normalised to the response format, since they are stored as S3 metadata)."""
    where = ".metadata/memory-hub.json"
    try:
        summary = json.loads(data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, UnicodeDecodeError):
        problems.append(f"{where}: not a JSON object")
        return {}
    persona = summary.get("persona") if isinstance(summary, dict) else None
    if not isinstance(summary, dict):
        problems.append(f"{where}: not a JSON object")
    if persona is None:
        return {}
    if not isinstance(persona, dict):
        problems.append(f"{where}: persona must be an object")
        return {}
    checked: dict[str, Any] = {}
    if persona.get("version") is not None and check(
        fields.Version, persona["version"], where, "persona.version", problems
    ):
        checked["version"] = persona["version"]
    for name in ("created_at", "updated_at"):
        value = persona.get(name)
        if value is not None and check(fields.Time, value, where, f"persona.{name}", problems):
            checked[name] = format_ms(lower_bound_ms(value))
    return checked


def read(files: dict[str, bytes], selection: Selection) -> Tree:
    """Parse and check a whole tree; Malformed (every problem) if anything is wrong."""
    problems: list[str] = []
    pairs = _pairs_of(files)
    named = ", ".join(sorted(f"{t}/{a}" for t, a in pairs))
    if len(pairs) > 1 and selection.from_team is None:
        raise Malformed(
            [f"(tree): it holds several teams or agents ({named}): choose one with --from-team and --from-agent"]
        )
    if selection.from_team is not None and pairs and (selection.from_team, selection.from_agent) not in pairs:
        raise Malformed(
            [f"(tree): nothing of team {selection.from_team} agent {selection.from_agent} in it (it holds {named})"]
        )
    tree = Tree()
    for name in sorted(files):
        if name.startswith("conversations/") and name.endswith(".jsonl"):
            for where, line in _jsonl(name, files[name], problems):
                if _selected(line, selection):
                    message = _message(where, line, selection, problems)
                    if message is not None:
                        tree.messages.append(message)
    latest: dict[str, Record] = {}
    unnamed: list[Record] = []
    for name in sorted(files):
        if name.startswith("records/") and name.endswith(".jsonl"):
            for where, line in _jsonl(name, files[name], problems):
                if _selected(line, selection):
                    record = _record(where, line, selection, problems)
                    if record is not None:
                        if record.source_id:  # append-only files: the last line of an id wins
                            latest[record.source_id] = record
                        else:
                            unnamed.append(record)
    tree.records = list(latest.values()) + unnamed
    if len(tree.messages) + len(tree.records) > MAX_LINES:
        raise Malformed([f"(tree): more than {MAX_LINES:,} messages and records"])
    folder, own = _profile_files(files, selection)
    for name, data in sorted(own.items()):
        shown = folder + name  # problems name the file as the tree holds it
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{shown}:1: not UTF-8")
            continue
        if name.startswith("scene_blocks/"):
            path = name[len("scene_blocks/") :]
            problem = path_problem(path, kind="file")
            if problem:
                problems.append(f"{shown}:1: path {problem}")
                continue
            try:
                tree.files[path] = stored_scene(text)
            except ValueError as exc:
                problems.append(f"{shown}:1: {exc}")
                continue
            check(fields.Text, meta.split(tree.files[path])[1], f"{shown}:1", "content", problems)
        elif name == "persona.md":
            if check(fields.Text, text, f"{shown}:1", "content", problems):
                tree.persona = text
        elif name.startswith(".backup/persona/") and "/" not in name[len(".backup/persona/") :]:
            backup = name[len(".backup/persona/") :]
            # Memory Hub's own backups; TencentDB's are not read
            if BACKUP_NAME.fullmatch(backup) and check(fields.Text, text, f"{shown}:1", "content", problems):
                tree.backups[backup] = text
    summary = files.get(".metadata/memory-hub.json")
    if summary is not None:
        tree.persona_meta = _persona_meta(summary, problems)
    if problems:
        raise Malformed(problems)
    return tree


def day_file(folder: str, ms: int) -> str:
    return f"{folder}/{day_of(ms)}.jsonl"
