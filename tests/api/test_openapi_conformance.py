"""Issue 13: a bounded schemathesis run over the local stack. Every answer of every operation of
the shipped ``/openapi.json`` must conform to it: a documented status, content type, headers and
schema (the envelope with the route's ``data``, or the error envelope), and never a 5xx.

Bounded and reproducible: a fixed number of examples per operation and generation mode, derandomized
(the same cases on every run), no shrinking, no deadline. Isolated from the rest of the suite, which
shares the stack: it calls with an admin key of its own that covers only its own team, and the
document it fuzzes is a copy whose request schemas pin team ids to that team, agent ids and memory
ids to a few of its own, and Idempotency-Key values to their own prefix. The cases, answers and
time of the run are written to ``tests/artifacts/openapi-conformance.json``."""

from __future__ import annotations

import copy
import json
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from helpers import SERVICE_ID, ok
from hypothesis import HealthCheck, Phase, given, settings
from memory_hub.edge.public import SPEC_FILE
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "tests" / "artifacts" / "openapi-conformance.json"
EXAMPLES = {GenerationMode.POSITIVE: 15, GenerationMode.NEGATIVE: 8}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

FUZZ_TEAM = "fuzz-openapi"
FUZZ_AGENTS = ["agent-a", "agent-b"]
FUZZ_MEMORIES = [f"chat_memory-{FUZZ_TEAM}-{agent}" for agent in FUZZ_AGENTS] + [f"chat_memory-{FUZZ_TEAM}-none"]
# Request fields pinned to the fuzz team's own values (everything else is generated freely).
PINNED: dict[str, dict[str, Any]] = {
    "team_id": {"const": FUZZ_TEAM},
    "agent_id": {"enum": FUZZ_AGENTS},
    "memory_id": {"enum": FUZZ_MEMORIES},
    "appId": {"enum": FUZZ_MEMORIES},
}
PINNED_ITEMS: dict[str, dict[str, Any]] = {
    "team_ids": {"const": FUZZ_TEAM},
    "memory_ids": {"enum": FUZZ_MEMORIES},
}
PINNED_HEADERS: dict[str, dict[str, Any]] = {
    "x-tdai-team-id": {"type": "string", "const": FUZZ_TEAM},
    "x-tdai-agent-id": {"type": "string", "enum": FUZZ_AGENTS},
    "Idempotency-Key": {"type": "string", "pattern": "^fuzz-openapi-[a-z0-9]{1,8}$"},
}


def _request_models(spec: dict[str, Any]) -> set[str]:
    """Names of the component schemas that describe request bodies (and the models inside them)."""
    schemas = spec["components"]["schemas"]
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] not in found:
                name = ref.rsplit("/", 1)[1]
                found.add(name)
                walk(schemas[name])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for item in spec["paths"].values():
        for operation in item.values():
            walk(operation.get("requestBody", {}))
    return found


def _pin(schema: dict[str, Any], pinned: dict[str, Any]) -> dict[str, Any]:
    """``pinned`` in place of the field's string schema, keeping a null alternative if it had one."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [o if o.get("type") == "null" else pinned for o in schema["anyOf"]]}
    return {k: v for k, v in schema.items() if k in ("description", "title", "default")} | pinned


def fuzz_spec() -> dict[str, Any]:
    """The shipped document, with request values pinned to the fuzz team (answers untouched)."""
    spec = copy.deepcopy(json.loads(SPEC_FILE.read_text(encoding="utf-8")))
    schemas = spec["components"]["schemas"]
    for name in _request_models(spec):
        properties = schemas[name].get("properties", {})
        if "user_id" in properties and "team_id" in properties and "agent_id" in properties:
            _require_scope(name, schemas[name])
        for field, schema in properties.items():
            _pin_field(properties, field, schema)
    for item in spec["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] in PINNED_HEADERS:
                    parameter["schema"] = PINNED_HEADERS[parameter["name"]]
    return spec


def _require_scope(name: str, model: dict[str, Any]) -> None:
    """An isolated request names its scope in the body or in headers, so the body's fields are
    optional; the fuzz sends them in the body, required and never null (the 422 of a missing one is
    still reached in negative mode, which drops required fields). conversation/add needs session_id too."""
    properties = model["properties"]
    needed = ["team_id", "agent_id", "user_id"] + (["session_id"] if name == "ConversationAdd" else [])
    model["required"] = sorted({*model.get("required", []), *needed})
    for field in needed:  # null counts as absent: not for these
        options = [o for o in properties[field].get("anyOf", []) if o.get("type") != "null"]
        if options:
            properties[field] = {k: v for k, v in properties[field].items() if k != "anyOf"} | options[0]


def _pin_field(properties: dict[str, Any], field: str, schema: dict[str, Any]) -> None:
    """A pinned field's schema replaced; a list of pinned items has its item schema replaced."""
    if field in PINNED:
        properties[field] = _pin(schema, PINNED[field])
    elif field in PINNED_ITEMS:
        for option in schema.get("anyOf", [schema]):
            if option.get("type") == "array":
                option["items"] = PINNED_ITEMS[field]


SCHEMA = schemathesis.openapi.from_dict(fuzz_spec())
OPERATIONS = sorted(result.ok().label for result in SCHEMA.get_all_operations())
RESULTS: dict[str, Any] = {"operations": {}, "cases": 0, "statuses": Counter(), "seconds": 0.0}


FUZZ_USER = "fuzz-user"


@pytest.fixture(scope="module")
def fuzz_headers(api) -> Iterator[dict[str, str]]:
    """An admin key that covers only the fuzz team (so nothing here reaches another test's data)."""
    key = ok(api.post("/v3/admin/keys/create", {"role": "admin", "team_ids": [FUZZ_TEAM], "name": "openapi fuzz"}))
    yield {"Authorization": f"Bearer {key['api_key']}", "x-tdai-service-id": SERVICE_ID}
    REPORT.parent.mkdir(exist_ok=True)
    summary = {**RESULTS, "statuses": dict(sorted(RESULTS["statuses"].items()))}
    REPORT.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


@pytest.fixture
def seeded(api, fuzz_headers) -> dict[str, list[str]]:
    """Content in the pinned memories before each operation runs (an earlier one may have cleared or
    deleted them), and ids that exist, for the cases to name: known ids, not only random ones."""
    fuzz = api.with_key(fuzz_headers["Authorization"].removeprefix("Bearer "))
    ids: dict[str, list[str]] = {"id": [], "message": [], "export_id": [], "import_id": [], "key_id": []}
    for agent in FUZZ_AGENTS:
        scope = {"team_id": FUZZ_TEAM, "agent_id": agent, "user_id": FUZZ_USER, "session_id": "s1"}
        said = ok(
            fuzz.post("/v3/conversation/add", {**scope, "messages": [{"role": "user", "content": "tea or coffee"}]})
        )
        ids["message"] += said["accepted_ids"]
        ids["id"].append(ok(fuzz.post("/v3/atomic/add", {**scope, "content": "likes tea", "tags": ["drink"]}))["id"])
        ok(fuzz.post("/v3/scenario/write", {**scope, "path": "notes/a.md", "content": "# a", "summary": "a"}))
        ok(fuzz.post("/v3/core/write", {**scope, "content": "persona"}))
    exported = ok(fuzz.post("/v3/memory/export", {"memory_id": FUZZ_MEMORIES[0]}))
    ids["export_id"].append(exported["export_id"])
    created = ok(fuzz.post("/v3/memory/import", {"team_id": FUZZ_TEAM, "agent_id": FUZZ_AGENTS[1]}))
    ids["import_id"].append(created["import_id"])
    # An upload for import/start: agent-a's tree, as the service exported it.
    if "url" in exported:
        tree = requests.get(exported["url"], timeout=60)
        uploaded = requests.put(created["upload_url"], data=tree.content, headers=created["headers"], timeout=60)
        assert tree.ok and uploaded.ok, (tree.status_code, uploaded.status_code)
    ids["key_id"].append(ok(fuzz.post("/v3/admin/keys/create", {"role": "reader", "team_ids": [FUZZ_TEAM]}))["key_id"])
    return ids


def _steer(case: schemathesis.Case, seeded: dict[str, list[str]]) -> None:
    """Point about half of the positive cases at things that exist: the seeded user, records,
    messages and jobs (chosen from the generated body itself, so the run stays reproducible)."""
    body = case.body
    if not isinstance(body, dict):
        return
    pick = zlib.crc32(json.dumps(body, sort_keys=True, default=str).encode())
    if pick % 2:
        return
    if "user_id" in body and "team_id" in body:
        body["user_id"] = FUZZ_USER
    if "userMemoryId" in body:
        body["userMemoryId"] = FUZZ_USER
    for field in ("id", "export_id", "import_id", "key_id"):
        if isinstance(body.get(field), str) and seeded[field]:
            body[field] = seeded[field][pick % len(seeded[field])]
    if isinstance(body.get("ids"), list):
        body["ids"] = seeded["id"] + body["ids"][:1]
    if isinstance(body.get("message_ids"), list):
        body["message_ids"] = seeded["message"] + body["message_ids"][:1]
    for field in ("content_ids", "memoryContentId"):
        if isinstance(body.get(field), list) and body[field]:
            body[field] = [(seeded["message"] + seeded["id"])[pick % 4]]


def _fuzz(operation: schemathesis.APIOperation, mode: GenerationMode, check: Any) -> None:
    """``check(case)`` for the bounded, derandomized cases of one operation in one mode."""

    @settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: schemathesis.Case) -> None:
        check(case, mode)

    run()


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_answer_conforms_to_the_document(label, api, fuzz_headers, seeded, session):
    operation = SCHEMA.find_operation_by_label(label)
    assert operation is not None
    seen: Counter[int] = Counter()

    def check(case: schemathesis.Case, mode: GenerationMode) -> None:
        if mode is GenerationMode.POSITIVE:
            _steer(case, seeded)
        response = case.call(base_url=api.base_url, session=session, headers=dict(fuzz_headers), timeout=60)
        seen[response.status_code] += 1
        case.validate_response(response, checks=CHECKS, headers=dict(fuzz_headers))

    started = time.monotonic()
    _fuzz(operation, GenerationMode.POSITIVE, check)
    if label.startswith("POST "):  # the public GET pages take nothing that could be made invalid
        _fuzz(operation, GenerationMode.NEGATIVE, check)
    elapsed = time.monotonic() - started
    RESULTS["operations"][label] = {"cases": sum(seen.values()), "statuses": dict(sorted(seen.items()))}
    RESULTS["cases"] += sum(seen.values())
    RESULTS["statuses"].update({str(k): v for k, v in seen.items()})
    RESULTS["seconds"] = round(RESULTS["seconds"] + elapsed, 1)
