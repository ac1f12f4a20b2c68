"""The Powertools resolver every function uses: validation from pydantic models, the envelope,
and errors handed to the pipeline's single mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from . import pipeline
from .errors import BadRequest, RouteNotFound

_PROBLEM_TEXT = {
    "missing": "is required",
    "extra_forbidden": "is not allowed",
}
# pydantic puts the failing union member or validator in the location: real fields only
_NOT_FIELDS = ("str", "int", "float", "bool", "list[str]", "dict[str,any]", "literal", "none")


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query"):
        parts = parts[1:]
    parts = [p for p in parts if not p.startswith(("function-", "literal[")) and p.lower() not in _NOT_FIELDS]
    return ".".join(parts) or "(root)"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``<field>: <problem>`` for each bad field (the first problem of each), joined by ``; ``."""
    problems: dict[str, str] = {}
    for error in errors:
        field = _field(tuple(error.get("loc", ())))
        text = _PROBLEM_TEXT.get(error.get("type", ""), error.get("msg", "is invalid"))
        if text.startswith("Value error, "):
            text = text[len("Value error, ") :]
        problems.setdefault(field, text)
    return "; ".join(f"{f}: {t}" for f, t in problems.items())


def envelope(data: Any) -> Response[str]:
    return Response(status_code=200, content_type="application/json", body=pipeline.ok_body(data))


def _as_response(proxy: dict[str, Any]) -> Response[str]:
    return Response(
        status_code=proxy["statusCode"], content_type="application/json", body=proxy["body"], headers=proxy["headers"]
    )


def make_app() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]  # Powertools: unannotated
    def _invalid(exc: RequestValidationError) -> Response[str]:
        error = BadRequest(validation_message(list(exc.errors())))
        return _as_response(pipeline.fail(pipeline.current(), error))

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]  # Powertools: unannotated
    def _error(exc: Exception) -> Response[str]:
        return _as_response(pipeline.fail(pipeline.current(), exc))

    @app.not_found
    def _missing(_: Exception) -> Response[str]:
        return _as_response(pipeline.fail(pipeline.current(), RouteNotFound("no such route")))

    return app


def lambda_handler_for(
    app: APIGatewayRestResolver, public: Callable[[str], dict[str, Any] | None] | None = None
) -> Callable[..., dict[str, Any]]:
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return pipeline.handle(app.resolve, event, context, public)

    return lambda_handler
