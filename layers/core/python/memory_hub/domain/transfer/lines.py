"""L0 and L1 lines as an import reads them: strict JSON, one object a line, each field checked by
the rules a request's would be; every problem is noted as ``<file>:<line>: <problem>``."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import Field

from ...clock import MAX_SECONDS, MIN_SECONDS, format_ms, issued_here, parse_ms
from .. import fields
from ..fields import check
from ..rules import is_blank, trim
from .shapes import NEUTRAL_PRIORITY, SOURCES, TDAI_KEPT, TDAI_KEY, Message, Record, Selection

MAX_LINE_BYTES = 4 * 1024 * 1024  # one JSONL line
MAX_LINES = 200_000  # L0 and L1 lines of one tree: bounds the memory their parsed form takes
SourceId = Annotated[str, Field(min_length=1, max_length=1024), fields.Storable]
# What TencentDB keeps beside a record and Memory Hub stores under metadata.tdai: room on top of
# the 4096 bytes a request may give.
RECORD_METADATA_BYTES = fields.METADATA_BYTES + 1024
RecordMetadata = Annotated[dict[str, Any], fields.rule(lambda v: fields.metadata_problem(v, RECORD_METADATA_BYTES))]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: Python reads them, JSON has no such thing


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for a number")  # 1e999 would be stored as infinity
    return value


def loads(text: str) -> Any:
    """JSON as the tree must hold it: ValueError for NaN, Infinity and numbers too large to store."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def lines_of(name: str, data: bytes, problems: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The JSON objects of a JSONL file, each with where it stands (``<file>:<line>``); blank lines
    are passed over, and reading stops past MAX_LINES."""
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
            line = loads(raw)
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
            return parse_ms(value)  # truncated to the millisecond, as a request's time is stored
        except ValueError:
            pass
    problems.append(f"{where}: {name} must be epoch milliseconds or an RFC 3339 time")
    return None


def _first(line: dict[str, Any], *names: str, default: Any = None) -> Any:
    """The value of the first of ``names`` the line gives a value (``null`` counts as absent, as in
    a request), else ``default``."""
    return next((line[name] for name in names if line.get(name) is not None), default)


def _user(line: dict[str, Any], where: str, selection: Selection, problems: list[str]) -> str | None:
    user = _first(line, "user_id", "userId")
    if user is None or user == "default":
        user = selection.user_id
    if user is None:
        problems.append(f"{where}: no user (the line names none or 'default', and no --user was given)")
        return None
    if isinstance(user, str) and is_blank(user):  # a user the routes refuse: nobody could read or erase it
        problems.append(f"{where}: userId must not be blank")
        return None
    if isinstance(user, str) and user != trim(user):  # the requests' rule: "u1 " is never a user of its own
        problems.append(f"{where}: userId must not have leading or trailing white space")
        return None
    return user if check(fields.FreeId, user, where, "userId", problems) else None


def _optional_id(value: Any, where: str, name: str, problems: list[str]) -> str | None:
    """A session or task id; absent, null or blank (``""``) means none, as in requests."""
    if value is None or (isinstance(value, str) and is_blank(value)):
        return None
    if isinstance(value, str) and value != trim(value):  # the requests' rule (Unicode White_Space)
        problems.append(f"{where}: {name} must not have leading or trailing white space")
        return None
    return value if check(fields.FreeId, value, where, name, problems) else None


def _source(line: dict[str, Any], where: str, problems: list[str]) -> str | None:
    source = line.get("id")
    if source is None or source == "":
        return None
    return source if check(SourceId, source, where, "id", problems) else None


def message(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Message | None:
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
    task = _optional_id(_first(line, "taskId", "task_id"), where, "taskId", problems)
    user = _user(line, where, selection, problems)
    timestamp = _time(line.get("timestamp"), where, problems, "timestamp")
    recorded = (
        _time(line["recordedAt"], where, problems, "recordedAt") if line.get("recordedAt") is not None else timestamp
    )
    source = _source(line, where, problems)
    if len(problems) > count or user is None or session is None or timestamp is None or recorded is None:
        return None
    return Message(source, user, session, task, str(role), str(content), timestamp, recorded)


def record(where: str, line: dict[str, Any], selection: Selection, problems: list[str]) -> Record | None:
    count = len(problems)
    content, kind = line.get("content"), _first(line, "type", default="episodic")
    check(fields.Content, content, where, "content", problems)
    check(fields.AtomType, kind, where, "type", problems)
    background = _first(line, "scene_name", "background", default="")
    check(fields.Background, background, where, "scene_name", problems)
    tags = line.get("tags", [])
    tags = [] if tags is None else tags
    check(fields.Tags, tags, where, "tags", problems)
    metadata = line.get("metadata", {})
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        problems.append(f"{where}: metadata must be an object")
        metadata = {}
    kept = metadata.get(TDAI_KEY)  # what an earlier import kept (an export writes it back)
    tdai = dict(kept) if isinstance(kept, dict) else {}
    legacy = tdai.pop(SOURCES, None)  # a tree exported before sources were the record's own field
    given = {k: line[k] for k in TDAI_KEPT if line.get(k) is not None}
    sources = _sources(line, legacy, where, problems)
    formed = line.get("formed")
    if formed is not None and not isinstance(formed, bool):
        problems.append(f"{where}: formed must be true or false")
    created = _time(_first(line, "createdAt", "created_at", "updatedAt"), where, problems, "createdAt")
    updated = _time(_first(line, "updatedAt", "updated_at", "createdAt"), where, problems, "updatedAt")
    neutral = {"priority": NEUTRAL_PRIORITY, "timestamps": [format_ms(created)] if created is not None else None}
    for key, value in given.items():  # an export writes the neutral value for one it kept under metadata.tdai
        if key not in tdai or value != neutral[key]:
            tdai[key] = value
    if created is not None and tdai.get("timestamps") == [format_ms(created)]:
        del tdai["timestamps"]  # the neutral value export writes back anyway
    if tdai.get("priority") == NEUTRAL_PRIORITY:
        del tdai["priority"]
    source = _source(line, where, problems)
    foreign = source is not None and not issued_here("atom-", source)
    if foreign:  # TencentDB's id: the record gets a new one, the source id stays beside it
        tdai["source_id"] = source
    # The record's own metadata by the API's rule (4096 bytes); what TencentDB keeps beside it
    # (metadata.tdai) has room of its own on top.
    own = {k: v for k, v in metadata.items() if not (k == TDAI_KEY and isinstance(v, dict))}
    check(fields.Metadata, own, where, "metadata", problems)  # a tdai that is not an object is the record's own
    if tdai and TDAI_KEY in own:
        problems.append(f"{where}: metadata.tdai must be an object (TencentDB's values are kept there)")
    stored = dict(own, **({TDAI_KEY: tdai} if tdai else {}))
    check(RecordMetadata, stored, where, "metadata", problems)
    version, reinforced = _first(line, "version", default=1), _first(line, "reinforced_count", default=1)
    if foreign and version == 0 and not isinstance(version, bool):
        version = 1  # TencentDB numbers a new record 0, Memory Hub 1
    check(fields.Version, version, where, "version", problems)
    check(fields.Count, reinforced, where, "reinforced_count", problems)
    session = _optional_id(
        line.get("sessionId") or line.get("sessionKey") or line.get("session_id"), where, "sessionId", problems
    )
    task = _optional_id(_first(line, "taskId", "task_id"), where, "taskId", problems)
    user = _user(line, where, selection, problems)
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
        sources,
        formed is True,
    )


def _sources(line: dict[str, Any], legacy: Any, where: str, problems: list[str]) -> list[str]:
    """The message ids a record line cites, as the tree names them: its own ``source_message_ids``
    (a list of strings, or null), else the copy an import of an older Memory Hub kept under
    ``metadata.tdai`` (its strings; never refused, as that import took it unchecked). They are
    mapped to the target's ids later: one the tree does not hold is dropped there."""
    value = line.get(SOURCES)
    if value is None:
        return [v for v in legacy if isinstance(v, str)] if isinstance(legacy, list) else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{where}: {SOURCES} must be a list of message ids")
        return []
    return list(value)
