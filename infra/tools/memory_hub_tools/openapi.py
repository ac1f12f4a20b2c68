"""Builds the API's OpenAPI document from every function's Powertools resolver."""

from __future__ import annotations

import json
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


DESCRIPTION = (
    "Memory Hub: long-term memory for AI agents (L0 messages, L1 records, L2 scenario files, "
    "L3 persona), wire-compatible with the TencentDB Agent Memory v3 data plane. Every route but "
    "GET /health, /openapi.json and /docs is POST with a JSON object body and needs "
    "`Authorization: Bearer <key>` and `x-tdai-service-id`. Answers use the envelope "
    "{code, message, request_id, data}; errors carry the HTTP status in `code`. Isolation fields "
    "(team_id, agent_id, user_id, session_id, task_id) come from the body, else from x-tdai-* headers."
)


def generate() -> str:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for app in _apps():
        doc = json.loads(app.get_openapi_json_schema(title="Memory Hub", version="3"))
        paths.update(doc.get("paths", {}))
        schemas.update(doc.get("components", {}).get("schemas", {}))
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Memory Hub", "version": "3", "description": DESCRIPTION},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "serviceId": {"type": "apiKey", "in": "header", "name": "x-tdai-service-id"},
            },
        },
        "security": [{"bearer": [], "serviceId": []}],
    }
    return json.dumps(spec, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
