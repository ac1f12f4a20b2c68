"""FormationFunction: memory formation runs, from the formation queue (an SQS event source mapping
with partial batch responses). A message names one user's batch by ids; a run that fails on the
model is recorded and queued again with backoff by the run itself, so only an unexpected error
leaves a message to the queue (and, after a few receipts, to its dead-letter queue)."""

import json
from typing import Any

from memory_hub.clock import request_id
from memory_hub.domain.formation import run
from memory_hub.observability import logger
from memory_hub.settings import get_settings

MARGIN_S = 5.0

get_settings()  # a missing setting fails the cold start, naming the variable


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.set_correlation_id(request_id())

    def remaining_s() -> float:  # what is left of this invocation, less a margin for the answer
        left: int = context.get_remaining_time_in_millis()
        return max(0.0, left / 1000 - MARGIN_S)

    failed: list[dict[str, str]] = []
    for record in (event or {}).get("Records", []) if isinstance(event, dict) else []:
        message_id = str(record.get("messageId", ""))
        try:
            body = json.loads(record.get("body") or "")
        except ValueError:
            logger.warning("formation message that is not JSON dropped", extra={"message_id": message_id})
            continue
        if not isinstance(body, dict):
            continue
        try:
            run.handle(body, remaining_s)
        except Exception:
            logger.exception("formation run failed", extra={"message_id": message_id})
            failed.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failed}
