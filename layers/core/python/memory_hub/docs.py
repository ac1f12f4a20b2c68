"""The three public GET routes (§1): /health, /openapi.json and a Swagger UI at /docs.

The OpenAPI document is generated from every function's Powertools resolver (pydantic models
drive the schemas) by ``memory-hub openapi`` and shipped beside this module; a test fails when
the shipped file drifts from what the code generates.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from .clock import request_id

SPEC_FILE = Path(__file__).with_name("openapi.json")
SWAGGER_BASE = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.17.14"


@lru_cache(maxsize=1)
def spec_text() -> str:
    return SPEC_FILE.read_text(encoding="utf-8")


def _proxy(body: str, content_type: str) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"Content-Type": content_type, "x-request-id": request_id()},
            "body": body, "isBase64Encoded": False}


def _swagger() -> str:
    from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import generate_swagger_html

    return generate_swagger_html(spec_text(), f"{SWAGGER_BASE}/swagger-ui-bundle.js",
                                 f"{SWAGGER_BASE}/swagger-ui.css", "/docs", None)


def public_answer(path: str) -> dict[str, Any] | None:
    if path == "/health":
        return _proxy(json.dumps({"status": "ok"}), "application/json")
    if path == "/openapi.json":
        return _proxy(spec_text(), "application/json")
    if path == "/docs":
        return _proxy(_swagger(), "text/html; charset=utf-8")
    return None
