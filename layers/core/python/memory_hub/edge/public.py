"""The public GET routes: /health, /openapi.json, the API reference at /docs and the memory
console at /console — no auth, no envelope, and nothing loaded from another host.

Swagger UI comes from the copy Powertools ships (inside the layer); the console is plain HTML, CSS
and JavaScript modules in ``static/console`` (no build step), plus ``/console/rules.js``, the field
rules it shows, rendered from the domain's (``console_rules``). Every page carries a strict
Content-Security-Policy: scripts (module scripts included) and styles only from the API itself, no
framing, no forms."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..clock import request_id
from ..settings import get_settings
from .console_rules import module_text

SPEC_FILE = Path(__file__).with_name("openapi.json")
RULES_MODULE = "/console/rules.js"
STATIC = Path(__file__).with_name("static")
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Swagger UI sets style attributes from its scripts, which a strict style-src would block.
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")
_SECURITY = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


@lru_cache(maxsize=1)
def spec_text() -> str:
    return SPEC_FILE.read_text(encoding="utf-8")


def _swagger_dir() -> Path:
    import aws_lambda_powertools.event_handler.openapi.swagger_ui as swagger_ui

    return Path(swagger_ui.__file__).parent


@lru_cache(maxsize=8)
def _asset(path: str) -> tuple[str, str] | None:
    """(text, content type) of a static asset, or None."""
    if path in ("/docs/swagger-ui.js", "/docs/swagger-ui.css"):
        name = "swagger-ui-bundle.min.js" if path.endswith(".js") else "swagger-ui.min.css"
        return (_swagger_dir() / name).read_text(encoding="utf-8"), _TYPES[Path(name).suffix]
    folder, _, name = path.lstrip("/").partition("/")
    if folder not in ("docs", "console") or not name or "/" in name or name.startswith("."):
        return None
    file = STATIC / folder / name
    if not file.is_file():
        return None
    return file.read_text(encoding="utf-8"), _TYPES.get(file.suffix, "application/octet-stream")


def _answer(body: str, content_type: str, csp: str | None = None, cache: str | None = None) -> dict[str, Any]:
    headers = dict(_SECURITY)
    if csp:
        headers["Content-Security-Policy"] = csp
    if cache:
        headers["Cache-Control"] = cache
    return {
        "statusCode": 200,
        "headers": {"Content-Type": content_type, "x-request-id": request_id(), **headers},
        "body": body,
        "isBase64Encoded": False,
    }


def answer(path: str) -> dict[str, Any] | None:
    """The public page or asset at ``path``; None when there is none (the caller answers 404/405)."""
    if path == "/health":
        formation = "on" if get_settings().formation else "off"  # the deployment's; an asset may still be off
        return _answer(json.dumps({"status": "ok", "formation": formation}), "application/json")
    if path == "/openapi.json":
        return _answer(spec_text(), "application/json")
    if path in ("/docs", "/console"):
        found = _asset(f"{path}/index.html")
        return _answer(found[0], found[1], DOCS_CSP if path == "/docs" else CSP) if found else None
    found = (module_text(), _TYPES[".js"]) if path == RULES_MODULE else _asset(path)
    if found is None:
        return None
    return _answer(found[0], found[1], DOCS_CSP if path.startswith("/docs/") else CSP, "public, max-age=3600")
