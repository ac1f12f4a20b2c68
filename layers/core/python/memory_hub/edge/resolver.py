"""The Powertools resolver every function uses: validation from pydantic models, the envelope,
and errors handed to the pipeline's single mapping.

A route handler returns what its use case answers and says so in its return annotation
(``def read(req: …) -> Persona``). ``Resolver`` keeps that type per path (``answers``: the OpenAPI
generator documents each 200 as the envelope of it) and wraps the handler's answer in the envelope
itself, so Powertools sees no return annotation: it neither re-validates nor re-serializes answers."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from ..domain import tokens
from ..domain.fields import said
from ..domain.results import Answer
from ..domain.rules import SESSION_REQUIRED
from . import pipeline
from .errors import BadRequest, RouteNotFound

# pydantic puts the failing union member or validator in the location: real fields only
_NOT_FIELDS = ("str", "int", "float", "bool", "list[str]", "dict[str,any]", "literal", "none")


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query"):
        parts = parts[1:]
    parts = [p for p in parts if not p.startswith(("function-", "literal[")) and p.lower() not in _NOT_FIELDS]
    return ".".join(parts) or "(root)"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``<field>: <problem>`` for each bad field (the first problem of each), joined by ``; ``; the
    problem worded as an import words it (``fields.said``)."""
    problems: dict[str, str] = {}
    for error in errors:
        field = _field(tuple(error.get("loc", ())))
        problems.setdefault(field, said(error))
    return "; ".join(f"{f}: {t}" for f, t in problems.items())


def envelope(data: Answer) -> Response[str]:
    return Response(status_code=200, content_type="application/json", body=pipeline.ok_body(data))


class Resolver(APIGatewayRestResolver):
    """Powertools' REST resolver whose routes answer the envelope of their handler's typed answer."""

    def __init__(self) -> None:
        super().__init__(enable_validation=True)
        self.answers: dict[str, Any] = {}  # path -> the handler's return annotation (an Answer, or a union)

    def route(self, rule: str, method: Any, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        register = super().route(rule, method, *args, **kwargs)

        def decorator(handler: Callable[..., Answer]) -> Callable[..., Answer]:
            hints = typing.get_type_hints(handler, include_extras=True)
            if "return" not in hints:
                raise TypeError(f"{rule}: the handler must declare what it answers (a return annotation)")
            self.answers[rule] = hints.pop("return")
            signature = inspect.signature(handler)
            parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]

            @functools.wraps(handler)
            def answer(*a: Any, **k: Any) -> Response[str]:
                return envelope(handler(*a, **k))

            # what Powertools reads: the request parameters, no return annotation
            answer.__signature__ = signature.replace(  # type: ignore[attr-defined]
                parameters=parameters, return_annotation=inspect.Signature.empty
            )
            register(answer)
            return handler

        return decorator


def _as_response(proxy: dict[str, Any]) -> Response[str]:
    return Response(
        status_code=proxy["statusCode"], content_type="application/json", body=proxy["body"], headers=proxy["headers"]
    )


def _missing_session(request: pipeline.Request) -> list[str]:
    """A route that needs a session and got none names it beside the fields' problems (alone, the
    route itself says so)."""
    needs = request.route is not None and request.route.needs_session
    if needs and request.scope is not None and request.scope.session_id is None:
        return [SESSION_REQUIRED]
    return []


def _forged_token(request: pipeline.Request, named: str) -> list[str]:
    """A ``next_token`` this deployment never issued, named beside the other fields' problems (when
    they did not name it already: a wrong type, say). Whether a genuine token fits the request's
    filters cannot be told while other fields are bad."""
    token = request.body.get("next_token")
    unnamed = not any(p.startswith("next_token:") for p in named.split("; "))
    return [tokens.INVALID] if isinstance(token, str) and unnamed and not tokens.signed(token) else []


def make_app() -> Resolver:
    app = Resolver()

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]  # Powertools: unannotated
    def _invalid(exc: RequestValidationError) -> Response[str]:
        request = pipeline.current()
        named = validation_message(list(exc.errors()))
        error = BadRequest("; ".join([*_missing_session(request), named, *_forged_token(request, named)]))
        return _as_response(pipeline.fail(request, error))

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
