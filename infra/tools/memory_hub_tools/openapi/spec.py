"""The API's OpenAPI document, from the code.

``generate()`` loads every function's Powertools resolver (``functions/*/app.py``) for the request
side — paths, request models, query parameters, summaries, tags — and for the answers: each POST's
200 is the envelope of the type its handler returns (``Resolver.answers``, the domain's answer
models), each error status the route can answer (``memory_hub.edge.error_docs``) is the error
envelope (never Powertools' 422 ``HTTPValidationError``: the API answers a bad field with 400 and
its envelope). Isolated routes get their ``x-tdai-*`` header alternatives, routes with
``Idempotency-Key`` that header, and the public GET routes a minimal description. Deterministic:
the same code gives the same text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..template_file import ROOT, load_raw

# What the functions read at import: any names will do to build the document.
_PLACEHOLDERS = {
    name: f"openapi-{name.lower()}"
    for name in (
        "MEMORY_HUB_BUCKET",
        "ASSETS_TABLE",
        "ITEMS_TABLE",
        "SCENES_TABLE",
        "KEYS_TABLE",
        "AUDIT_TABLE",
        "IDEMPOTENCY_TABLE",
        "MEMORY_HUB_TOKEN_SECRET_ARN",
    )
} | {"AWS_REGION": "us-east-1"}

SCHEMAS = "#/components/schemas/"
# Powertools' own error models: shapes this API never sends.
_POWERTOOLS_ONLY = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def _apps() -> list[Any]:
    """Every function's resolver (``app``): its routes, and what each route's handler answers."""
    import importlib.util
    import os
    import sys

    for name, value in _PLACEHOLDERS.items():
        os.environ.setdefault(name, value)
    layer = str(ROOT / "layers" / "core" / "python")
    if layer not in sys.path:
        sys.path.insert(0, layer)
    apps = []
    for logical_id, resource in load_raw()["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        path = ROOT / resource["Properties"]["CodeUri"] / "app.py"
        spec = importlib.util.spec_from_file_location(f"memory_hub_spec_{logical_id}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if hasattr(module, "app"):
            apps.append(module.app)
    return apps


_DESCRIPTION = """\
Memory Hub: long-term memory for AI agents — L0 conversation messages, L1 atomic records, L2 \
scenario files, L3 persona — wire-compatible with the TencentDB Agent Memory v3 data plane.

**Requests.** Every route but the public GET pages (`/health`, `/openapi.json`, `/docs`, \
`/console` and their assets) is `POST` with a JSON object body of at most 1 MiB (gzip allowed \
with `Content-Encoding: gzip`; `Content-Type` is not checked) and needs \
`Authorization: Bearer <api-key>` and `x-tdai-service-id: <service-id>`. Fields are type-checked, \
never coerced (an integer is written without fraction or exponent: `10.0` is a 400); a key whose \
value is null counts as absent; unknown keys are ignored. \
`x-tdai-user-key` is accepted and ignored.

**Answers.** `{"code": 0, "message": "ok", "request_id": "req-…", "data": {…}}` with HTTP 200, \
or `{"code": <HTTP status>, "message": "…", "request_id": "req-…", "data"?: {…}, "retryable"?: bool}` \
with that status. A 400 names each bad field as `<field>: <problem>` (dotted path, zero-based \
indices; `(root)` for a rule across fields), joined by `; `. The request id is also sent as the \
`x-request-id` header. An unknown path answers 404 and another method on a known path 405, both \
with the error envelope. Checks run in this order, the first failing one answering: @CHECKS@.

**Isolation.** @FIELDS@ come from the body, else from the headers @HEADERS@. Every \
`/v3/conversation/*`, `/v3/atomic/*`, `/v3/scenario/*` and `/v3/core/*` route requires non-blank \
@REQUIRED@ (else 422 naming the missing ones).

**Times** are RFC 3339 in requests and `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC) in answers. \
**Pagination:** `next_token` is opaque, present only when more results exist, and valid only with \
the same filters."""

TAGS = {
    "L0 conversation": "Messages of a conversation (scoped by team, agent, user, and task when given).",
    "L1 atomic": "Atomic memory records with natural-key deduplication (scoped like L0).",
    "L2 scenario": "Markdown scenario files of the agent (shared by its users).",
    "L3 core": "The agent's persona (shared by its users).",
    "erasure": "Clearing whole memories and erasing one user's memory (admin).",
    "assets": "Memory assets: one per (team, agent) (admin).",
    "admin": "API keys and the audit trail (admin).",
    "export and import": "A memory as the memory-tdai tree, out and in (admin).",
    "public": "Pages and documents served without auth and without the envelope.",
}

IDEMPOTENCY_KEY = "Idempotency-Key"


def _code(names: Any, last: str = ", ") -> str:
    """``names`` as inline code, comma-separated (``last`` before the last one)."""
    quoted = [f"`{name}`" for name in names]
    return last.join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else "".join(quoted)


def description() -> str:
    """The document's description: the order of the checks and the isolation fields and headers come
    from the pipeline that enforces them (``memory_hub.edge.conventions``)."""
    from memory_hub.edge.conventions import CHECK_ORDER, ISOLATION_HEADERS, OPTIONAL_IDS

    required = [name for name in ISOLATION_HEADERS if name not in OPTIONAL_IDS]
    return (
        _DESCRIPTION.replace("@CHECKS@", " → ".join(f"{status} ({what})" for status, what in CHECK_ORDER))
        .replace("@FIELDS@", _code(ISOLATION_HEADERS))
        .replace("@HEADERS@", _code(ISOLATION_HEADERS.values()))
        .replace("@REQUIRED@", _code(required, last=" and "))
    )


def _request_id_header() -> dict[str, Any]:
    from memory_hub.domain.results import REQUEST_ID

    return {
        "description": "the answer's request id (`req-` + 16 lowercase hex)",
        "required": True,
        "schema": {"type": "string", "pattern": REQUEST_ID},
    }


def _isolation_parameters(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The x-tdai-* headers, each with the schema of its body field (the body wins when it has one)."""
    from memory_hub.edge.conventions import ISOLATION_HEADERS, OPTIONAL_IDS

    parameters = []
    for name, header in ISOLATION_HEADERS.items():
        field = body["properties"][name]
        schema = next((s for s in field.get("anyOf", [field]) if s.get("type") == "string"), field)
        required = "optional" if name in OPTIONAL_IDS else "required (body or header)"
        parameters.append(
            {
                "name": header,
                "in": "header",
                "required": False,
                "description": f"`{name}` when the body has none; {required}",
                "schema": dict(schema),
            }
        )
    return parameters


def _idempotency_parameter() -> dict[str, Any]:
    return {
        "name": IDEMPOTENCY_KEY,
        "in": "header",
        "required": False,
        "description": "a retry within 1 hour with the same body returns the first data and changes nothing; "
        "the same key with another body → 422; while the first is still running → 409 (retryable)",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]{1,255}$"},
    }


def _camel(path: str) -> str:
    words = re.split(r"[/\-]", path.split("/", 2)[2])
    return "".join(w[:1].upper() + w[1:] for w in words if w)


def _error_schema(status: int) -> dict[str, Any]:
    """The error envelope with ``code`` fixed to the status (``retryable`` always true on 500 and
    503, a boolean on 409)."""
    extra: dict[str, Any] = {"properties": {"code": {"const": status}}}
    if status in (500, 503):
        extra = {"properties": {"code": {"const": status}, "retryable": {"const": True}}, "required": ["retryable"]}
    elif status == 409:
        extra = {"properties": {"code": {"const": status}, "retryable": {"type": "boolean"}}, "required": ["retryable"]}
    return {"allOf": [{"$ref": SCHEMAS + "ErrorEnvelope"}, extra]}


def _component_responses() -> dict[str, Any]:
    from memory_hub.edge.error_docs import ERRORS, GATEWAY_ERRORS

    answers: dict[str, Any] = {}
    for status, text in ERRORS.items():
        answers[f"Error{status}"] = {
            "description": text,
            "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
            "content": {"application/json": {"schema": _error_schema(status)}},
        }
    for status, text in GATEWAY_ERRORS.items():
        answers[f"Error{status}"] = {
            "description": text,
            "content": {
                "application/json": {
                    "schema": {
                        "allOf": [{"$ref": SCHEMAS + "GatewayError"}, {"properties": {"code": {"const": status}}}]
                    }
                }
            },
        }
    return answers


def _response_models(answers: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """The 200 schema of each POST path (a $ref) and the response components they need: the
    envelope of the type the path's handler returns (``answers``), or an alias's own shape."""
    from memory_hub.edge import error_docs
    from pydantic import create_model
    from pydantic.json_schema import models_json_schema

    models: list[Any] = [error_docs.ErrorEnvelope, error_docs.GatewayError]
    named: dict[str, Any] = {}
    envelope: Any = error_docs.Envelope  # parametrized at run time with each route's answer type
    for path, answer in sorted(answers.items()):
        if path in error_docs.ALIASES:
            model, error, _ = error_docs.ALIASES[path]
            models.append(error)
        else:
            model = create_model(f"{_camel(path)}Answer", __base__=envelope[answer])
        named[path] = model
        models.append(model)
    unique = list(dict.fromkeys(models))
    refs, top = models_json_schema([(m, "validation") for m in unique], ref_template=SCHEMAS + "{model}")
    defs: dict[str, Any] = top.get("$defs", {})
    return {path: refs[(model, "validation")]["$ref"] for path, model in named.items()}, defs


def _public_paths() -> dict[str, Any]:
    def page(summary: str, content_type: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "get": {
                "tags": ["public"],
                "summary": summary,
                "operationId": "get_" + re.sub(r"\W", "_", summary.split(":")[0]).lower(),
                "security": [],
                "responses": {
                    "200": {
                        "description": "the page (no envelope)",
                        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                        "content": {content_type: {"schema": schema}},
                    },
                    **{str(s): {"$ref": f"#/components/responses/Error{s}"} for s in (429, 502, 504)},
                },
            }
        }

    html = {"type": "string"}
    return {
        "/health": page(
            "health: the service is up",
            "application/json",
            {
                "type": "object",
                "properties": {"status": {"const": "ok"}},
                "required": ["status"],
            },
        ),
        "/openapi.json": page("openapi: this document", "application/json", {"type": "object"}),
        "/docs": page("docs: Swagger UI over this document (its assets under /docs/)", "text/html", html),
        "/console": page("console: the memory console (its assets under /console/)", "text/html", html),
    }


def _describe_operation(path: str, operation: dict[str, Any], body: dict[str, Any] | None) -> None:
    from memory_hub.domain.rules import MAX_ID_CHARS, TEAM_PATTERN
    from memory_hub.edge.conventions import FREE_IDS, ISOLATION_HEADERS, OPTIONAL_IDS
    from memory_hub.edge.error_docs import ALIASES, IDEMPOTENT
    from memory_hub.edge.routes import ROUTES

    route = ROUTES[path]
    lines = [f"Role: `{route.role}` or above. Served by `{route.function}`."]
    parameters = list(operation.get("parameters", []))
    for parameter in parameters:
        if parameter.get("name") == "Action":  # /v2/memory: the DeleteUserMemory request shape
            parameter["description"] = "must be `DeleteUserMemory` (else 400)"
    if route.isolated:
        assert body is not None, path
        required = [name for name in ISOLATION_HEADERS if name not in OPTIONAL_IDS]
        patterned = [f"`{name}`" for name in ISOLATION_HEADERS if name not in FREE_IDS]
        free = [f"`{name}`" for name in ISOLATION_HEADERS if name in FREE_IDS]
        lines.append(
            f"Isolated: {_code(required, last=' and ')} are required, from the body or the `x-tdai-*` "
            f"headers (422 names the missing ones); {'/'.join(patterned)} match `{TEAM_PATTERN}`, "
            f"{'/'.join(free)} are 1-{MAX_ID_CHARS} characters without control characters (400 otherwise)."
        )
        parameters += _isolation_parameters(body)
    if path in IDEMPOTENT:
        lines.append("Supports `Idempotency-Key`.")
        parameters.append(_idempotency_parameter())
    if path in ALIASES:
        lines.append(f"Answers without the envelope: {ALIASES[path][2]}.")
    operation["description"] = " ".join(lines)
    if parameters:
        operation["parameters"] = parameters
    operation["x-memory-hub-role"] = route.role
    operation["x-memory-hub-function"] = route.function
    operation["x-memory-hub-isolated"] = route.isolated


def _answers(path: str, success_ref: str) -> dict[str, Any]:
    from memory_hub.edge.error_docs import ALIASES, ERRORS, GATEWAY_ERRORS, statuses
    from memory_hub.edge.routes import ROUTES

    alias = ALIASES.get(path)
    request_id = {"x-request-id": {"$ref": "#/components/headers/RequestId"}}
    answers: dict[str, Any] = {
        "200": {
            "description": alias[2] if alias else "code 0 and the data",
            "headers": request_id,
            "content": {"application/json": {"schema": {"$ref": success_ref}}},
        }
    }
    for status in statuses(path, ROUTES[path].isolated):
        if alias is None:
            answers[str(status)] = {"$ref": f"#/components/responses/Error{status}"}
        else:
            error = alias[1].__name__
            answers[str(status)] = {
                "description": ERRORS[status],
                "headers": request_id,
                "content": {
                    "application/json": {
                        "schema": {"allOf": [{"$ref": SCHEMAS + error}, {"properties": {"code": {"const": status}}}]}
                    }
                },
            }
    for status in GATEWAY_ERRORS:
        answers[str(status)] = {"$ref": f"#/components/responses/Error{status}"}
    return dict(sorted(answers.items()))


_OPERATION_ORDER = (
    "tags",
    "summary",
    "description",
    "operationId",
    "parameters",
    "requestBody",
    "responses",
    "x-memory-hub-role",
    "x-memory-hub-function",
    "x-memory-hub-isolated",
)


def document() -> dict[str, Any]:
    from memory_hub.edge.routes import ROUTES

    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    for app in _apps():
        answers.update(app.answers)
        doc = json.loads(app.get_openapi_json_schema(title="Memory Hub", version="3"))
        paths.update(doc.get("paths", {}))
        schemas.update(doc.get("components", {}).get("schemas", {}))
    for name in _POWERTOOLS_ONLY:
        schemas.pop(name, None)
    missing = sorted(set(ROUTES) - set(paths))
    if missing:
        raise RuntimeError(f"routes without a resolver route: {missing}")
    success, answer_schemas = _response_models(answers)
    clash = sorted(set(schemas) & set(answer_schemas))
    if clash:
        raise RuntimeError(f"request and response models share names: {clash}")
    schemas.update(answer_schemas)
    for path, item in paths.items():
        operation = item["post"]
        ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        body = schemas.get(ref.get("$ref", "").removeprefix(SCHEMAS))
        _describe_operation(path, operation, body)
        operation["responses"] = _answers(path, success[path])
        item["post"] = {k: operation[k] for k in _OPERATION_ORDER if k in operation}
        assert set(item["post"]) == set(operation), sorted(set(operation) - set(_OPERATION_ORDER))
    paths.update(_public_paths())
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Memory Hub", "version": "3", "description": description()},
        "tags": [{"name": name, "description": text} for name, text in TAGS.items()],
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "responses": dict(sorted(_component_responses().items())),
            "headers": {"RequestId": _request_id_header()},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <api-key>"},
                "serviceId": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-tdai-service-id",
                    "description": "the deployment's service id (default `default`)",
                },
            },
        },
        "security": [{"bearer": [], "serviceId": []}],
    }
    text = json.dumps(spec)
    for name in _POWERTOOLS_ONLY:
        if SCHEMAS + name in text:
            raise RuntimeError(f"the document still refers to {name}")
    return spec


def generate() -> str:
    """The OpenAPI document (``layers/core/python/memory_hub/edge/openapi.json``), as JSON text."""
    return json.dumps(document(), indent=1, sort_keys=False, ensure_ascii=False) + "\n"
