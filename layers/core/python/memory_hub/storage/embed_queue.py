"""The queue of embeddings still to make (Amazon SQS): a message names items by id, never by content."""

from __future__ import annotations

import json
from typing import Any

from ..settings import get_settings
from . import aws

MAX_IDS = 1_000  # per message: well under SQS's 256 KiB body with ids of up to 64 characters


def send(body: dict[str, Any]) -> bool:
    """Queue one message; False when the stack has no queue."""
    url = get_settings().embed_queue_url
    if not url:
        return False
    aws.client("sqs").send_message(QueueUrl=url, MessageBody=json.dumps(body, separators=(",", ":")))
    return True
