"""Domain errors: what went wrong, in the domain's words. The edge maps each kind to an HTTP
status in one place (``edge.errors``); nothing here knows about HTTP."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class Invalid(DomainError):
    """The request names a field with a value the domain rejects (``field: problem``)."""


class Unauthenticated(DomainError):
    """No valid key (never says why)."""


class Forbidden(DomainError):
    """A valid key whose role or teams do not cover the request."""


class NotFound(DomainError):
    pass


class Conflict(DomainError):
    """The state is not what the request expected (versions, collisions); retrying does not help."""


class Busy(DomainError):
    """Too much concurrent activity on one thing; retrying later does."""


class Unavailable(DomainError):
    """A dependency failed and nothing was changed; retrying later does."""
