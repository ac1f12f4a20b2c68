"""events/: one real API Gateway REST (payload v1) proxy event per implemented route, as the
deployed API sends it (``BinaryMediaTypes: */*``, so bodies arrive base64-encoded). The same files
serve ``sam local invoke -e events/<file>.json <Function>`` and ``memory-hub invoke``.

Replayed here, in the order below, through the function the template routes them to: every one
answers 200 and envelope code 0. Two events name ids that only an earlier write can produce; the
replay carries those over (see ``CARRIED``); by hand, put in the ids your own writes returned.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import ADMIN_KEY, SERVICE_ID

from memory_hub.routes import PUBLIC_GET, ROUTES
from memory_hub_local.template import ROOT, load

EVENTS = ROOT / "events"
ISOLATION = {"team_id": "events-team", "agent_id": "events-agent", "user_id": "events-user"}
MEMORY_ID = "chat_memory-events-team-events-agent"
REQUEST_ID = re.compile(r"^req-[0-9a-f]{16}$")

# Writes before the reads that need them; item deletes, then the user's, then the whole memory;
# the audit trail last (it outlives the memory's asset, CONTRACT §11).
REPLAY_ORDER = [
    "health",
    "memory-create", "scenario-write", "core-write", "conversation-add", "atomic-add", "admin-keys-create",
    "scenario-read", "scenario-ls", "scenario-count", "core-read", "core-count",
    "conversation-query", "conversation-search", "conversation-count",
    "atomic-query", "atomic-search", "atomic-count",
    "memory-get", "memory-list", "admin-keys-list",
    "memory-update", "atomic-update",
    "scenario-rm", "conversation-delete", "atomic-delete", "admin-keys-revoke",
    "user-memory-delete", "v2-delete-user-memory", "chat-memory-clear", "memory-delete",
    "audit-query",
]

# event → (body field, earlier event, its data field): ids only a previous answer knows.
CARRIED: dict[str, tuple[str, str, str]] = {
    "atomic-update": ("id", "atomic-add", "id"),
    "atomic-delete": ("ids", "atomic-add", "id"),
    "admin-keys-revoke": ("key_id", "admin-keys-create", "key_id"),
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
    "atomic-delete": lambda data, sent: data["deleted_ids"] == sent["ids"],
    "scenario-rm": lambda data, sent: data["deleted"] == 1,
    "admin-keys-revoke": lambda data, sent: data["revoked"] is True,
    "memory-get": lambda data, sent: data["memory_id"] == MEMORY_ID,
    "chat-memory-clear": lambda data, sent: data["all_cleared"] is True,
    "memory-delete": lambda data, sent: data["deleted"] is True,
    "audit-query": lambda data, sent: {"memory_delete", "clear"} <= {e["action"] for e in data["events"]},
}


def _files() -> list[Path]:
    return sorted(EVENTS.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _body(event: dict[str, Any]) -> Any:
    raw = event["body"]
    if raw is None:
        return None
    return json.loads(base64.b64decode(raw) if event["isBase64Encoded"] else raw)


def _implemented_paths() -> set[str]:
    """Every POST route the template's functions serve (from their resolvers' OpenAPI)."""
    paths: set[str] = set()
    for function in load().functions.values():
        module_name = function.handler.rsplit(".", 1)[0]
        spec = importlib.util.spec_from_file_location(f"events_{function.logical_id}",
                                                      function.code_uri / f"{module_name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if hasattr(module, "app"):
            paths |= set(json.loads(module.app.get_openapi_json_schema())["paths"])
    return paths


def test_every_implemented_route_has_an_event_and_the_order_names_every_file():
    names = [p.stem for p in _files()]
    assert sorted(names) == sorted(REPLAY_ORDER), "add new events to REPLAY_ORDER (and old ones out)"
    served = {_load(EVENTS / f"{name}.json")["path"] for name in names}
    missing = (_implemented_paths() | {"/health"}) - served
    assert not missing, f"routes without an event in events/: {sorted(missing)}"
    for name in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), f"{name}: lower-case words joined by '-'"


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_event_is_a_rest_v1_proxy_event(path):
    event = _load(path)
    assert "version" not in event and "rawPath" not in event and "routeKey" not in event, "HTTP API (v2) shape"
    for key in ("resource", "path", "httpMethod", "headers", "multiValueHeaders", "queryStringParameters",
                "multiValueQueryStringParameters", "pathParameters", "stageVariables", "requestContext",
                "body", "isBase64Encoded"):
        assert key in event, f"{path.name}: {key} missing"
    context = event["requestContext"]
    assert event["resource"] == event["path"] == context["resourcePath"], "exact routes only"
    assert context["path"] == "/v1" + event["path"] and context["stage"] == "v1"
    assert context["httpMethod"] == event["httpMethod"]
    assert re.fullmatch(r"[0-9a-f-]{36}", context["requestId"])
    assert event["multiValueHeaders"] == {k: [v] for k, v in event["headers"].items()}
    if event["queryStringParameters"]:
        assert event["multiValueQueryStringParameters"] == {
            k: [v] for k, v in event["queryStringParameters"].items()}
    headers = event["headers"]
    assert headers["Authorization"] == f"Bearer {ADMIN_KEY}"
    assert headers["x-tdai-service-id"] == SERVICE_ID
    if event["path"] in PUBLIC_GET:
        assert event["httpMethod"] == "GET" and event["body"] is None
        return
    assert event["httpMethod"] == "POST"
    assert event["isBase64Encoded"] is True, "the deployed API base64-encodes every body (*/*)"
    body = _body(event)
    assert isinstance(body, dict)
    route = ROUTES[event["path"]]
    if route.isolated:
        assert {k: body.get(k) for k in ISOLATION} == ISOLATION, path.name
    else:
        assert body.get("team_id", "events-team") == "events-team", path.name
        assert body.get("memory_id", body.get("appId", MEMORY_ID)) == MEMORY_ID, path.name


def _carry(name: str, event: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
    if name not in CARRIED:
        return event
    field, source, source_field = CARRIED[name]
    body = _body(event)
    value = answers[source][source_field]
    body[field] = [value] if isinstance(body[field], list) else value
    raw = json.dumps(body, ensure_ascii=False).encode()
    return dict(event, body=base64.b64encode(raw).decode(), isBase64Encoded=True)


def test_every_event_replays_through_its_function_with_code_0(stack, pool):
    from memory_hub_local.gateway import Router

    router = Router(stack)
    answers: dict[str, Any] = {}
    failures: list[str] = []
    for name in REPLAY_ORDER:
        event = _carry(name, _load(EVENTS / f"{name}.json"), answers)
        target = router.match(event["path"])
        assert target is not None and target[1] == event["resource"], f"{name}: no exact route in template.yaml"
        function = target[0]
        if event["path"] in ROUTES:
            assert function == ROUTES[event["path"]].function, name
        result = pool.invoke(function, event)
        try:
            body = json.loads(result.get("body") or "null")
        except ValueError:
            body = result.get("body")
        if result.get("statusCode") != 200:
            failures.append(f"{name} ({function}): HTTP {result.get('statusCode')}: {body}")
            continue
        assert "x-request-id" in {k.lower() for k in result.get("headers", {})}, name
        if event["path"] == "/health":
            if body != {"status": "ok"}:
                failures.append(f"{name}: {body}")
            continue
        if event["path"] == "/v2/memory":  # the DeleteUserMemory answer shape (CONTRACT §10)
            if body.get("result") is not True or not REQUEST_ID.match(str(body.get("requestId"))):
                failures.append(f"{name}: {body}")
            continue
        if body.get("code") != 0 or body.get("message") != "ok" or not REQUEST_ID.match(str(body.get("request_id"))):
            failures.append(f"{name} ({function}): {body}")
            continue
        answers[name] = body["data"]
        check = CHECKS.get(name)
        if check is not None:
            try:
                passed = check(body["data"], _body(event))
            except (KeyError, TypeError, AttributeError) as exc:
                passed, body["data"] = False, {"error": repr(exc), "data": body["data"]}
            if not passed:
                failures.append(f"{name}: unexpected data {body['data']}")
    assert not failures, "\n".join(failures)
