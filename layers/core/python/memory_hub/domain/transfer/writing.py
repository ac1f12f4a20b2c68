"""The tree's files as an export writes them: L0 and L1 lines in TencentDB's shapes, grouped into
one JSONL file per day, and the scene index."""

from __future__ import annotations

import json
import re
from typing import Any

from ...clock import format_ms
from .. import meta
from .shapes import NEUTRAL_PRIORITY, SOURCES, TDAI_KEY

HEAT = re.compile(r"[0-9]{1,9}", re.ASCII)


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


def sources_of(record: Any, tdai: dict[str, Any]) -> list[str]:
    """The message ids a record cites: its own field — also when emptied by an update — and
    only for a record imported before it was one (it never cited anything of its own), the copy
    that import kept under metadata.tdai (its strings)."""
    if record.sources is not None or record.cited:
        return list(record.sources or [])
    legacy = tdai.get(SOURCES)
    return [v for v in legacy if isinstance(v, str)] if isinstance(legacy, list) else []


def _typed(tdai: dict[str, Any]) -> dict[str, Any]:
    """The TencentDB fields kept under metadata.tdai that have TencentDB's types (``priority`` a
    number, ``timestamps`` a list of strings): a client may have put anything there, and a tree
    TencentDB cannot read is no export of its format."""
    typed: dict[str, Any] = {}
    priority = tdai.get("priority")
    if isinstance(priority, int | float) and not isinstance(priority, bool):
        typed["priority"] = priority
    timestamps = tdai.get("timestamps")
    if isinstance(timestamps, list) and all(isinstance(t, str) for t in timestamps):
        typed["timestamps"] = timestamps
    return typed


def l1_line(record: Any) -> dict[str, Any]:
    """A record as TencentDB's MemoryRecord, plus Memory Hub's tags, version, reinforced_count and
    formed (always a bool)."""
    stored = dict(record.meta or {})
    tdai = stored.pop(TDAI_KEY, None) if isinstance(stored.get(TDAI_KEY), dict) else None
    tdai = tdai or {}
    fields = _typed(tdai)
    rest = {k: v for k, v in tdai.items() if k not in fields and k != SOURCES}  # each written once
    if rest:  # e.g. TencentDB's own id (source_id), or a value of the wrong type: under metadata.tdai
        stored[TDAI_KEY] = rest
    created = format_ms(int(record.created_at))
    line: dict[str, Any] = {
        "id": record.id,
        "content": record.content,
        "type": record.type,
        "priority": fields.get("priority", NEUTRAL_PRIORITY),
        "scene_name": record.background or "",
        "source_message_ids": sources_of(record, tdai),
        "metadata": stored,
        "timestamps": fields.get("timestamps", [created]),
        "createdAt": created,
        "updatedAt": format_ms(int(record.updated_at)),
        "sessionKey": record.session_id or "",
        "sessionId": record.session_id or "",
        "userId": record.user_id,
        "taskId": record.task_id,
    }
    line.update(
        tags=list(record.tags or []),
        version=int(record.version),
        reinforced_count=int(record.reinforced_count),
        formed=bool(record.formed),
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
