"""The formation queue (Amazon SQS, a standard queue): a message asks for a run of one user's
formation and names the memory, the user and the batch (session, task) by id — never content.
Its per-message delay (up to 900 s) is the idle timer; a FIFO queue could not delay one message."""

from __future__ import annotations

import json
from typing import Any

from ..settings import get_settings
from . import aws

MAX_DELAY_S = 900  # SQS's longest per-message delay


def send(body: dict[str, Any], delay_s: int = 0) -> bool:
    """Queue one run request; False when the stack has no formation queue."""
    url = get_settings().formation_queue_url
    if not url:
        return False
    aws.client("sqs").send_message(
        QueueUrl=url,
        MessageBody=json.dumps(body, separators=(",", ":")),
        DelaySeconds=max(0, min(MAX_DELAY_S, int(delay_s))),
    )
    return True
