"""Handing work on to another invocation of the running function (Lambda's asynchronous Invoke)."""

from __future__ import annotations

import json
import os
from typing import Any

from . import aws

MAX_ASYNC_PAYLOAD = 256 * 1024  # Lambda's limit for an asynchronous invocation


def this_function_later(event: dict[str, Any]) -> None:
    """Invoke the running function again, asynchronously, with ``event``."""
    payload = json.dumps(event, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_ASYNC_PAYLOAD:
        raise ValueError("asynchronous event larger than Lambda accepts")
    aws.client("lambda").invoke(
        FunctionName=os.environ["AWS_LAMBDA_FUNCTION_NAME"], InvocationType="Event", Payload=payload
    )
