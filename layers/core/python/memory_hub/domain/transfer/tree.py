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
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ...clock import MAX_SECONDS, MIN_SECONDS, day_of, format_ms, lower_bound_ms, now_ms
from .. import meta
from ..rules import free_id_problem, has_control, path_problem

MAX_TREE_BYTES = 192 * 1024 * 1024  # an uploaded tree, unpacked
MAX_TEXT_CHARS = 1_000_000  # an L2 file's content, or the persona (§5, §6)
BACKUP_NAME = re.compile(r"persona_\d{8}_\d{6}_\d{1,9}\.md", re.ASCII)
TDAI_KEY = "tdai"  # what TencentDB keeps and Memory Hub has no field for, under metadata.tdai
NEUTRAL_PRIORITY = 50
TYPE = re.compile(r"[a-z_]{1,64}", re.ASCII)
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
    return int(value) if value.isdigit() else 0


def tarball(files: dict[str, bytes], mtime: int) -> bytes:
    """A deterministic .tar.gz of the tree (paths in order, one modification time)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(files[path]), mtime, 0o644
            archive.addfile(info, io.BytesIO(files[path]))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=mtime)


def untar(data: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz (or plain .tar), refusing absolute or escaping paths."""
    problems: list[str] = []
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                name = member.name.lstrip("./") if member.name.startswith("./") else member.name
                if member.isdir():
                    continue
                if not member.isfile():
                    problems.append(f"{name}:1: not a regular file")
                    continue
                if name.startswith("/") or ".." in name.split("/"):
                    problems.append(f"{name}:1: a path outside the tree")
                    continue
                total += member.size
                if total > MAX_TREE_BYTES:
                    problems.append(f"{name}:1: the tree unpacks to more than {MAX_TREE_BYTES // 2**20} MiB")
                    continue
                handle = archive.extractfile(member)
                files[name] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
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
    if not isinstance(user, str) or free_id_problem(user):
        problems.append(
            f"{where}: no user (the line names none or 'default', and no --user was given)"
            if user is None
            else f"{where}: userId {free_id_problem(str(user)) or 'must be a string'}"
        )
        return None
    return user


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
        try:
            line = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
        except ValueError:
            problems.append(f"{where}: not a JSON object")
            continue
        if not isinstance(line, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        rows.append((where, line))
    return rows


def _message(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Message | None:
    count = len(problems)
    role, content = line.get("role"), line.get("content")
    if role not in ("user", "assistant"):
        problems.append(f"{where}: role must be user or assistant")
    if not isinstance(content, str) or not 1 <= len(content) <= 8192:
        problems.append(f"{where}: content must be 1-8192 characters")
    session = line.get("sessionId") or line.get("sessionKey") or line.get("session_id")
    if not isinstance(session, str) or free_id_problem(session):
        problems.append(f"{where}: sessionId must be 1-256 characters without control characters")
    task = line.get("taskId", line.get("task_id"))
    if task is not None and (not isinstance(task, str) or free_id_problem(task)):
        problems.append(f"{where}: taskId must be 1-256 characters without control characters")
    user = _user(line, where, selection, problems)
    timestamp = _time(line.get("timestamp"), where, problems, "timestamp")
    recorded = (
        _time(line["recordedAt"], where, problems, "recordedAt") if line.get("recordedAt") is not None else timestamp
    )
    source = line.get("id")
    if source is not None and not isinstance(source, str):
        problems.append(f"{where}: id must be a string")
    if len(problems) > count or user is None or timestamp is None or recorded is None:
        return None
    return Message(source, user, str(session), task, str(role), str(content), timestamp, recorded)


def _record(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Record | None:
    count = len(problems)
    content, kind = line.get("content"), line.get("type", "episodic")
    if not isinstance(content, str) or not 1 <= len(content) <= 8192:
        problems.append(f"{where}: content must be 1-8192 characters")
    if not isinstance(kind, str) or not TYPE.fullmatch(kind):
        problems.append(f"{where}: type must be 1-64 of [a-z_]")
    background = line.get("scene_name", line.get("background", ""))
    if not isinstance(background, str) or len(background) > 2048:
        problems.append(f"{where}: scene_name must be at most 2048 characters")
    tags = line.get("tags", [])
    if not isinstance(tags, list) or len(tags) > 20 or not all(isinstance(t, str) and 1 <= len(t) <= 64 for t in tags):
        problems.append(f"{where}: tags must be at most 20 strings of 1-64 characters")
    metadata = line.get("metadata", {})
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
    stored = dict(metadata, **({TDAI_KEY: tdai} if tdai else {}))
    if len(json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()) > 4096 + 1024:
        problems.append(f"{where}: metadata must be at most 4096 bytes as compact JSON")
    version, reinforced = line.get("version", 1), line.get("reinforced_count", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        problems.append(f"{where}: version must be a whole number")
    if isinstance(reinforced, bool) or not isinstance(reinforced, int) or reinforced < 1:
        problems.append(f"{where}: reinforced_count must be at least 1")
    session = line.get("sessionId") or line.get("sessionKey") or line.get("session_id") or None
    if session is not None and (not isinstance(session, str) or free_id_problem(session)):
        problems.append(f"{where}: sessionId must be 1-256 characters without control characters")
    task = line.get("taskId", line.get("task_id"))
    if task is not None and (not isinstance(task, str) or free_id_problem(task)):
        problems.append(f"{where}: taskId must be 1-256 characters without control characters")
    user = _user(line, where, selection, problems)
    source = line.get("id")
    if source is not None and not isinstance(source, str):
        problems.append(f"{where}: id must be a string")
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


def stored_scene(text: str) -> str:
    """A scene file as Memory Hub stores it: our META block kept as it is (times in another RFC
    3339 form written in ours); TencentDB's (created, updated, summary, heat) turned into ours, its
    other keys kept. ValueError (what is wrong) when a version or time cannot be read."""
    keys, content = meta.split(text)
    if not keys:
        stamp = format_ms(now_ms())
        return meta.render(version=1, created_at=stamp, updated_at=stamp, summary=None, previous={}, content=text)
    if "version" in keys:
        if not keys["version"].isdigit() or int(keys["version"]) < 1:
            raise ValueError("META version must be a whole number of at least 1")
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
            if len(meta.split(tree.files[path])[1]) > MAX_TEXT_CHARS:
                problems.append(f"{shown}:1: content must be at most {MAX_TEXT_CHARS:,} characters")
        elif name == "persona.md":
            if len(text) > MAX_TEXT_CHARS:
                problems.append(f"{shown}:1: content must be at most {MAX_TEXT_CHARS:,} characters")
            tree.persona = text
        elif name.startswith(".backup/persona/") and "/" not in name[len(".backup/persona/") :]:
            backup = name[len(".backup/persona/") :]
            if BACKUP_NAME.fullmatch(backup):  # Memory Hub's own backups; TencentDB's are not read
                tree.backups[backup] = text
    summary = files.get(".metadata/memory-hub.json")
    if summary is not None:
        try:
            persona = json.loads(summary).get("persona")
            tree.persona_meta = persona if isinstance(persona, dict) else {}
        except (ValueError, AttributeError):
            problems.append(".metadata/memory-hub.json:1: not a JSON object")
    for path in tree.files:
        if has_control(path):
            problems.append(f"scene_blocks/{path}:1: path must not contain control characters")
    if problems:
        raise Malformed(problems)
    return tree


def day_file(folder: str, ms: int) -> str:
    return f"{folder}/{day_of(ms)}.jsonl"
