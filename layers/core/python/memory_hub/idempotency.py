"""``Idempotency-Key`` (§7, §9) on top of Powertools idempotency (DynamoDB persistence, 1 h).

The key is scoped to (key id, route, team, agent, user) — for clear (key id, route) — and the body
is compared as parsed JSON: a retry with the same body returns the first ``data`` and writes
nothing; another body → 422; a retry while the first is still running → 409 retryable. The stored
record holds the answer's ``data`` (ids and counts, never content) and a hash of the body.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

from .errors import BadRequest, Conflict, Unprocessable
from .settings import get_settings

HEADER = "idempotency-key"
_VALID = re.compile(r"^[\x20-\x7e]{1,255}$")
EXPIRES_AFTER_S = 3600


@lru_cache(maxsize=1)
def _store() -> Any:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from .dal.aws import RETRIES

    from botocore.config import Config

    return DynamoDBPersistenceLayer(table_name=get_settings().idempotency_table,
                                    boto_config=Config(region_name=get_settings().region, retries=RETRIES))


def once(key: str | None, scope: list[str], body: dict[str, Any], run: Callable[[], dict[str, Any]],
         lambda_context: Any = None) -> dict[str, Any]:
    """``run()`` at most once per (scope, key) within an hour; its answer again for retries."""
    if key is None:
        return run()
    if not _VALID.match(key):
        raise BadRequest("Idempotency-Key: must be 1-255 printable ASCII characters")
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
    from aws_lambda_powertools.utilities.idempotency.exceptions import (
        IdempotencyAlreadyInProgressError,
        IdempotencyValidationError,
    )

    config = IdempotencyConfig(event_key_jmespath="scope", payload_validation_jmespath="body",
                               expires_after_seconds=EXPIRES_AFTER_S, raise_on_no_idempotency_key=True)
    if lambda_context is not None:
        config.register_lambda_context(lambda_context)

    @idempotent_function(data_keyword_argument="request", persistence_store=_store(), config=config)
    def memory_hub_request(request: dict[str, Any]) -> dict[str, Any]:
        return run()

    try:
        return memory_hub_request(request={"scope": [*scope, key], "body": body})
    except IdempotencyValidationError:
        raise Unprocessable("Idempotency-Key: already used with a different body") from None
    except IdempotencyAlreadyInProgressError:
        raise Conflict("Idempotency-Key: the first request with this key is still running",
                       retryable=True) from None
