"""EmbedFunction: makes the embeddings a write could not make in its own time (Bedrock throttled or
failing, or a write of many items), from the embedding queue (an SQS event source mapping with
partial batch responses). A message names items by id; an item erased meanwhile, or a message of a
memory cleared since, does nothing. A message that fails again is delivered again later and, after
a few tries, lands in the dead-letter queue — the scheduled cleanup backfills what is still
missing either way."""

import json
from typing import Any

from memory_hub.clock import request_id
from memory_hub.domain import vector_upkeep
from memory_hub.observability import logger
from memory_hub.settings import get_settings

MARGIN_S = 5.0

get_settings()  # a missing setting fails the cold start, naming the variable


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.set_correlation_id(request_id())
    bodies: list[tuple[str, dict[str, Any]]] = []
    for record in (event or {}).get("Records", []) if isinstance(event, dict) else []:
        message_id = str(record.get("messageId", ""))
        try:
            body = json.loads(record.get("body") or "")
        except ValueError:
            logger.warning("embedding message that is not JSON dropped", extra={"message_id": message_id})
            continue
        if isinstance(body, dict):
            bodies.append((message_id, body))

    def remaining_s() -> float:  # what is left of this invocation, less a margin for the answer
        left: int = context.get_remaining_time_in_millis()
        return max(0.0, left / 1000 - MARGIN_S)

    again = vector_upkeep.consume(bodies, remaining_s)
    logger.info("embed", extra={"messages": len(bodies), "again": len(again)})
    return {"batchItemFailures": [{"itemIdentifier": m} for m in again]}
