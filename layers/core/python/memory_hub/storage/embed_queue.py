"""The queues of embeddings still to make (Amazon SQS): a message names items by id, never by content
(a batched write's also carries their vectors, sealed with keys only their waiting rows hold:
``waiting_vectors``).

``EmbedQueue``'s event source runs ``EmbedFunction`` on batches: what a write could not embed, and
batched writes' waiting vectors. With ``VectorDrainMinutes`` the waiting vectors go to
``VectorQueue`` instead (``send(…, to_drain=True)``), which the function drains itself on a schedule
(``receive``, then ``delete`` what it did), so a failed embedding is still retried within minutes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..observability import logger
from ..settings import get_settings
from . import aws

MAX_IDS = 1_000  # per message: well under SQS's 256 KiB body with ids of up to 64 characters
RECEIVE_MAX = 10  # messages a ReceiveMessage brings at most (SQS's limit), and a DeleteMessageBatch takes
# A drain's receives long-poll for a second: an empty answer then means the queue is empty, where a
# short poll (which asks a sample of SQS's servers) may answer empty while messages wait.
RECEIVE_WAIT_S = 1


@dataclass(frozen=True)
class Received:
    """One message a drain received: its id, the handle that deletes it, its body."""

    message_id: str
    receipt: str
    body: str


def _drained_url() -> str | None:
    """The queue a drain takes: VectorQueue with ``VectorDrainMinutes``, else EmbedQueue."""
    settings = get_settings()
    return settings.vector_queue_url or settings.embed_queue_url


def send(body: dict[str, Any], *, to_drain: bool = False) -> bool:
    """Queue one message (``to_drain``: of vectors waiting in DynamoDB, for the drain's queue when
    there is one); False when the stack has no queue."""
    url = _drained_url() if to_drain else get_settings().embed_queue_url
    if not url:
        return False
    aws.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(body, separators=(",", ":")))
    return True


def receive(most: int) -> list[Received]:
    """Up to ``most`` (at most RECEIVE_MAX) messages of the drain's queue; none when it is empty (or
    the stack has none). They stay invisible to other receives for the queue's visibility timeout."""
    url = _drained_url()
    if not url or most <= 0:
        return []
    answer = aws.client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=min(RECEIVE_MAX, most), WaitTimeSeconds=RECEIVE_WAIT_S
    )
    return [Received(m["MessageId"], m["ReceiptHandle"], m.get("Body") or "") for m in answer.get("Messages", [])]


def delete(done: Sequence[Received]) -> int:
    """Delete messages ``receive`` brought (RECEIVE_MAX a call); the number SQS deleted. One it did
    not delete comes back after the visibility timeout, and doing it again does nothing new."""
    url = _drained_url()
    deleted = 0
    for start in range(0, len(done), RECEIVE_MAX) if url else ():
        chunk = done[start : start + RECEIVE_MAX]
        answer = aws.client("sqs").delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m.receipt} for i, m in enumerate(chunk)]
        )
        deleted += len(answer.get("Successful", []))
        if answer.get("Failed"):
            logger.warning("embedding messages not deleted", extra={"failed": len(answer["Failed"])})
    return deleted
