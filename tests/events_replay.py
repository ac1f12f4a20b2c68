"""The events of events/ and how to replay them in order (writes before the reads that need them),
carrying over the ids only an earlier answer knows. Used by the contract tier (shapes) and the
deployed-path tier (each function, as Lambda runs it, against plain moto)."""

from __future__ import annotations

import base64
import io
import json
import re
import tarfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
ISOLATION = {"team_id": "events-team", "agent_id": "events-agent", "user_id": "events-user"}
MEMORY_ID = "chat_memory-events-team-events-agent"
REQUEST_ID = re.compile(r"^req-[0-9a-f]{16}$")

# Writes before the reads that need them; item deletes, then the user's, then the whole memory;
# the audit trail last (it outlives the memory's asset).
REPLAY_ORDER = [
    "health",
    "memory-create",
    "scenario-write",
    "core-write",
    "conversation-add",
    "atomic-add",
    "admin-keys-create",
    "scenario-read",
    "scenario-ls",
    "scenario-count",
    "core-read",
    "core-count",
    "conversation-query",
    "conversation-search",
    "conversation-count",
    "atomic-query",
    "atomic-search",
    "atomic-count",
    "formation-status",
    "formation-run",
    "memory-get",
    "memory-list",
    "admin-keys-list",
    "memory-update",
    "atomic-update",
    "memory-export",
    "memory-export-status",
    "memory-import",
    "memory-import-start",
    "memory-import-status",
    "scenario-rm",
    "conversation-delete",
    "atomic-delete",
    "admin-keys-revoke",
    "user-memory-delete",
    "v2-delete-user-memory",
    "chat-memory-clear",
    "memory-delete",
    "audit-query",
]

# event → (body field, earlier event, its data field): ids only a previous answer knows.
CARRIED: dict[str, tuple[str, str, str]] = {
    "atomic-update": ("id", "atomic-add", "id"),
    "atomic-delete": ("ids", "atomic-add", "id"),
    "admin-keys-revoke": ("key_id", "admin-keys-create", "key_id"),
    "memory-export-status": ("export_id", "memory-export", "export_id"),
    "memory-import-start": ("import_id", "memory-import", "import_id"),
    "memory-import-status": ("import_id", "memory-import", "import_id"),
}

# Before an event goes out: what a client does in between (the import's upload).
BEFORE: dict[str, Callable[[dict[str, Any]], None]] = {
    "memory-import-start": lambda answers: upload(answers["memory-import"], tiny_tree()),
}

# What a few answers must say beyond code 0 (data, the body that was sent).
CHECKS: dict[str, Callable[[Any, dict[str, Any]], bool]] = {
    "scenario-write": lambda data, sent: data["version"] >= 1 and data["path"] == sent["path"],
    "scenario-read": lambda data, sent: data["content"].endswith("Written by events/scenario-write.json."),
    "scenario-count": lambda data, sent: data["count"] >= 1,
    "core-read": lambda data, sent: data["content"] == "The events agent answers briefly and in English.",
    "conversation-add": lambda data, sent: len(data["accepted_ids"]) == 2,
    "conversation-search": lambda data, sent: any("green tea" in m["content"] for m in data["messages"]),
    "atomic-update": lambda data, sent: data["id"] == sent["id"],
    "formation-status": lambda data, sent: data["pending_messages"] >= 0 and data["layers"] == "records",
    "atomic-delete": lambda data, sent: data["deleted_ids"] == sent["ids"],
    "scenario-rm": lambda data, sent: data["deleted"] == 1,
    "admin-keys-revoke": lambda data, sent: data["revoked"] is True,
    "memory-get": lambda data, sent: data["memory_id"] == MEMORY_ID,
    "chat-memory-clear": lambda data, sent: data["all_cleared"] is True,
    "memory-delete": lambda data, sent: data["deleted"] is True,
    "audit-query": lambda data, sent: {"memory_delete", "clear"} <= {e["action"] for e in data["events"]},
    "memory-export": lambda data, sent: (
        data["state"] == "done" and data["counts"]["l0"] >= 2 and data["url"].startswith("http")
    ),
    "memory-export-status": lambda data, sent: data["state"] == "done" and data["export_id"] == sent["export_id"],
    "memory-import": lambda data, sent: data["state"] == "created" and data["upload_url"].startswith("http"),
    "memory-import-start": lambda data, sent: data["state"] == "done" and data["counts"]["l0"] == 1,
    "memory-import-status": lambda data, sent: data["state"] == "done",
}


def tiny_tree() -> bytes:
    """A one-message memory-tdai tree, as a .tar.gz."""
    line = {
        "id": "msg-0000000000000000000000events",
        "sessionKey": "s",
        "sessionId": "s",
        "role": "user",
        "content": "Imported by events/memory-import-start.json.",
        "timestamp": 1795953600000,
    }
    data = (json.dumps(line) + "\n").encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        info = tarfile.TarInfo("conversations/2026-11-29.jsonl")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def upload(answer: dict[str, Any], data: bytes) -> None:
    """PUT a tree to an import's presigned URL, as a client does."""
    request = urllib.request.Request(
        answer["upload_url"], data=data, method=answer["method"], headers=answer["headers"]
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, response.status


def files() -> list[Path]:
    return sorted(EVENTS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def body_of(event: dict[str, Any]) -> Any:
    raw = event["body"]
    if raw is None:
        return None
    return json.loads(base64.b64decode(raw) if event["isBase64Encoded"] else raw)


def _carry(name: str, event: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    if name not in CARRIED:
        return event
    field, source, source_field = CARRIED[name]
    body = body_of(event)
    value = answers[source][source_field]
    body[field] = [value] if isinstance(body[field], list) else value
    raw = json.dumps(body, ensure_ascii=False).encode()
    return dict(event, body=base64.b64encode(raw).decode(), isBase64Encoded=True)


def replay(invoke: Callable[[str, dict[str, Any]], dict[str, Any]], function_of: Callable[[str], str]) -> list[str]:
    """Every event in ``REPLAY_ORDER`` through ``invoke(function, event)``; the failures, as text."""
    answers: dict[str, Any] = {}
    failures: list[str] = []
    for name in REPLAY_ORDER:
        if name in BEFORE:
            BEFORE[name](answers)
        event = _carry(name, load(EVENTS / f"{name}.json"), answers)
        function = function_of(event["path"])
        problems, envelope = _answered(name, function, event, invoke(function, event))
        failures += problems
        if envelope is not None:
            answers[name] = envelope["data"]
            failures += _checked(name, envelope["data"], body_of(event))
    return failures


# Routes whose answer is not the v3 envelope: what their body must hold.
_OWN_SHAPES: dict[str, Callable[[Any], bool]] = {
    "/health": lambda body: body.get("status") == "ok" and body.get("formation") in ("on", "off"),
    # the DeleteUserMemory answer shape: {requestId, result}
    "/v2/memory": lambda body: body.get("result") is True and bool(REQUEST_ID.match(str(body.get("requestId")))),
}


def _answered(
    name: str, function: str, event: dict[str, Any], result: dict[str, Any]
) -> tuple[list[str], dict[str, Any] | None]:
    """What is wrong with an answer's status, headers and shape, and its v3 envelope when it is one
    (None: no ``data`` for later events to carry over or for a check)."""
    try:
        body = json.loads(result.get("body") or "null")
    except ValueError:
        body = result.get("body")
    if result.get("statusCode") != 200:
        return [f"{name} ({function}): HTTP {result.get('statusCode')}: {body}"], None
    problems = []
    if "x-request-id" not in {k.lower() for k in result.get("headers", {})}:
        problems.append(f"{name}: no x-request-id header")
    own_shape = _OWN_SHAPES.get(event["path"])
    if own_shape is not None:
        return problems + ([] if own_shape(body) else [f"{name}: {body}"]), None
    if body.get("code") != 0 or body.get("message") != "ok" or not REQUEST_ID.match(str(body.get("request_id"))):
        return [*problems, f"{name} ({function}): {body}"], None
    return problems, body


def _checked(name: str, data: Any, request: Any) -> list[str]:
    """The event's own check of its answer's data (``CHECKS``), a failure when it does not hold."""
    check = CHECKS.get(name)
    if check is None:
        return []
    try:
        passed = check(data, request)
    except (KeyError, TypeError, AttributeError) as exc:
        passed, data = False, {"error": repr(exc), "data": data}
    return [] if passed else [f"{name}: unexpected data {data}"]
