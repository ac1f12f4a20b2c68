"""The one place where errors become HTTP statuses (the error envelope's ``code`` is the status)."""

from __future__ import annotations

from typing import Any

from ..domain import errors as domain
from ..storage import errors as storage

INTERNAL = "Internal server error"


class EdgeError(Exception):
    """An HTTP-level refusal decided at the edge, with its status."""

    status = 400
    retryable: bool | None = None

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class BadRequest(EdgeError):
    status = 400


class RouteNotFound(EdgeError):
    status = 404


class MethodNotAllowed(EdgeError):
    """405, with the methods the path does take (its ``Allow`` header)."""

    status = 405

    def __init__(self, message: str, allow: str) -> None:
        super().__init__(message)
        self.allow = allow


class PayloadTooLarge(EdgeError):
    status = 413


class UnsupportedEncoding(EdgeError):
    status = 415


class MissingIsolation(EdgeError):
    status = 422


class IdempotencyMismatch(EdgeError):
    status = 422


class InFlight(EdgeError):
    """A request with the same Idempotency-Key is still running."""

    status = 409
    retryable = True


_DOMAIN: dict[type[Exception], tuple[int, bool | None]] = {
    domain.Invalid: (400, None),
    domain.Unauthenticated: (401, None),
    domain.Forbidden: (403, None),
    domain.NotFound: (404, None),
    domain.Conflict: (409, False),
    domain.Busy: (503, True),
    domain.Unavailable: (503, True),
    storage.Busy: (503, True),
}


def describe(exc: BaseException) -> tuple[int, str, dict[str, Any] | None, bool | None]:
    """(status, message, data, retryable) of any exception; a 500 never carries internal text."""
    if isinstance(exc, EdgeError):
        return exc.status, exc.message, exc.data, exc.retryable
    for kind, (status, retryable) in _DOMAIN.items():
        if isinstance(exc, kind):
            message = getattr(exc, "message", None) or str(exc)
            return status, message, getattr(exc, "data", None), retryable
    return 500, INTERNAL, None, True
