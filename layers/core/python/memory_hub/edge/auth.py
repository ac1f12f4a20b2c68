"""Who is calling: the service id is checked at once, the key is looked up in the
background (so the lookup overlaps the request's first reads), and every answer waits for it."""

from __future__ import annotations

import hmac
from concurrent.futures import Future

from ..domain.errors import Unauthenticated
from ..domain.keys import INVALID_KEY, authenticate
from ..domain.principal import Principal
from ..settings import get_settings
from ..storage.concurrency import submit

UNKNOWN_SERVICE = "x-tdai-service-id: unknown service"


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def _failed(error: BaseException) -> Future[Principal]:
    future: Future[Principal] = Future()
    future.set_exception(error)
    return future


def start(headers: dict[str, str]) -> Future[Principal]:
    """The caller's principal, resolving in the background."""
    service = headers.get("x-tdai-service-id")
    # exactly the deployment's id: " default " is another (unknown) service
    if service is None or not hmac.compare_digest(
        service.encode("utf-8", "surrogatepass"), get_settings().service_id.encode()
    ):
        return _failed(Unauthenticated(UNKNOWN_SERVICE))
    token = bearer_token(headers.get("authorization"))
    if token is None:
        return _failed(Unauthenticated(INVALID_KEY))
    return submit(authenticate, token)
