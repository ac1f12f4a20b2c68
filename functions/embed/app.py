"""EmbedFunction: puts the vectors of batched writes (``VectorWrites: Batched``) and makes the
embeddings a write could not make in its own time (Bedrock throttled or failing, or a write of many
items), from the embedding queues. Two ways in: EmbedQueue's event source mapping with partial
batch responses, and, with ``VectorDrainMinutes``, a schedule whose event (``{"drain": true}``) has
it receive VectorQueue (the batched writes' waiting vectors) itself, so that the writes of a longer
window share each ``PutVectors``.
A message names items by id; an item erased meanwhile, or a message of a memory cleared since, does
nothing. A message that fails again is delivered again later and, after a few tries, lands in the
dead-letter queue — the scheduled cleanup backfills what is still missing either way."""

import time
from dataclasses import asdict
from typing import Any

from memory_hub.clock import request_id
from memory_hub.domain import vector_upkeep
from memory_hub.observability import logger
from memory_hub.settings import get_settings

MARGIN_S = 5.0
# A batch of an event source is done within this, whatever the function's timeout (600 s with a
# drain): the queues' visibility timeout (660 s) is 6 x 60 s plus the longest batching window, as
# Lambda advises for a 60 s consumer, so a batch is never delivered again while it runs.
BATCH_BUDGET_S = 55.0

get_settings()  # a missing setting fails the cold start, naming the variable


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    logger.set_correlation_id(request_id())

    def remaining_s() -> float:  # what is left of this invocation, less a margin for the answer
        left: int = context.get_remaining_time_in_millis()
        return max(0.0, left / 1000 - MARGIN_S)

    if isinstance(event, dict) and event.get("drain") is True:
        done = asdict(vector_upkeep.drain(remaining_s))  # counts only: messages, again, rounds
        logger.info("embed drain", extra=done)
        return done

    began = time.monotonic()

    def batch_remaining_s() -> float:
        return min(remaining_s(), BATCH_BUDGET_S - (time.monotonic() - began))

    bodies: list[tuple[str, dict[str, Any]]] = []
    for record in (event or {}).get("Records", []) if isinstance(event, dict) else []:
        message_id = str(record.get("messageId", ""))
        body = vector_upkeep.body_of(message_id, record.get("body") or "")
        if body is not None:
            bodies.append((message_id, body))

    again = vector_upkeep.consume(bodies, batch_remaining_s)
    logger.info("embed", extra={"messages": len(bodies), "again": len(again)})
    return {"batchItemFailures": [{"itemIdentifier": m} for m in again]}
