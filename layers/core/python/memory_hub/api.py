"""The Powertools resolver every function uses: validation from pydantic models, envelope, errors."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from . import edge
from .errors import ApiError, BadRequest, NotFound

_PROBLEM_TEXT = {
    "missing": "is required",
    "extra_forbidden": "is not allowed",
}


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    # pydantic puts the failing union member / validator name in the path: keep real fields only
    parts = [p for p in parts if not p.startswith("function-") and p not in ("str", "int", "list[str]")]
    return ".".join(parts) or "(root)"


def validation_message(errors: list[dict[str, Any]]) -> str:
    problems: dict[str, str] = {}
    for error in errors:
        field = _field(tuple(error.get("loc", ())))
        text = _PROBLEM_TEXT.get(error.get("type", ""), error.get("msg", "is invalid"))
        if text.startswith("Value error, "):
            text = text[len("Value error, ") :]
        problems.setdefault(field, text)
    return "; ".join(f"{f}: {t}" for f, t in problems.items())


def envelope(data: Any) -> Response:
    return Response(status_code=200, content_type="application/json", body=edge.ok_body(data))


def _as_response(proxy: dict[str, Any]) -> Response:
    return Response(status_code=proxy["statusCode"], content_type="application/json", body=proxy["body"],
                    headers=proxy["headers"])


def make_app() -> APIGatewayRestResolver:
    app = APIGatewayRestResolver(enable_validation=True)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        return _as_response(edge._fail(edge.current(), BadRequest(validation_message(list(exc.errors())))))

    @app.exception_handler(ApiError)
    def _domain(exc: ApiError) -> Response:
        return _as_response(edge._fail(edge.current(), exc))

    @app.not_found
    def _missing(_: Exception) -> Response:
        return _as_response(edge._fail(edge.current(), NotFound("no such route")))

    return app


def lambda_handler_for(app: APIGatewayRestResolver, public: Any = None) -> Any:
    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return edge.handle(app.resolve, event, context, public)

    return lambda_handler
