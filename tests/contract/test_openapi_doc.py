"""The shipped OpenAPI document and docs/API.md are what the code generates (``memory-hub openapi``),
and the document tells the truth about answers (issue 13): every POST documents its 200 as the
envelope of the type its handler returns (the domain's answer model) and each error status it can
answer as the error envelope, and nothing documents Powertools' ``422 HTTPValidationError``, a
shape the API never sends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from memory_hub.domain.rules import TEAM_PATTERN
from memory_hub.edge import error_docs
from memory_hub.edge.conventions import CHECK_ORDER, ISOLATION_HEADERS
from memory_hub.edge.public import SPEC_FILE
from memory_hub.edge.routes import PUBLIC_GET, ROUTES
from memory_hub_tools.openapi import REFERENCE_FILE, generate, reference
from memory_hub_tools.template_file import ROOT

SCHEMAS = "#/components/schemas/"


@pytest.fixture(scope="module")
def generated() -> str:
    return generate()


@pytest.fixture(scope="module")
def spec(generated: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(generated)
    return parsed


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A schema, response or parameter with its $ref (and a single-$ref allOf) followed."""
    while True:
        if "$ref" in node:
            kind, name = node["$ref"].split("/")[-2:]
            node = spec["components"][kind][name]
        elif "allOf" in node and "$ref" in node["allOf"][0]:
            base = _resolve(spec, node["allOf"][0])
            merged = dict(base, properties=dict(base.get("properties", {})))
            for extra in node["allOf"][1:]:
                for key, value in extra.get("properties", {}).items():
                    merged["properties"][key] = {**merged["properties"].get(key, {}), **value}
                merged["required"] = sorted({*merged.get("required", []), *extra.get("required", [])})
            return merged
        else:
            return node


def _json_schema(spec: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    return _resolve(spec, _resolve(spec, response)["content"]["application/json"]["schema"])


def test_the_shipped_document_is_the_generated_one(generated: str) -> None:
    assert SPEC_FILE.read_text(encoding="utf-8") == generated, "run `memory-hub openapi`"


def test_the_api_reference_is_the_generated_one() -> None:
    assert REFERENCE_FILE.read_text(encoding="utf-8") == reference(), "run `memory-hub openapi`"


def test_generation_is_deterministic(generated: str) -> None:
    assert generate() == generated


def test_every_route_is_documented_with_its_answer(spec: dict[str, Any]) -> None:
    assert set(error_docs.EXTRA) == set(ROUTES)
    assert {p for p, item in spec["paths"].items() if "post" in item} == set(ROUTES)
    assert {p for p, item in spec["paths"].items() if "get" in item} == set(PUBLIC_GET)


def test_no_validation_error_shapes_the_api_never_sends(generated: str, spec: dict[str, Any]) -> None:
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        assert name not in spec["components"]["schemas"]
        assert SCHEMAS + name not in generated


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_every_post_documents_its_data_and_its_error_envelopes(spec: dict[str, Any], path: str) -> None:
    operation = spec["paths"][path]["post"]
    envelope = path not in error_docs.ALIASES
    answers = operation["responses"]
    success = _json_schema(spec, answers["200"])
    if envelope:
        assert {"code", "message", "request_id", "data"} <= set(success["required"])
        assert success["properties"]["code"]["const"] == 0
        data = success["properties"]["data"]
        refs = [data] if "$ref" in data else data.get("anyOf", [])
        assert refs and all(_resolve(spec, r).get("type") == "object" for r in refs), data
    else:  # the DeleteUserMemory alias: {requestId, result}
        assert set(success["required"]) == {"requestId", "result"}
    assert "x-request-id" in answers["200"]["headers"]
    statuses = {int(s) for s in answers if s != "200"}
    assert set(error_docs.statuses(path, ROUTES[path].isolated)) <= statuses
    assert {400, 401, 403, 413, 415, 500, 429, 502, 504} <= statuses
    assert 405 not in statuses  # a POST on a POST route is never 405
    for status in sorted(statuses):
        error = _json_schema(spec, answers[str(status)])
        assert error["properties"]["code"]["const"] == status
        expected = "code", "message", "request_id"
        if status in error_docs.GATEWAY_ERRORS:  # API Gateway's own answer, the same on every path
            expected = "code", "message", "request_id", "retryable"
        elif not envelope:
            expected = "requestId", "code", "message"
        assert set(expected) <= set(error["required"]), (path, status)
    if ROUTES[path].isolated:
        assert 422 in statuses
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert {"x-tdai-team-id", "x-tdai-agent-id", "x-tdai-user-id"} <= headers
        body = _resolve(spec, operation["requestBody"]["content"]["application/json"]["schema"])
        team = next(o for o in body["properties"]["team_id"]["anyOf"] if o.get("type") == "string")
        assert team["pattern"] == TEAM_PATTERN
        user = next(o for o in body["properties"]["user_id"]["anyOf"] if o.get("type") == "string")
        assert (user["minLength"], user["maxLength"]) == (1, 256)


def test_retryable_is_documented_as_the_contract_says(spec: dict[str, Any]) -> None:
    answers = spec["components"]["responses"]
    for status in (500, 503):
        error = _json_schema(spec, answers[f"Error{status}"])
        assert error["properties"]["retryable"]["const"] is True and "retryable" in error["required"]
    conflict = _json_schema(spec, answers["Error409"])
    assert conflict["properties"]["retryable"]["type"] == "boolean" and "retryable" in conflict["required"]


def test_the_alias_documents_its_action_parameter(spec: dict[str, Any]) -> None:
    parameters = spec["paths"]["/v2/memory"]["post"]["parameters"]
    action = next(p for p in parameters if p["name"] == "Action")
    assert action["in"] == "query" and action["required"] is True
    assert action["schema"]["const"] == "DeleteUserMemory"


def test_idempotent_routes_document_the_header(spec: dict[str, Any]) -> None:
    for path in ("/v3/conversation/add", "/v3/chat-memory/clear"):
        names = {p["name"] for p in spec["paths"][path]["post"]["parameters"]}
        assert "Idempotency-Key" in names


def test_public_pages_need_no_auth(spec: dict[str, Any]) -> None:
    for path in PUBLIC_GET:
        operation = spec["paths"][path]["get"]
        assert operation["security"] == []
        assert "200" in operation["responses"]


def test_the_reference_covers_every_route() -> None:
    text = REFERENCE_FILE.read_text(encoding="utf-8")
    for path in ROUTES:
        assert f"### `POST {path}`" in text
    for path in PUBLIC_GET:
        assert f"### `GET {path}`" in text


def test_each_answer_is_the_type_its_handler_returns(spec: dict[str, Any]) -> None:
    """The 200's data of a route is the schema of its handler's return annotation, field for field."""
    from memory_hub.domain import results, results_admin

    for path, name in (
        ("/v3/conversation/search", "MessageHits"),
        ("/v3/atomic/search", "RecordHits"),
        ("/v3/memory/get", "AssetWithCounts"),
        ("/v3/memory/export/status", "ExportJob"),
    ):
        success = _json_schema(spec, spec["paths"][path]["post"]["responses"]["200"])
        assert success["properties"]["data"] == {"$ref": SCHEMAS + name}
        model = getattr(results, name, None) or getattr(results_admin, name)
        assert set(spec["components"]["schemas"][name]["properties"]) == set(model.model_fields)


def test_the_documents_render_the_rules_the_pipeline_states(spec: dict[str, Any]) -> None:
    """The order of the checks, the isolation headers and the team pattern are stated once (the
    pipeline's ``CHECK_ORDER`` and ``ISOLATION_HEADERS``, ``domain.rules.TEAM_PATTERN``): the
    generators render them and write none of them again, and docs/RULES.md points at API.md."""
    description = spec["info"]["description"]
    assert " → ".join(f"{status} ({what})" for status, what in CHECK_ORDER) in description
    reference_text = REFERENCE_FILE.read_text(encoding="utf-8")
    order = next(line for line in reference_text.splitlines() if "the first failing check answers" in line)
    positions = [order.find(f"{what} (") for _, what in CHECK_ORDER]
    assert -1 not in positions and positions == sorted(positions), order
    for name, header in ISOLATION_HEADERS.items():
        assert f"| `{name}` | `{header}` |" in reference_text
    generators = ROOT / "infra" / "tools" / "memory_hub_tools" / "openapi"
    for source in sorted(generators.glob("*.py")):
        code = source.read_text(encoding="utf-8")
        assert TEAM_PATTERN not in code and "A-Za-z0-9" not in code, source.name
        assert not any(header in code for header in ISOLATION_HEADERS.values()), source.name
        assert "memory_id ambiguous" not in code, source.name
    rules = (ROOT / "docs" / "RULES.md").read_text(encoding="utf-8")
    assert "API.md#conventions" in rules and "CHECK_ORDER" in rules
    assert not any(f"{what} {status}" in rules for status, what in CHECK_ORDER)
