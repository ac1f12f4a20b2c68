"""The API's OpenAPI document and its Markdown reference, both from the code.

``generate()`` loads every function's Powertools resolver (``functions/*/app.py``) for the request
side — paths, request models, query parameters, summaries, tags — and describes the answers from
``memory_hub.edge.schemas.responses``: each POST's 200 is the envelope with that route's ``data``,
each error status the route can answer is the error envelope (never Powertools' 422
``HTTPValidationError``: the API answers a bad field with 400 and its envelope). Isolated routes
get their ``x-tdai-*`` header alternatives, routes with ``Idempotency-Key`` that header, and the
public GET routes a minimal description. ``reference()`` renders the same document as Markdown
(``docs/API.md``). Both are deterministic: the same code gives the same text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory_hub_local.template import ROOT, load_raw

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

REFERENCE_FILE = ROOT / "docs" / "API.md"
SCHEMAS = "#/components/schemas/"
# Powertools' own error models: shapes this API never sends.
_POWERTOOLS_ONLY = ("HTTPValidationError", "ValidationError", "ResponseValidationError")


def _apps() -> list[Any]:
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


DESCRIPTION = """\
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
with the error envelope. Checks run in this order, the first failing one answering: 401 → \
404/405 → role 403 → 413 → 415 → 400 (JSON) → 422 (isolation) → 400 (isolation format) → team \
403 → 400 (fields) → 403 (named memory) → 404 → 409 (memory_id ambiguous) → 422/409 \
(Idempotency-Key) → 409.

**Isolation.** `team_id`, `agent_id`, `user_id`, `session_id`, `task_id` come from the body, else \
from the headers `x-tdai-team-id`, `x-tdai-agent-id`, `x-tdai-user-id`, `x-tdai-session-id`, \
`x-tdai-task-id`. Every `/v3/conversation/*`, `/v3/atomic/*`, `/v3/scenario/*` and `/v3/core/*` \
route requires non-blank `team_id`, `agent_id` and `user_id` (else 422 naming the missing ones).

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

_ISOLATION_HEADERS = {
    "team_id": "x-tdai-team-id",
    "agent_id": "x-tdai-agent-id",
    "user_id": "x-tdai-user-id",
    "session_id": "x-tdai-session-id",
    "task_id": "x-tdai-task-id",
}
IDEMPOTENCY_KEY = "Idempotency-Key"


def _request_id_header() -> dict[str, Any]:
    from memory_hub.edge.schemas.responses import REQUEST_ID

    return {
        "description": "the answer's request id (`req-` + 16 lowercase hex)",
        "required": True,
        "schema": {"type": "string", "pattern": REQUEST_ID},
    }


def _isolation_parameters(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The x-tdai-* headers, each with the schema of its body field (the body wins when it has one)."""
    parameters = []
    for name, header in _ISOLATION_HEADERS.items():
        field = body["properties"][name]
        schema = next((s for s in field.get("anyOf", [field]) if s.get("type") == "string"), field)
        required = "required (body or header)" if name in ("team_id", "agent_id", "user_id") else "optional"
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
    """The error envelope with ``code`` fixed to the status (and ``retryable`` as §1 says)."""
    extra: dict[str, Any] = {"properties": {"code": {"const": status}}}
    if status in (500, 503):
        extra = {"properties": {"code": {"const": status}, "retryable": {"const": True}}, "required": ["retryable"]}
    elif status == 409:
        extra = {"properties": {"code": {"const": status}, "retryable": {"type": "boolean"}}, "required": ["retryable"]}
    return {"allOf": [{"$ref": SCHEMAS + "ErrorEnvelope"}, extra]}


def _component_responses() -> dict[str, Any]:
    from memory_hub.edge.schemas.responses import ERRORS, GATEWAY_ERRORS

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


def _response_models() -> tuple[dict[str, str], dict[str, Any]]:
    """The 200 schema of each POST path (a $ref) and the response components they need."""
    from memory_hub.edge.schemas import responses
    from pydantic import create_model
    from pydantic.json_schema import models_json_schema

    models: list[Any] = [responses.ErrorEnvelope, responses.GatewayError]
    named: dict[str, Any] = {}
    envelope: Any = responses.Envelope  # parametrized at run time with each route's data model
    for path, doc in responses.ROUTES.items():
        model = doc.data
        if doc.envelope:
            model = create_model(f"{_camel(path)}Answer", __base__=envelope[doc.data])
        else:
            models.append(doc.error)
        named[path] = model
        models.append(model)
    unique = list(dict.fromkeys(models))
    refs, top = models_json_schema([(m, "validation") for m in unique], ref_template=SCHEMAS + "{model}")
    defs: dict[str, Any] = top.get("$defs", {})
    for schema in defs.values():
        _absent_not_null(schema)
    return {path: refs[(model, "validation")]["$ref"] for path, model in named.items()}, defs


def _absent_not_null(model: dict[str, Any]) -> None:
    """An answer's optional field (``X | None = None``) is left out when unset, never sent as null:
    document it as X, not required."""
    required = set(model.get("required", []))
    for name, schema in model.get("properties", {}).items():
        if name in required or schema.get("default", "") is not None or "anyOf" not in schema:
            continue
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        model["properties"][name] = rest | (options[0] if len(options) == 1 else {"anyOf": options})


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
    from memory_hub.edge.routes import ROUTES
    from memory_hub.edge.schemas.responses import ROUTES as ANSWERS

    route, doc = ROUTES[path], ANSWERS[path]
    lines = [f"Role: `{route.role}` or above. Served by `{route.function}`."]
    parameters = list(operation.get("parameters", []))
    for parameter in parameters:
        if parameter.get("name") == "Action":  # /v2/memory: the DeleteUserMemory request shape
            parameter["description"] = "must be `DeleteUserMemory` (else 400)"
    if route.isolated:
        assert body is not None, path
        lines.append(
            "Isolated: `team_id`, `agent_id` and `user_id` are required, from the body or the `x-tdai-*` "
            "headers (422 names the missing ones); `team_id`/`agent_id` match "
            "`^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$`, `user_id`/`session_id`/`task_id` are 1-256 "
            "characters without control characters (400 otherwise)."
        )
        parameters += _isolation_parameters(body)
    if doc.idempotent:
        lines.append("Supports `Idempotency-Key`.")
        parameters.append(_idempotency_parameter())
    if not doc.envelope:
        lines.append(f"Answers without the envelope: {doc.description}.")
    operation["description"] = " ".join(lines)
    if parameters:
        operation["parameters"] = parameters
    operation["x-memory-hub-role"] = route.role
    operation["x-memory-hub-function"] = route.function
    operation["x-memory-hub-isolated"] = route.isolated


def _answers(path: str, success_ref: str) -> dict[str, Any]:
    from memory_hub.edge.schemas.responses import ERRORS, GATEWAY_ERRORS
    from memory_hub.edge.schemas.responses import ROUTES as ANSWERS

    doc = ANSWERS[path]
    request_id = {"x-request-id": {"$ref": "#/components/headers/RequestId"}}
    answers: dict[str, Any] = {
        "200": {
            "description": doc.description,
            "headers": request_id,
            "content": {"application/json": {"schema": {"$ref": success_ref}}},
        }
    }
    for status in doc.statuses:
        if doc.envelope:
            answers[str(status)] = {"$ref": f"#/components/responses/Error{status}"}
        else:
            error = doc.error.__name__
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


def _document() -> dict[str, Any]:
    from memory_hub.edge.routes import ROUTES

    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for app in _apps():
        doc = json.loads(app.get_openapi_json_schema(title="Memory Hub", version="3"))
        paths.update(doc.get("paths", {}))
        schemas.update(doc.get("components", {}).get("schemas", {}))
    for name in _POWERTOOLS_ONLY:
        schemas.pop(name, None)
    missing = sorted(set(ROUTES) - set(paths))
    if missing:
        raise RuntimeError(f"routes without a resolver route: {missing}")
    success, answer_schemas = _response_models()
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
        "info": {"title": "Memory Hub", "version": "3", "description": DESCRIPTION},
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
    return json.dumps(_document(), indent=1, sort_keys=False, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the Markdown reference (docs/API.md)

_ROLES = {"reader": "any key (reader, writer, admin)", "writer": "writer or admin", "admin": "admin"}

_CONVENTIONS = """\
## Conventions

**Calling.** Every route below but the public pages is `POST` with a JSON object as its body (at \
most 1 MiB, also after gzip decoding; send `Content-Encoding: gzip` to compress it) and these \
headers:

| header | value |
|---|---|
| `Authorization` | `Bearer <api-key>` (the scheme is case-insensitive) |
| `x-tdai-service-id` | the deployment's service id (`default` unless configured) |

A field's type is checked, never coerced: `"limit": "10"` is a 400, and so is `"limit": 10.0` (an \
integer is written without fraction or exponent). A key whose value is `null` \
counts as absent, except where a route says otherwise. Keys the route does not know are ignored, at \
every level. Lengths in *chars* count Unicode code points; in *bytes*, UTF-8 bytes. A *control \
character* is one of Unicode category Cc (U+0000–U+001F, U+007F–U+009F).

**Answers.** A success is HTTP 200 with the envelope; the route's own fields are in `data`:

```json
{"code": 0, "message": "ok", "request_id": "req-0123456789abcdef", "data": {}}
```

An error is the HTTP status with the same shape: `code` equals the status, `message` says what is \
wrong, `data` may add details (a 409 tells the current version or the conflicts), and `retryable` \
says whether trying again can help:

```json
{"code": 400, "message": "limit: Input should be less than or equal to 100", "request_id": "req-…"}
```

A 400 lists each bad field as `<field>: <problem>`, separated by `; `; a field inside a list is \
named by its dotted path with zero-based indices (`messages.3.content`), and a rule across fields \
by `(root)`. `retryable` is `true` on 500 and 503 and on the 409 of an `Idempotency-Key` that is \
still running, `false` on every other 409, and may be absent elsewhere. Every answer carries its \
request id in the `x-request-id` header too. A path the API does not have answers 404, and another \
method on a known path 405, both as error envelopes.

When several things are wrong, the first failing check answers, in this order: service id and key \
(401), path (404) and method (405), role (403), size (413), encoding (415), JSON object (400), \
missing isolation fields (422), their format (400), team outside the key (403), other fields \
(400), a named memory outside the key (403), not found (404), a memory_id several pairs spell (409 \
`memory_id ambiguous`), `Idempotency-Key` (422, 409), other conflicts (409).

**Isolation.** The data-plane routes (`/v3/conversation/*`, `/v3/atomic/*`, `/v3/scenario/*`, \
`/v3/core/*`) act inside one scope. Each isolation field comes from the body or, when the body has \
none, from its header:

| field | header | rule |
|---|---|---|
| `team_id` | `x-tdai-team-id` | required; `^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$` |
| `agent_id` | `x-tdai-agent-id` | required; same pattern as `team_id` |
| `user_id` | `x-tdai-user-id` | required; 1–256 chars, no control characters |
| `session_id` | `x-tdai-session-id` | optional; 1–256 chars, no control characters |
| `task_id` | `x-tdai-task-id` | optional; 1–256 chars, no control characters |

A missing or blank required field is a 422 naming the missing ones (`missing isolation fields: \
team_id, agent_id`); a malformed one is a 400. L0 and L1 are scoped by team, agent and user (and \
task when given; `session_id` narrows L0 reads only); L2 and L3 by team and agent, shared by the \
agent's users. The body tables below leave these five fields out.

**Times** in requests are RFC 3339 (`2026-01-01T08:00:00+08:00`, upper-case `T` and `Z`, 1–9 \
fraction digits); answers always use `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC. Time filters are \
inclusive. **Pagination:** `next_token` is opaque, present only when more results exist, and \
valid only with the same filters (`limit` may change); a bad one is a 400.

**Paths** (L2 `path`, `path_prefix`) are relative and `/`-separated, at most 512 UTF-8 bytes, \
with no control character, no backslash, no leading `/`, no empty segment (one trailing `/` is \
allowed on a `path_prefix` and on an `rm` folder path), and no segment that starts with `.`; a \
file path ends in `.md`. Nothing is percent-decoded. A `path_prefix` is a plain string prefix \
(`a` matches `a/x.md` and `ab.md`); it may be empty.

**On AWS**, API Gateway may answer by itself with 429 (throttled), 502 or 504 (the function failed \
or timed out), in the envelope's shape with `retryable: true`; every route can get these, so the \
route sections below do not repeat them.
"""


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


class _Reference:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.schemas: dict[str, Any] = spec["components"]["schemas"]
        from memory_hub.edge.schemas import common

        self.patterns = {
            common.TIME_PATTERN: "RFC 3339 time",
            common.NO_CONTROL_PATTERN: "no control characters",
            common.FILE_PATTERN: "a file path (see Paths)",
            common.PREFIX_PATTERN: "a path prefix (see Paths)",
            common.RM_PATTERN: "a file path or a folder path ending in `/` (see Paths)",
        }

    def model(self, ref: str) -> dict[str, Any]:
        found: dict[str, Any] = self.schemas[ref.removeprefix(SCHEMAS)]
        return found

    @staticmethod
    def _branches(schema: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
        """The alternatives of a schema (anyOf), and whether null is one of them."""
        options = schema.get("anyOf", [schema])
        real = [o for o in options if o.get("type") != "null"]
        return real, len(real) < len(options)

    def type_of(self, schema: dict[str, Any]) -> str:
        real, nullable = self._branches(schema)
        names = [self._one_type(o) for o in real] or ["null"]
        text = " or ".join(dict.fromkeys(names))
        return f"{text} or null" if nullable and real else text

    def _one_type(self, schema: dict[str, Any]) -> str:
        if "$ref" in schema:
            return str(schema["$ref"]).removeprefix(SCHEMAS)
        if "allOf" in schema and len(schema["allOf"]) == 1:
            return self._one_type(schema["allOf"][0])
        if "const" in schema:
            return json.dumps(schema["const"], ensure_ascii=False)
        if "enum" in schema:
            return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        kind = schema.get("type")
        if kind == "array":
            return f"{self.type_of(schema.get('items', {}))}[]"
        if kind == "object":
            values = schema.get("additionalProperties")
            keys = schema.get("propertyNames", {}).get("enum")
            if isinstance(values, dict) and values:
                key = "/".join(keys) if keys else "string"
                return f"{{{key}: {self.type_of(values)}}}"
            return "object"
        return str(kind or "any")

    def rules(self, schema: dict[str, Any]) -> str:
        real, _ = self._branches(schema)
        found: list[str] = []
        for option in real:
            found += self._one_rules(option)
        if "default" in schema and schema["default"] is not None:
            found.append(f"default {json.dumps(schema['default'], ensure_ascii=False)}")
        return "; ".join(dict.fromkeys(found))

    @staticmethod
    def _span(low: Any, high: Any, unit: str) -> str | None:
        suffix = f" {unit}" if unit else ""
        if low is not None and high is not None:
            return f"{low:,}–{high:,}{suffix}" if low != high else f"exactly {low:,}{suffix}"
        if high is not None:
            return f"≤ {high:,}{suffix}"
        if low is not None:
            return f"≥ {low:,}{suffix}"
        return None

    def _one_rules(self, schema: dict[str, Any]) -> list[str]:
        found = [
            self._span(schema.get("minLength"), schema.get("maxLength"), "chars"),
            self._span(schema.get("minItems"), schema.get("maxItems"), "items"),
            self._span(schema.get("minimum"), schema.get("maximum"), ""),
        ]
        rules = [f for f in found if f]
        if "pattern" in schema:
            pattern = schema["pattern"]
            rules.append(self.patterns.get(pattern) or f"pattern `{pattern}`")
        if schema.get("type") == "array":
            rules += [f"each {r}" for r in self._one_rules(schema.get("items", {}))]
        return [r.replace(".0", "") if r[:1].isdigit() or r[:1] in "≤≥" else r for r in rules]

    def refs_in(self, schema: Any) -> list[str]:
        """Object models named anywhere inside ``schema``, in order of first use."""
        found: list[str] = []
        if isinstance(schema, dict):
            if "$ref" in schema:
                found.append(schema["$ref"].removeprefix(SCHEMAS))
            for value in schema.values():
                found += self.refs_in(value)
        elif isinstance(schema, list):
            for value in schema:
                found += self.refs_in(value)
        return found

    def table(self, name: str, skip: tuple[str, ...] = (), answer: bool = False) -> list[str]:
        model = self.schemas[name]
        properties: dict[str, Any] = model.get("properties", {})
        required = set(model.get("required", []))
        rows = [(k, v) for k, v in properties.items() if k not in skip]
        if not rows:
            return ["No fields: send `{}`."] if not answer else ["No fields."]
        lines = []
        if answer:
            lines += ["| field | type | notes |", "|---|---|---|"]
        else:
            lines += ["| field | type | required | rules | notes |", "|---|---|---|---|---|"]
        for key, schema in rows:
            kind = _cell(self.type_of(schema))
            note = _cell(schema.get("description", ""))
            if answer:
                always = "" if key in required else "only when set"
                lines.append(f"| `{key}` | {kind} | {'; '.join(x for x in (always, note) if x)} |")
            else:
                need = "yes" if key in required else "no"
                lines.append(f"| `{key}` | {kind} | {need} | {_cell(self.rules(schema))} | {note} |")
        return lines

    def nested(self, roots: list[str], seen: set[str], answer: bool) -> list[str]:
        lines: list[str] = []
        queue = [r for root in roots for r in self.refs_in(self.schemas[root])]
        while queue:
            name = queue.pop(0)
            if name in seen or self.schemas[name].get("type") != "object":
                continue
            seen.add(name)
            lines += ["", f"`{name}`:", "", *self.table(name, answer=answer)]
            queue += self.refs_in(self.schemas[name])
        return lines

    def operation(self, path: str, method: str, op: dict[str, Any]) -> list[str]:
        title = f"{method.upper()} {path}"
        lines = [f"### `{title}`", "", f"{op.get('summary', '')}.", ""]
        if method == "get":
            content = op["responses"]["200"]["content"]
            kind = next(iter(content))
            return [*lines, f"No auth, no envelope: answers `{kind}`.", ""]
        role, function = op["x-memory-hub-role"], op["x-memory-hub-function"]
        facts = [f"Role: {_ROLES[role]}", f"function: `{function}`"]
        if op["x-memory-hub-isolated"]:
            facts.append("isolated (team, agent, user required)")
        params = op.get("parameters", [])
        if any(p["name"] == IDEMPOTENCY_KEY for p in params):
            facts.append("accepts `Idempotency-Key`")
        lines += ["; ".join(facts) + ".", ""]
        extra = [p for p in params if not p["name"].startswith("x-tdai-")]
        if extra:
            lines += ["| parameter | in | type | required | rules | notes |", "|---|---|---|---|---|---|"]
            for p in extra:
                need = "yes" if p.get("required") else "no"
                schema = p["schema"]
                lines.append(
                    f"| `{p['name']}` | {p['in']} | {_cell(self.type_of(schema))} | {need} | "
                    f"{_cell(self.rules(schema))} | {_cell(p.get('description', ''))} |"
                )
            lines.append("")
        body_ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        body = body_ref.removeprefix(SCHEMAS)
        skip = tuple(_ISOLATION_HEADERS) if op["x-memory-hub-isolated"] else ()
        lines += [f"**Body** (`{body}`):", "", *self.table(body, skip=skip)]
        lines += self.nested([body], {body}, answer=False)
        lines += [""]
        ok = op["responses"]["200"]
        answer = ok["content"]["application/json"]["schema"]["$ref"].removeprefix(SCHEMAS)
        data = self.schemas[answer].get("properties", {}).get("data")
        if data is None:  # not the envelope: the answer itself
            lines += [f"**Answer** (`{answer}`, not the envelope): {ok['description']}", ""]
            lines += self.table(answer, answer=True)
            roots = [answer]
        else:
            roots = [r.removeprefix(SCHEMAS) for r in self.refs_in(data)]
            names = " or ".join(f"`{r}`" for r in roots)
            lines += [f"**Answer** `data` ({names}):", ""]
            for i, root in enumerate(roots):
                description = self.schemas[root].get("description")
                if len(roots) > 1:
                    lines += [f"{'' if i == 0 else chr(10)}`{root}`: {description or ''}", ""]
                lines += self.table(root, answer=True)
        lines += self.nested(roots, set(roots), answer=True)
        statuses = [s for s in op["responses"] if s != "200" and int(s) not in (429, 502, 504)]
        lines += ["", "**Errors**:", ""]
        for status in statuses:
            response = op["responses"][status]
            if "$ref" in response:
                response = self.spec["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
            lines.append(f"- {status}: {response['description']}")
        return [*lines, ""]

    def render(self) -> str:
        ops = [
            (path, method, op)
            for path, item in self.spec["paths"].items()
            for method, op in item.items()
            if method in ("get", "post")
        ]
        tag_order = {name: i for i, name in enumerate(TAGS)}
        ops.sort(key=lambda o: (tag_order.get(o[2]["tags"][0], len(TAGS)), o[0]))
        lines = [
            "# Memory Hub API reference",
            "",
            "<!-- Generated by `memory-hub openapi` (memory_hub_tools.openapi.reference) from the models behind",
            "     /openapi.json. Do not edit by hand: change the code and run `memory-hub openapi`. -->",
            "",
            "This page describes every route of the Memory Hub HTTP API: who may call it, what it takes and",
            "what it answers. It is generated from the same request and response models as the OpenAPI",
            "document the service serves at `GET /openapi.json` (browsable at `GET /docs`), so the two always",
            "agree. The wire contract behind it is `CONTRACT.md` in the project's shared notes.",
            "",
            _CONVENTIONS,
            "### Error statuses",
            "",
            "| status | when |",
            "|---|---|",
        ]
        from memory_hub.edge.schemas.responses import ERRORS, GATEWAY_ERRORS

        lines += [f"| {s} | {_cell(t)} |" for s, t in {**ERRORS, **GATEWAY_ERRORS}.items()]
        lines += ["", "## Routes", "", "| route | role | summary |", "|---|---|---|"]
        for path, method, op in ops:
            title = f"{method.upper()} {path}"
            role = op.get("x-memory-hub-role", "none (public)")
            lines.append(f"| [`{title}`](#{_anchor(title)}) | {role} | {_cell(op.get('summary', ''))} |")
        current = None
        for path, method, op in ops:
            tag = op["tags"][0]
            if tag != current:
                current = tag
                lines += (
                    ["", f"## {tag}", "", TAGS.get(tag, ""), ""]
                    if lines[-1]
                    else [f"## {tag}", "", TAGS.get(tag, ""), ""]
                )
            lines += self.operation(path, method, op)
        return "\n".join(lines).rstrip("\n") + "\n"


def reference() -> str:
    """The API reference in Markdown (``docs/API.md``), rendered from the OpenAPI document."""
    return _Reference(_document()).render()
