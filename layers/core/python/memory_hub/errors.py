"""Domain errors. Raised anywhere below the edge, mapped to the envelope in one place (edge.py)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status = 500
    retryable: bool | None = None

    def __init__(self, message: str, data: dict[str, Any] | None = None, *, retryable: bool | None = None):
        super().__init__(message)
        self.message = message
        self.data = data
        if retryable is not None:
            self.retryable = retryable


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class MethodNotAllowed(ApiError):
    status = 405


class Conflict(ApiError):
    status = 409
    retryable = False


class PayloadTooLarge(ApiError):
    status = 413


class UnsupportedEncoding(ApiError):
    status = 415


class Unprocessable(ApiError):
    status = 422


class Unavailable(ApiError):
    status = 503
    retryable = True


def field_errors(problems: list[tuple[str, str]]) -> BadRequest:
    """A 400 naming each bad field as ``<field>: <problem>``, joined by ``; ``."""
    return BadRequest("; ".join(f"{field}: {problem}" for field, problem in problems))
