"""``Idempotency-Key`` (conversation/add, chat-memory/clear) on top of Powertools idempotency
(DynamoDB records, 1 hour).

The key is scoped to (key id, route, team, agent, user) — for clear (key id, route) — and bodies
are compared as parsed JSON: a retry with the same body gets the first ``data`` and writes nothing;
another body → 422; a retry while the first is still running → 409 retryable. The stored record
holds the answer's ``data`` (ids and counts, never content) and a hash of the body; a retry gets
it back as the route's answer type (``kind``). It runs after
the authorization and not-found checks of its route, so those always answer first."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ..domain.results import Answer
from ..storage.idempotency import persistence_layer
from .errors import BadRequest, IdempotencyMismatch, InFlight

HEADER = "idempotency-key"
_VALID = re.compile(r"[\x20-\x7e]{1,255}", re.ASCII)
EXPIRES_AFTER_S = 3600
A = TypeVar("A", bound=Answer)


def once(
    key: str | None,
    scope: list[str],
    body: dict[str, Any],
    run: Callable[[], A],
    kind: type[A],
    lambda_context: Any = None,
) -> A:
    """``run()`` at most once per (scope, key) within an hour; its answer again for retries."""
    if key is None:
        return run()
    if not _VALID.fullmatch(key):
        raise BadRequest("Idempotency-Key: must be 1-255 printable ASCII characters")
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )

    config = IdempotencyConfig(
        event_key_jmespath="scope",
        payload_validation_jmespath="body",
        expires_after_seconds=EXPIRES_AFTER_S,
        raise_on_no_idempotency_key=True,
    )
    if lambda_context is not None:
        config.register_lambda_context(lambda_context)

    @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools: returns Any
        data_keyword_argument="request", persistence_store=persistence_layer(), config=config
    )
    def memory_hub_request(request: dict[str, Any]) -> dict[str, Any]:
        return run().wire()

    try:
        answer: dict[str, Any] = memory_hub_request(request={"scope": [*scope, key], "body": body})
        return kind.model_validate(answer)
    except IdempotencyValidationError:
        raise IdempotencyMismatch("Idempotency-Key: already used with a different body") from None
    except IdempotencyAlreadyInProgressError:
        raise InFlight("Idempotency-Key: the first request with this key is still running") from None


def idempotent(request: Any, scope: list[str], run: Callable[[], A], kind: type[A], lambda_context: Any) -> A:
    """A route's work under the request's ``Idempotency-Key``, if it sent one. Without one the work
    starts at once (its first read overlapping the key lookup); with one, the key is checked first
    (401/403 always answer before 422/409)."""
    key = request.header(HEADER)
    if key is None:
        return run()
    principal = request.authorize()
    return once(key, [principal.key_id, *scope], request.body, run, kind, lambda_context)
