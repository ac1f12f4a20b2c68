"""events/: one real API Gateway REST (payload v1) proxy event per implemented route, as the
deployed API sends it (``BinaryMediaTypes: */*``, so bodies arrive base64-encoded). The same files
serve ``sam local invoke -e events/<file>.json <Function>`` and ``memory-hub invoke``; the
deployed-path tier replays them (tests/deployed)."""

from __future__ import annotations

import json
import re

import pytest
from events_replay import EVENTS, ISOLATION, MEMORY_ID, REPLAY_ORDER, body_of, files, load
from helpers import ADMIN_KEY, SERVICE_ID
from memory_hub.edge.public import SPEC_FILE
from memory_hub.edge.routes import PUBLIC_GET, ROUTES


def test_every_implemented_route_has_an_event_and_the_order_names_every_file():
    names = [p.stem for p in files()]
    assert sorted(names) == sorted(REPLAY_ORDER), "add new events to REPLAY_ORDER (and old ones out)"
    served = {load(EVENTS / f"{name}.json")["path"] for name in names}
    implemented = set(json.loads(SPEC_FILE.read_text())["paths"]) | {"/health"}
    missing = {p for p in implemented if p not in served and p not in PUBLIC_GET}
    assert not missing, f"routes without an event in events/: {sorted(missing)}"
    for name in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), f"{name}: lower-case words joined by '-'"


@pytest.mark.parametrize("path", files(), ids=lambda p: p.stem)
def test_event_is_a_rest_v1_proxy_event(path):
    event = load(path)
    assert "version" not in event and "rawPath" not in event and "routeKey" not in event, "HTTP API (v2) shape"
    for key in (
        "resource",
        "path",
        "httpMethod",
        "headers",
        "multiValueHeaders",
        "queryStringParameters",
        "multiValueQueryStringParameters",
        "pathParameters",
        "stageVariables",
        "requestContext",
        "body",
        "isBase64Encoded",
    ):
        assert key in event, f"{path.name}: {key} missing"
    context = event["requestContext"]
    assert event["resource"] == event["path"] == context["resourcePath"], "exact routes only"
    assert context["path"] == "/v1" + event["path"] and context["stage"] == "v1"
    assert context["httpMethod"] == event["httpMethod"]
    assert re.fullmatch(r"[0-9a-f-]{36}", context["requestId"])
    assert event["multiValueHeaders"] == {k: [v] for k, v in event["headers"].items()}
    if event["queryStringParameters"]:
        assert event["multiValueQueryStringParameters"] == {k: [v] for k, v in event["queryStringParameters"].items()}
    headers = event["headers"]
    assert headers["Authorization"] == f"Bearer {ADMIN_KEY}"
    assert headers["x-tdai-service-id"] == SERVICE_ID
    if event["path"] in PUBLIC_GET:
        assert event["httpMethod"] == "GET" and event["body"] is None
        return
    assert event["httpMethod"] == "POST"
    assert event["isBase64Encoded"] is True, "the deployed API base64-encodes every body (*/*)"
    body = body_of(event)
    assert isinstance(body, dict)
    route = ROUTES[event["path"]]
    if route.isolated:
        assert {k: body.get(k) for k in ISOLATION} == ISOLATION, path.name
    else:
        assert body.get("team_id", "events-team") == "events-team", path.name
        assert body.get("memory_id", body.get("appId", MEMORY_ID)) == MEMORY_ID, path.name


def test_the_scheduled_event_is_what_eventbridge_sends():
    event = json.loads((EVENTS / "scheduled" / "cleanup.json").read_text())
    assert event["source"] == "aws.events" and event["detail-type"] == "Scheduled Event"
    assert set(event) >= {"version", "id", "account", "time", "region", "resources", "detail"}
